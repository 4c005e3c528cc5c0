"""The S3 tokenizer against s3tokenizer 0.3.0 on random weights: the log-mel front end bit for
bit, and codes 100 % equal for every variant at every length rule (the shortest input, frame
and token boundaries, exactly 30 s, 30 s and a frame, the long-audio windows and their
merge), small and at the released sizes."""

import numpy as np
import pytest
import torch

import audiotok
from audiotok.errors import AudiotokError
from audiotok.models.s3.mel import log_mel, mel_filters
from tests.models.s3 import reference
from tests.models.s3.conftest import VARIANTS

# samples: 201 (the fewest), token edges at 320 / 640, 159/160/161 frames around a 25 Hz
# token's edge, 1 s and a sample, exactly 30 s, 30 s and one frame (windows), 52 s (a middle
# window), 53 s (5300 frames: the last window inside the overlap, tokens lost) and 104 s
LENGTHS = (201, 319, 320, 480, 640, 641, 25440, 25600, 25760, 16001, 480000, 480160, 832000,
           848000, 1664000)


def test_filterbank_and_log_mel_equal_the_package_bit_for_bit():
    s3 = reference.import_s3tokenizer()
    shipped = np.load(f"{s3.__path__[0]}/assets/mel_filters.npz")["mel_128"]
    assert np.array_equal(mel_filters(128).numpy(), shipped)
    for n in (201, 16001, 123457):
        w = reference.speech_like(n, seed=n)
        assert torch.equal(log_mel(w), s3.log_mel_spectrogram(w))


@pytest.mark.parametrize("variant", VARIANTS)
def test_codes_equal_the_package_at_every_length(s3_refs, variant):
    r = s3_refs(variant)
    codec = audiotok.load(r.pt, variant=variant)
    waves = [reference.speech_like(n, seed=n) for n in LENGTHS]
    want = [reference.reference_codes(r.ref, [w])[0] for w in waves]
    got = codec.encode([w[None] for w in waves], 16000)
    for i, (w, n) in enumerate(zip(want, LENGTHS, strict=True)):
        assert int(got.lengths[i]) == w.numel() == codec.num_frames(n), n
        reference.assert_codes_equal(r.ref, waves[i], got.tokens[i, 0, : w.numel()], w)
    frames = 848000 // 160  # 5300 mel frames: the windows' merge loses 2 s of tokens
    assert codec.num_frames(848000) == (1275 if variant != "v1" else 2550)
    lossless = audiotok.load(r.pt, variant=variant, merge="lossless")
    per_token = 2 if variant == "v1" else 4
    for n in (480160, 848000):
        w = reference.speech_like(n, seed=n)
        kept = lossless.encode(w[None], 16000).tokens[0, 0]
        assert kept.numel() == -(-(n // 160) // per_token) == lossless.num_frames(n)
        lost = want[LENGTHS.index(n)]
        cut = 1200 if variant == "v1" else 600  # the first window's tokens both keep
        reference.assert_codes_equal(r.ref, w, kept[:cut], lost[:cut])
    assert frames == 5300


@pytest.mark.parametrize("variant", VARIANTS)
def test_released_sizes_equal_the_package(s3_refs, variant):
    r = s3_refs(variant, "full")
    codec = audiotok.load(r.pt, variant=variant)
    waves = [reference.speech_like(n, seed=n) for n in (16160, 47999)]
    got = codec.encode([w[None] for w in waves], 16000)
    want = reference.reference_codes(r.ref, waves)  # (the package's padded batch)
    for i, w in enumerate(want):
        reference.assert_codes_equal(r.ref, waves[i], got.tokens[i, 0, : int(got.lengths[i])], w)
    assert len(set(want[1].tolist())) > 10  # (random weights that use the codebook)


def test_a_padded_batch_gives_each_item_its_codes_alone(s3_refs):
    r = s3_refs("v2_25hz")
    codec = audiotok.load(r.pt)
    waves = [reference.speech_like(n, seed=n) for n in (3000, 56000, 16001, 560000)]
    batch = codec.encode([w[None] for w in waves], 16000)
    for i, w in enumerate(waves):
        alone = codec.encode(w[None], 16000)
        n = int(alone.lengths[0])
        assert int(batch.lengths[i]) == n
        assert torch.equal(batch.tokens[i, 0, :n], alone.tokens[0, 0])


def test_short_inputs_and_decode_fail_clearly(s3_refs):
    codec = audiotok.load(s3_refs("v2_25hz").pt)
    with pytest.raises(AudiotokError, match="200 samples"):
        codec.encode(torch.zeros(1, 200), 16000)
    codes = codec.encode(reference.speech_like(4000)[None], 16000)
    with pytest.raises(AudiotokError, match="token-to-audio"):
        codec.decode(codes)
    assert codec.info()["decodes"] is False
