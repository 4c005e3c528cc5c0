"""Codes files: fish-speech .npy and the self-describing .codes archive."""

import json

import numpy as np
import pytest
import torch

from audiotok import Codes
from audiotok.codes import load_codes
from audiotok.errors import CodesError


def test_npy_is_fish_speech_layout(tmp_path, s2_codec, s2_golden):
    codes = s2_codec.encode(s2_golden["audio_30000"])
    codes.save(tmp_path / "a.npy")
    raw = np.load(tmp_path / "a.npy")
    assert raw.dtype == np.int64 and raw.shape == (10, 15)
    np.testing.assert_array_equal(raw, s2_golden["codes_30000"])
    back = load_codes(tmp_path / "a.npy")
    assert back.codec is None and back.lengths.tolist() == [15]
    assert torch.equal(s2_codec.decode(back), s2_codec.decode(s2_golden["codes_30000"]))
    np.save(tmp_path / "int32.npy", raw.astype(np.int32))  # any integer dtype reads
    assert torch.equal(load_codes(tmp_path / "int32.npy").tokens, back.tokens)


def test_codes_archive_roundtrip(tmp_path, s2_codec, s2_golden):
    items = [s2_golden["batch_audio_0"], s2_golden["batch_audio_1"], s2_golden["batch_audio_2"]]
    codes = s2_codec.encode(items)
    codes.save(tmp_path / "batch.codes")
    back = Codes.load(tmp_path / "batch.codes")
    assert torch.equal(back.tokens, codes.tokens)
    assert back.tokens.dtype == torch.int64
    assert back.lengths.tolist() == [15, 22, 7]
    assert back.num_samples.tolist() == [30000, 44100, 12345]
    assert (back.codec, back.sample_rate, back.samples_per_frame) == ("s2", 44100, 2048)
    assert back.frame_rate == 44100 / 2048
    assert back.meta["source_sample_rate"] == [44100] * 3
    assert torch.equal(s2_codec.decode(back), s2_codec.decode(codes))
    with np.load(tmp_path / "batch.codes") as z:
        assert z["tokens"].dtype == np.uint8  # smallest type that holds these tokens
        meta = json.loads(str(z["meta"]))
    assert meta["format"] == "audiotok-codes" and meta["codec"] == "s2"


def test_npy_holds_one_item(tmp_path, s2_codec, s2_golden):
    codes = s2_codec.encode([s2_golden["audio_1"], s2_golden["audio_2049"]])
    with pytest.raises(CodesError, match="holds one item"):
        codes.save(tmp_path / "two.npy")
    assert list(tmp_path.iterdir()) == []
    codes[1].save(tmp_path / "one.npy")
    assert np.load(tmp_path / "one.npy").shape == (10, 2)


@pytest.mark.parametrize("array, match", [
    (np.zeros((1, 10, 4), np.int64), "integer tokens \\[K, T\\]"),
    (np.zeros((10, 4), np.float32), "integer tokens \\[K, T\\]"),
])
def test_wrong_npy_shape(tmp_path, array, match):
    np.save(tmp_path / "bad.npy", array)
    with pytest.raises(CodesError, match=match):
        load_codes(tmp_path / "bad.npy")


def test_wrong_archive_contents(tmp_path):
    with open(tmp_path / "x.codes", "wb") as f:
        np.savez(f, tokens=np.zeros((10, 4), np.uint16), lengths=np.array([4]),
                 meta=np.array(json.dumps({"format": "audiotok-codes", "format_version": 1})))
    with pytest.raises(CodesError, match="tokens must be integer \\[B, K, T\\]"):
        load_codes(tmp_path / "x.codes")
    (tmp_path / "junk.codes").write_bytes(b"junk")
    with pytest.raises(CodesError, match="cannot read codes file"):
        load_codes(tmp_path / "junk.codes")
    with open(tmp_path / "other.codes", "wb") as f:
        np.savez(f, a=np.zeros(3))
    with pytest.raises(CodesError, match="not an audiotok codes file"):
        load_codes(tmp_path / "other.codes")


def test_codes_validation():
    with pytest.raises(CodesError, match="\\[B, K, T\\]"):
        Codes(tokens=torch.zeros(10, 4, dtype=torch.long), lengths=torch.tensor([4]))
    with pytest.raises(CodesError, match="do not fit"):
        Codes(tokens=torch.zeros(1, 10, 4, dtype=torch.long), lengths=torch.tensor([5]))
