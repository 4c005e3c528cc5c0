"""SNAC test fixtures: the reference on random weights (tiny, tiny with local attention of 1
and of 2 coarse frames, and the released 24 and 32 kHz sizes), saved in the hub layout once per
session, and audiotok's codecs loaded from the files."""

import pytest

from tests.models.snac import reference

CONFIGS = {"tiny": reference.TINY, "tiny_attn": reference.TINY_ATTN,
           "24khz": reference.FULL_24, "32khz": reference.FULL_32, "44khz": reference.FULL_44}
STREAMED = ("tiny", "tiny_blocks", "24khz", "32khz")


@pytest.fixture(scope="session")
def snac_pair(tmp_path_factory):
    """name -> (reference model, saved folder), every configuration above and tiny_blocks."""
    pytest.importorskip("snac", reason="snac is the SNAC test oracle: pip install snac==1.2.1")
    out = {}
    for name, config in {**CONFIGS, "tiny_blocks": reference.TINY_BLOCKS}.items():
        model = reference.snac_model(config)
        out[name] = model, reference.save(model, config, tmp_path_factory.mktemp(name))
    return out


@pytest.fixture(scope="session")
def snac_codecs(snac_pair):
    """name -> audiotok's codec (seeded noise) for the streaming tests."""
    import audiotok

    return {name: audiotok.load(snac_pair[name][1]) for name in STREAMED}
