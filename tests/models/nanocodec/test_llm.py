"""Kani-TTS's token ids against its own NemoAudioPlayer.get_nano_codes (kani-tts 1.0.1,
`kani_tts/core.py` loaded by path with stand-ins for NeMo and its LM): exact round trips (codes
0 and 4031 included) and refusals with the place of the bad id."""

import importlib.util
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch

from audiotok.export.llm import TokenIdError, scheme_for

CORE = Path(__file__).resolve().parents[3] / ".refs" / "kani" / "kani_tts" / "core.py"


def _player():
    """kani_tts's NemoAudioPlayer without its codec (get_nano_codes needs only the ids)."""
    if not CORE.is_file():
        pytest.skip("kani-tts is not installed in .refs/kani (tests/install_references.sh)")
    stubs = {"nemo.collections.tts.models": {"AudioCodecModel": None},
             "kani_tts_core.model": {"FlashCompatibleLfm2ForCausalLM": None}}
    saved = {k: sys.modules.get(k) for k in (*stubs, "nemo", "nemo.collections",
                                            "nemo.collections.tts", "kani_tts_core")}
    for name, attrs in stubs.items():
        for i in range(1, name.count(".") + 1):
            sys.modules.setdefault(name.rsplit(".", i)[0], types.ModuleType(name.rsplit(".", i)[0]))
        module = types.ModuleType(name)
        module.__dict__.update(attrs)
        sys.modules[name] = module
    try:
        package = sys.modules["kani_tts_core"]
        package.__path__ = [str(CORE.parent)]
        spec = importlib.util.spec_from_file_location("kani_tts_core.core", CORE)
        core = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(core)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    player = object.__new__(core.NemoAudioPlayer)
    config = core.TTSConfig()
    for name, value in {"tokeniser_length": config.tokeniser_length, "codebook_size": 4032,
                        "start_of_speech": config.tokeniser_length + 1,
                        "end_of_speech": config.tokeniser_length + 2,
                        "audio_tokens_start": config.tokeniser_length + 10}.items():
        setattr(player, name, value)
    return player


def test_ids_are_kanis_both_ways():
    s = scheme_for("kani-tts", (4032,) * 4)
    tokens = np.random.default_rng(0).integers(0, 4032, (4, 9))
    tokens[0, 0], tokens[3, -1] = 0, 4031
    ids = s.to_ids(tokens)
    assert ids[0] == 64401 and ids[-1] == 64402 and ids.size == 4 * 9 + 2
    assert ids[1:5].tolist() == [64410 + 4032 * q + int(tokens[q, 0]) for q in range(4)]
    output = np.concatenate([[64403, 17, 2, 64404, 64405], ids, [64406]])  # a model's turn
    codes, length = _player().get_nano_codes(torch.from_numpy(output))
    assert np.array_equal(codes[0].numpy(), tokens) and int(length) == 9
    assert np.array_equal(s.from_ids(output), tokens)
    assert np.array_equal(s.from_ids(ids[1:-1]), tokens)  # bare audio ids
    assert np.array_equal(s.from_text(s.to_text(tokens)), tokens)


def test_bad_ids_are_refused_with_their_place():
    s = scheme_for("kani-tts", (4032,) * 4)
    ids = s.to_ids(np.zeros((4, 3), np.int64))
    with pytest.raises(TokenIdError, match="not whole frames of 4"):
        s.from_ids(np.concatenate([ids[:-1], [64410, 64402]]))
    bad = ids.copy()
    bad[1 + 4 + 2] = 64410  # frame 1, group 2: group 0's range
    with pytest.raises(TokenIdError, match="frame 1, group 2 is not a Kani-TTS audio id"):
        s.from_ids(bad)
    with pytest.raises(ValueError, match="Invalid audio tokens"):  # (Kani refuses it too)
        _player().get_nano_codes(torch.from_numpy(bad))
    with pytest.raises(TokenIdError, match="no audio between"):
        s.from_ids(ids[::-1])
    with pytest.raises(TokenIdError, match="4 codebooks of 4032"):
        scheme_for("kani-tts", (2016,) * 8)
