"""EnCodec 24 kHz parity: codes identical to the `encodec` package and to transformers'
EncodecModel at every bandwidth, decoded audio within AUDIO_PARITY of both, for lengths 1, hop - 1,
hop, hop + 1, 3 hop + 7, 10 hop + 1 and 1 s, from either checkpoint layout; the codebook and
bandwidth options (the package's default is all 32 codebooks, transformers' 2); a padded batch
equal to its items alone; detection, the hub name, and clear refusals."""

import numpy as np
import pytest
import torch

import audiotok
from audiotok.errors import AudiotokError
from tests.bounds import AUDIO_PARITY, ROUNDING
from tests.models.encodec import reference

LENGTHS = (1, 319, 320, 321, 967, 3201, 24000)


def noise(n: int, seed: int) -> torch.Tensor:
    return 0.2 * torch.randn(1, 1, n, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("layout", ["th", "hf_dir"])
def test_codes_and_audio_equal_the_encodec_package(enc_ref, layout):
    codec = audiotok.load(getattr(enc_ref, layout))
    assert (codec.name, codec.num_codebooks, codec.samples_per_frame) == ("encodec", 32, 320)
    for i, n in enumerate(LENGTHS):
        x = noise(n, i)
        want = reference.reference_codes(enc_ref.ref, x)
        codes = codec.encode(x[0], 24000)
        assert torch.equal(codes.tokens, want), (layout, n)
        assert codes.tokens.shape[-1] == -(-n // 320)
        audio = codec.decode(codes)
        ref_audio = reference.reference_decode(enc_ref.ref, want)[..., :n]
        assert audio.shape == ref_audio.shape
        assert (audio - ref_audio).abs().max() <= AUDIO_PARITY
    assert len(torch.unique(want)) > 200  # the codes are not degenerate


def test_every_bandwidth_equals_both_references(enc_ref):
    """Bandwidths 1.5-24 kbit/s give 2-32 codebooks, the package's and transformers' codes and
    audio; `codebooks=2` is transformers' default (bandwidth 1.5), all 32 the package's."""
    x = noise(5000, 11)
    with torch.no_grad():
        hf_default = enc_ref.hf.encode(x).audio_codes[0]
    for bandwidth, k in ((1.5, 2), (3.0, 4), (6.0, 8), (12.0, 16), (24.0, 32)):
        codec = audiotok.load(enc_ref.th, bandwidth=str(bandwidth))
        assert codec.num_codebooks == k and codec.bandwidth == bandwidth
        codes = codec.encode(x[0], 24000)
        want = reference.reference_codes(enc_ref.ref, x, bandwidth)
        assert torch.equal(codes.tokens, want)
        with torch.no_grad():
            hf = enc_ref.hf.encode(x, bandwidth=bandwidth)
            hf_audio = enc_ref.hf.decode(hf.audio_codes, hf.audio_scales).audio_values
        assert torch.equal(hf.audio_codes[0], want)
        assert (codec.decode(codes) - hf_audio[..., :5000]).abs().max() <= AUDIO_PARITY
    assert torch.equal(audiotok.load(enc_ref.hf_dir, codebooks=2).encode(x[0], 24000).tokens,
                       hf_default)


def test_a_padded_batch_equals_its_items_alone(enc_ref):
    """The reflection that completes the last frame reaches it: padding a shorter item to a
    longer one (as a batch does) changes its last frame in the reference; audiotok encodes
    each length on its own."""
    codec = audiotok.load(enc_ref.th)
    items = [noise(n, 20 + i)[0, 0] for i, n in enumerate((4000, 4000, 2345, 7))]
    batch = codec.encode(items, 24000)
    audio = codec.decode(batch)
    for i, item in enumerate(items):
        alone = codec.encode(item, 24000)
        t = int(batch.lengths[i])
        assert torch.equal(batch.tokens[i, :, :t], alone.tokens[0])
        assert torch.equal(alone.tokens, reference.reference_codes(enc_ref.ref, item[None, None]))
        one = codec.decode(alone)
        assert (audio[i, :, : one.shape[-1]] - one[0]).abs().max() <= ROUNDING
    padded = torch.zeros(1, 1, 4000)
    padded[..., :2345] = items[2]
    assert not torch.equal(reference.reference_codes(enc_ref.ref, padded)[..., :8],
                           batch.tokens[2:3, :, :8])


def test_options_and_refusals(enc_ref, tmp_path):
    from audiotok.models import detect_family

    with pytest.raises(AudiotokError, match=r"bandwidth must be one of \[1.5, 3.0"):
        audiotok.load(enc_ref.th, bandwidth="5")
    with pytest.raises(AudiotokError, match="codebooks or bandwidth, not both"):
        audiotok.load(enc_ref.th, codebooks=4, bandwidth="6")
    with pytest.raises(AudiotokError, match="codebooks must be 1..32"):
        audiotok.load(enc_ref.th, codebooks=33)
    assert detect_family(enc_ref.th).name == "encodec"  # not S2's (any other .pth/.th)
    assert detect_family(enc_ref.th.parent).name == "encodec"
    assert detect_family(enc_ref.hf_dir).name == "encodec"
    codec = audiotok.load(enc_ref.th, codebooks=8)
    tokens = codec.encode(noise(3000, 5)[0], 24000).tokens
    for k in (1, 8):
        got = codec.decode(tokens[:, :k])
        want = reference.reference_decode(enc_ref.ref, tokens[:, :k])
        assert got.shape == want.shape == (1, 1, 3200)  # raw tokens: whole frames
        assert (got - want).abs().max() <= AUDIO_PARITY


def test_the_name_resolves_through_the_hub_cache(enc_ref, tmp_path):
    from tests.test_hub import load_through_cache

    x = noise(2000, 9)
    stderr, codes = load_through_cache(tmp_path, "facebook/encodec_24khz", enc_ref.hf_dir,
                                       "encodec-24khz", x[0, 0].numpy(), 24000,
                                       options=", bandwidth='6'")
    assert "licence not stated" in stderr
    assert np.array_equal(codes, reference.reference_codes(enc_ref.ref, x, 6.0).numpy())


def test_bfloat16_runs_every_path(enc_ref):
    """dtype=bfloat16: the encoder and decoder in bfloat16, the codebooks in float32; offline
    and streamed, the codes mostly float32's and the audio near it (it crashed before: the
    input and the latents kept float32)."""
    x = noise(24000, 8)[0]
    exact = audiotok.load(enc_ref.th)
    codec = audiotok.load(enc_ref.th, dtype="bfloat16")
    codes, want = codec.encode(x, 24000), exact.encode(x, 24000)
    assert (codes.tokens[:, 0] == want.tokens[:, 0]).float().mean() >= 0.9  # the first book
    audio = codec.decode(codes)
    assert audio.dtype == torch.float32 and audio.shape == (1, 1, 24000)
    assert torch.isfinite(audio).all()
    assert (audio - exact.decode(codes)).abs().max() < 0.05 * exact.decode(codes).abs().max()
    with codec.stream_encoder() as enc:
        assert torch.equal(torch.cat([enc.push(x), enc.flush()], -1), codes.tokens)
    with codec.stream_decoder() as dec:
        streamed = torch.cat([dec.push(codes.tokens), dec.flush()], -1)
    assert streamed.shape == (1, 1, 24000) and torch.isfinite(streamed).all()


def test_long_codes_decode_in_pieces(enc_ref, monkeypatch):
    """Codes of two pieces or more decode through the stateful stream, a piece a push (here
    0.5 s pieces, 38 frames): the package's audio within AUDIO_PARITY and one pass's within
    ROUNDING, for a batch of two lengths too (each length its own stream)."""
    codec = audiotok.load(enc_ref.th)
    monkeypatch.setattr(codec, "DECODE_PIECE_SECONDS", 0.5)
    items = [noise(n, 20 + n % 7)[0] for n in (48000 + 77, 30000)]
    codes = codec.encode(items, 24000)
    audio = codec.decode(codes)
    for i, item in enumerate(items):
        tokens = codes.tokens[i : i + 1, :, : codes.lengths[i]]
        want = reference.reference_decode(enc_ref.ref, tokens)[..., : item.shape[-1]]
        got = audio[i : i + 1, :, : item.shape[-1]]
        assert (got - want).abs().max() <= AUDIO_PARITY, i
        with torch.inference_mode():
            one_pass = codec.model.decode(tokens)[..., : item.shape[-1]]
        assert 0 < (got - one_pass).abs().max() <= ROUNDING, i  # (0: the pieces were not used)


def test_long_audio_encodes_in_pieces(enc_ref, monkeypatch):
    """Audio of two pieces or more (2 s each) encodes its convolutions through the stream's
    chain, the last 1-2 pieces with the end in one call, then the LSTM on the whole: the
    package's codes, in a batch of two lengths too, and the one pass's latents (bit for bit at
    most lengths on a 2-core AMD EPYC; at 598016 samples the one pass's 1x1 kernels sum in
    another order there: 6e-8)."""
    from audiotok.models.encodec import stream

    codec = audiotok.load(enc_ref.th)
    assert codec.encode_piece_seconds == 2.0
    used = []
    real = stream.latents_in_pieces
    monkeypatch.setattr(stream, "latents_in_pieces",
                        lambda *a: used.append(a[1].shape[-1]) or real(*a))
    items = [noise(n, 30 + i)[0] for i, n in enumerate((96000 + 77, 247466))]
    codes = codec.encode(items, 24000)
    assert used == [96077, 247466]
    for i, item in enumerate(items):
        want = reference.reference_codes(enc_ref.ref, item[None])
        assert torch.equal(codes.tokens[i : i + 1, :, : codes.lengths[i]], want), i
    g = torch.Generator().manual_seed(5)
    with torch.inference_mode():
        for n in (98659, 598016):
            x = 0.2 * torch.randn(1, 1, n, generator=g)
            assert (real(codec.model, x, 48000) - codec.model.encoder(x)).abs().max() <= ROUNDING
    codec.encode_piece_seconds = None  # one pass
    assert torch.equal(codec.encode(items, 24000).tokens, codes.tokens)
    assert len(used) == 2


@pytest.mark.parametrize("rule", ["mkl", "onednn"])
def test_the_code_search_products_are_the_packages_sums(rule, monkeypatch):
    """The search's 2 x @ embed^T: from 8 rows on, under the oneDNN rule, by oneDNN, whose sums
    at EnCodec's width (128) are MKL's bit for bit on the CPUs measured; below 8 rows, and
    under the MKL rule, the package's own call."""
    from audiotok.nn import seanet
    from audiotok.nn.kernels import products
    from audiotok.nn.kernels.ruleset import use_rules

    by_onednn = []
    real = products.onednn_linear
    monkeypatch.setattr(products, "onednn_linear",
                        lambda x, *a: by_onednn.append(x.shape[0]) or real(x, *a))
    g = torch.Generator().manual_seed(3)
    embed = torch.randn(1024, 128, generator=g)
    with use_rules(products=rule):
        for rows in (1, 7, 8, 150, 751):
            x = 3 * torch.randn(rows, 128, generator=g)
            assert torch.equal(seanet._doubled_products(x, embed), 2 * x @ embed.t()), rows
    assert by_onednn == ([8, 150, 751] if rule == "onednn" else [])
