"""The Qwen3-TTS 12 Hz tokenizer against qwen-tts 0.1.1 (random weights, small and full size):
codes identical for 1, 1919, 1920, 1921, 24001 samples and 12 s (past the encoder's 250-step
window, which the reference's SDPA attention does not keep), ceil(N / 1920) frames; a batch
equal to its items alone (the reference's shorter item differs in its last frame); decoded
audio within 1e-4 of the reference's decoder pass and of its decode(); the "window" attention
option."""

import numpy as np
import pytest
import torch

import audiotok
from audiotok.errors import AudiotokError
from tests.models.qwen3_tts.conftest import FRAME, FULL_LENGTHS, SMALL_LENGTHS


def check_codes(codec, d, ref, lengths):
    for n in lengths:
        codes = codec.encode(torch.from_numpy(d[f"audio_{n}"]), 24000)
        assert codes.tokens.shape == (1, 16, -(-n // FRAME)), n
        assert np.array_equal(codes.tokens[0].numpy(), ref[f"codes_{n}"].T), n
    assert len(np.unique(ref[f"codes_{lengths[-1]}"])) > 30  # not degenerate


def check_batch(codec, d, ref):
    items = [torch.from_numpy(d["batch_0"]), torch.from_numpy(d["batch_1"])]
    batch = codec.encode(items, 24000)
    for i, item in enumerate(items):
        alone = codec.encode(item, 24000).tokens[0]
        assert torch.equal(batch.tokens[i, :, : batch.lengths[i]], alone)
    assert np.array_equal(batch.tokens[0].numpy(), ref["batch_codes_0"].T)
    short = ref["batch_codes_1"].T  # zero-padded in the reference's batch: its last frame
    assert np.array_equal(batch.tokens[1, :, :7].numpy(), short[:, :7])
    assert not np.array_equal(batch.tokens[1, :, 7].numpy(), short[:, 7])


def test_small_config(qwen_small):
    d, ref = qwen_small
    codec = audiotok.load(ref["model"])
    assert (codec.name, codec.num_codebooks, codec.samples_per_frame) == ("qwen3-tts", 16, FRAME)
    check_codes(codec, d, ref, SMALL_LENGTHS)
    check_batch(codec, d, ref)
    audio = codec.decode(torch.from_numpy(d["codes_x"].T))[0, 0].numpy()
    assert audio.shape == ref["onepass_x"].shape == (320 * FRAME,)
    np.testing.assert_allclose(audio, ref["onepass_x"], rtol=0, atol=1e-4)
    # the reference's decode(): one pass for 300 frames, then a chunk with 25 frames of left
    # context (here, with one small transformer layer, within 1e-4 of one pass as well; the
    # full-size difference is in benchmarks/codecs/compare.py --codec qwen3-tts and the docs)
    np.testing.assert_allclose(audio, ref["audio_x"], rtol=0, atol=1e-4)
    # 12 s: the encoder's steps past 250 attend to every earlier one, as the reference's do
    # (the codes of random weights do not show it; the latents do)
    n = SMALL_LENGTHS[-1]
    long = torch.from_numpy(d[f"audio_{n}"]).view(1, 1, -1)
    window = audiotok.load(ref["model"], attention="window")
    with torch.no_grad():
        full, windowed = codec.model.encoder.latent(long), window.model.encoder.latent(long)
    want = torch.from_numpy(ref[f"latent_{n}"])
    scale = want.abs().max()
    off_full, off_window = (full[0] - want).abs().max(), (windowed[0] - want).abs().max()
    print(f"latent off the reference's: full {off_full:.2e}, window {off_window:.2e}")
    assert off_full < 1e-5 * scale and off_window > 10 * off_full
    assert (windowed[..., :125] - full[..., :125]).abs().max() < 1e-5 * scale  # 250 steps
    with pytest.raises(AudiotokError, match="attention must be full or window"):
        audiotok.load(ref["model"], attention="sliding")


def test_full_size(qwen_full):
    d, ref = qwen_full
    codec = audiotok.load(ref["model"])
    assert codec.info()["parameters"] > 140_000_000  # (codebooks are buffers here)
    check_codes(codec, d, ref, FULL_LENGTHS)
    check_batch(codec, d, ref)
    audio = codec.decode(torch.from_numpy(d["codes_x"].T))[0, 0].numpy()
    assert np.sqrt(np.mean(audio**2)) > 0.05  # (the clamp at +-1 is reached: loud random audio)
    np.testing.assert_allclose(audio, ref["audio_x"], rtol=0, atol=1e-4)


def test_hub_name_and_a_model_folder(qwen_small, tmp_path):
    """`qwen3-tts-tokenizer` through a hub cache laid out as Qwen/Qwen3-TTS-Tokenizer-12Hz, and
    a Qwen3-TTS model folder holding the tokenizer in speech_tokenizer/; save_pretrained's
    folder loads back to the same codes; a folder without the weights is a clear error."""
    import shutil

    from audiotok.errors import CheckpointError
    from tests.test_hub import load_through_cache

    d, ref = qwen_small
    x = d["audio_24001"]
    stderr, codes = load_through_cache(tmp_path / "hub", "Qwen/Qwen3-TTS-Tokenizer-12Hz",
                                       ref["model"], "qwen3-tts-tokenizer", x, 24000)
    assert "Apache-2.0" in stderr
    assert np.array_equal(codes[0], ref["codes_24001"].T)
    repo = tmp_path / "Qwen3-TTS-12Hz-0.6B-Base"
    shutil.copytree(ref["model"], repo / "speech_tokenizer")
    (repo / "config.json").write_text('{"model_type": "qwen3_tts"}')
    codec = audiotok.load(repo)
    assert np.array_equal(codec.encode(x, 24000).tokens[0].numpy(), ref["codes_24001"].T)
    codec.save_pretrained(tmp_path / "ours")
    again = audiotok.load(tmp_path / "ours")
    assert torch.equal(again.encode(x, 24000).tokens, codec.encode(x, 24000).tokens)
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "config.json").write_text(
        '{"model_type": "qwen3_tts_tokenizer_12hz"}')
    with pytest.raises(CheckpointError, match="no Qwen3-TTS tokenizer weights"):
        audiotok.load(tmp_path / "empty")
