"""SNAC test fixtures: the reference on random weights (tiny, tiny with attention, and the
released 24 and 32 kHz sizes), saved in the hub layout, and audiotok's codec loaded from the
files; built once per module."""

import pytest

from tests.models.snac import reference

CONFIGS = {"tiny": reference.TINY, "tiny_attn": reference.TINY_ATTN,
           "24khz": reference.FULL_24, "32khz": reference.FULL_32}
STREAMED = {"tiny": reference.TINY, "tiny_blocks": reference.TINY_BLOCKS,
            "24khz": reference.FULL_24, "32khz": reference.FULL_32}


@pytest.fixture(scope="module")
def snac_pair(tmp_path_factory):
    """name -> (reference model, saved folder)."""
    pytest.importorskip("snac", reason="snac is the SNAC test oracle: pip install snac==1.2.1")
    out = {}
    for name, config in CONFIGS.items():
        model = reference.snac_model(config)
        out[name] = model, reference.save(model, config, tmp_path_factory.mktemp(name))
    return out


@pytest.fixture(scope="module")
def snac_codecs(tmp_path_factory):
    """name -> audiotok's codec (seeded noise) on random weights, for the streaming tests."""
    pytest.importorskip("snac", reason="snac is the SNAC test oracle: pip install snac==1.2.1")
    import audiotok

    return {name: audiotok.load(reference.save(reference.snac_model(config), config,
                                               tmp_path_factory.mktemp(name)))
            for name, config in STREAMED.items()}
