"""Higgs Audio v2's token layout: Boson's own delay pattern (its collator's BOS/EOS columns and
build_delay_pattern_mask) and its serve engine's way back, exact round trips (codes 0 and 1023
included), refusals with the place of the bad id."""

import numpy as np
import pytest
import torch

from audiotok.export.llm import TokenIdError, scheme_for
from tests.models.xcodec import reference


def _boson_utils():
    """boson_multimodal/model/higgs_audio/utils.py, loaded by path (its package imports the
    LM, which needs an older transformers)."""
    import importlib.util

    reference.boson()
    path = reference.REFS / "boson_multimodal" / "model" / "higgs_audio" / "utils.py"
    spec = importlib.util.spec_from_file_location("higgs_audio_utils", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_ids_are_bosons_delay_pattern_and_back():
    utils = _boson_utils()
    s = scheme_for("higgs-audio-v2", (1024,) * 8)
    tokens = np.random.default_rng(0).integers(0, 1024, (8, 13))
    tokens[0, 0], tokens[7, -1] = 0, 1023
    wrapped = torch.cat([torch.full((8, 1), 1024), torch.from_numpy(tokens),
                         torch.full((8, 1), 1025)], 1)
    want, _ = utils.build_delay_pattern_mask(wrapped[None], 1024, 1025)
    ids = s.to_ids(tokens)
    assert ids.shape == (8, 13 + 9) and np.array_equal(ids, want[0].numpy())
    served = utils.revert_delay_pattern(want[0]).clip(0, 1023)[:, 1:-1]  # serve_engine's
    assert np.array_equal(s.from_ids(ids), tokens)
    assert np.array_equal(s.from_ids(ids, clamp=True), served.numpy())
    assert np.array_equal(s.from_text(s.to_text(tokens)), tokens)
    assert s.sequence(tokens)[:8].tolist() == [k * 1026 + 1024 for k in range(8)]


def test_bad_ids_are_refused_with_their_place():
    s = scheme_for("higgs-audio-v2", (1024,) * 8)
    ids = s.to_ids(np.zeros((8, 4), np.int64))
    bad = ids.copy()
    bad[3, 1] = 7  # a code where the pattern has BOS
    with pytest.raises(TokenIdError, match="codebook 3, step 1: the delay pattern has 1024"):
        s.from_ids(bad)
    bad = ids.copy()
    bad[2, 4] = 1025  # an EOS among the codes
    with pytest.raises(TokenIdError, match="id 1025 at codebook 2, step 4 is not a code"):
        s.from_ids(bad)
    assert s.from_ids(bad, clamp=True)[2, 1] == 1023
    with pytest.raises(TokenIdError, match=r"expected Higgs Audio v2 ids \[8"):
        s.from_ids(ids[:7])
    with pytest.raises(TokenIdError, match="not in codebook 1's table"):
        s.from_text("".join(f"<|higgs_{i}|>" for i in range(8)))
    with pytest.raises(TokenIdError, match="1024 codes a codebook"):
        scheme_for("higgs-audio-v2", (2048,) * 8)
