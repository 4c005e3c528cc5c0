"""Reduced precision (opt-in): bfloat16/float16 weights with float32 islands."""

import numpy as np
import pytest
import torch

import audiotok
from audiotok.errors import AudiotokError
from tests.conftest import S2_TINY, XCODEC2_TINY


def snr_db(ref: np.ndarray, x: np.ndarray) -> float:
    return float(10 * np.log10((ref**2).sum() / ((x - ref) ** 2).sum()))


@pytest.mark.parametrize("dtype, min_tokens, min_snr", [(torch.bfloat16, 0.9, 30.0),
                                                        (torch.float16, 0.99, 45.0)])
def test_s2_reduced_precision(s2_golden, dtype, min_tokens, min_snr):
    codec = audiotok.load(S2_TINY / "codec.pth", dtype=dtype)
    m = codec.model
    assert m.decoder.model[1].block[1].conv.weight.dtype == dtype
    full = audiotok.load(S2_TINY / "codec.pth").model
    for island, same in zip(m.float32_islands(), full.float32_islands(), strict=True):
        # float32, and never rounded to the reduced type on the way
        for (name, p), q in zip(island.state_dict().items(), same.state_dict().values(),
                                strict=True):
            assert p.dtype == torch.float32 and torch.equal(p, q), name
    codes = codec.encode(s2_golden["audio_352805"])
    same = (codes.tokens[0].numpy() == s2_golden["codes_352805"]).mean()
    audio = codec.decode(s2_golden["codes_352805"])
    assert audio.dtype == torch.float32
    assert same >= min_tokens
    assert snr_db(s2_golden["decoded_352805"], audio[0, 0].numpy()) >= min_snr
    with codec.stream_decoder() as dec:  # streaming works in reduced precision too
        pcm = dec.push(torch.from_numpy(s2_golden["codes_352805"][None, :, :5]))
    assert pcm.dtype == torch.float32 and pcm.shape == (1, 1, 5 * 2048)


def test_xcodec2_bfloat16(xc_golden):
    codec = audiotok.load(XCODEC2_TINY / "hf", dtype=torch.bfloat16)
    assert codec.model.acoustic_decoder.layers[0].mlp.fc1.weight.dtype == torch.bfloat16
    assert codec.model.quantizer.project_in.weight.dtype == torch.float32
    codes = codec.encode(xc_golden["n144000_waveform"])
    same = (codes.tokens[0].numpy() == xc_golden["n144000_codes"][0]).mean()
    audio = codec.decode(xc_golden["n144000_codes"][0])
    assert same >= 0.5  # an index needs all 8 FSQ digits equal; measured 0.65
    assert snr_db(xc_golden["n144000_audio"], audio.numpy()) >= 30.0
    lengths = xc_golden["batch_lengths"].tolist()
    batch = codec.encode([xc_golden["batch_waveforms"][i, 0, :n] for i, n in enumerate(lengths)])
    assert codec.decode(batch).shape == (3, 1, max(lengths))


def test_integer_dtype_rejected():
    with pytest.raises(ValueError, match="floating"):
        audiotok.load(S2_TINY / "codec.pth", dtype=torch.int8)


def test_dtype_by_name():
    codec = audiotok.load(S2_TINY / "codec.pth", dtype="bfloat16")
    assert codec.dtype == torch.bfloat16
    with pytest.raises(AudiotokError, match="unknown dtype 'float8'"):
        audiotok.load(S2_TINY / "codec.pth", dtype="float8")
