"""DAC parity: tokens identical to the `dac` package (its padding: whole frames) and to
transformers' DacModel (no padding: padding="layer"), decoded audio within 1e-4 of both, for
lengths 1, hop - 1, hop, hop + 1, 3 hop + 7 and longer, from either checkpoint layout; fewer
codebooks; a padded batch equal to its items alone; the T * 320 - 8 decode length of the odd
stride."""

import numpy as np
import pytest
import torch

import audiotok
from audiotok.errors import AudioError, AudiotokError, CheckpointError
from tests.bounds import AUDIO_PARITY, SAME_MODEL
from tests.models.dac import reference


def noise(n: int, seed: int, batch: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return 0.2 * torch.randn(batch, 1, n, generator=g)


def lengths_for(hop: int, long: int) -> list[int]:
    return [1, hop - 1, hop, hop + 1, 3 * hop + 7, long]


@pytest.mark.parametrize("name, layout", [("tiny", "pth"), ("tiny", "hf_dir"),
                                          ("tiny_odd", "pth"), ("tiny_odd", "hf_dir")])
def test_codes_and_audio_equal_the_dac_package(dac_refs, name, layout):
    r = dac_refs(name)
    codec = audiotok.load(getattr(r, layout))
    assert codec.name == "dac" and codec.padding == "frame"
    hop = codec.samples_per_frame
    for i, n in enumerate(lengths_for(hop, 2 * codec.sample_rate // 3)):
        x = noise(n, i)
        want = reference.reference_codes(r.ref, x)
        codes = codec.encode(x[0], codec.sample_rate)
        assert torch.equal(codes.tokens, want), (name, layout, n)
        assert codes.tokens.shape[-1] == -(-n // hop)
        audio = codec.decode(codes)
        ref_audio = reference.reference_decode(r.ref, want)[..., :n]  # forward's trim
        assert audio.shape == ref_audio.shape, (n, audio.shape, ref_audio.shape)
        assert (audio - ref_audio).abs().max() <= AUDIO_PARITY
    assert len(torch.unique(want)) > want.shape[1] * 2  # the codes are not degenerate


@pytest.mark.parametrize("name", ["tiny", "tiny_odd"])
def test_layer_padding_equals_transformers(dac_refs, name):
    """transformers' DacModel called on raw audio: no padding, the strided convolutions'
    arithmetic decides the frames (floor at 44.1 kHz; one more for some lengths with a
    stride of 5); its decode gives T * hop (T * 320 - 8) samples."""
    r = dac_refs(name)
    codec = audiotok.load(r.hf_dir, padding="layer")
    hop = codec.samples_per_frame
    for i, n in enumerate([hop, hop + 1, 3 * hop + 7, 5 * hop - 1, 4 * hop + 4, 7919]):
        x = noise(n, 10 + i)
        with torch.no_grad():
            want = r.hf.encode(x).audio_codes
            want_audio = r.hf.decode(audio_codes=want).audio_values
        codes = codec.encode(x[0], codec.sample_rate)
        assert codec.num_frames(n) == want.shape[-1]
        assert torch.equal(codes.tokens, want), (name, n)
        audio = codec.decode(codes.tokens)[:, 0]
        assert audio.shape == want_audio.shape
        assert (audio - want_audio).abs().max() <= AUDIO_PARITY
    with pytest.raises(AudioError, match=r"less than one Descript Audio Codec \(DAC\) frame"):
        codec.encode(np.zeros(hop // 2 - 1, np.float32))


def test_fewer_codebooks_and_decoding_a_prefix(dac_refs):
    r = dac_refs("tiny")
    x = noise(5000, 3)
    codec = audiotok.load(r.pth, codebooks=4)
    codes = codec.encode(x[0], codec.sample_rate)
    want = reference.reference_codes(r.ref, x, 4)
    assert codes.tokens.shape[1] == codec.num_codebooks == 4
    assert torch.equal(codes.tokens, want)
    full = audiotok.load(r.pth).encode(x[0], codec.sample_rate).tokens
    assert torch.equal(full[:, :4], want)  # a prefix of all the codebooks' codes
    for k in (1, 4, 9):
        audio = codec.decode(full[:, :k])
        assert (audio - reference.reference_decode(r.ref, full[:, :k])).abs().max() <= AUDIO_PARITY
    with pytest.raises(AudiotokError, match="codebooks must be 1..9"):
        audiotok.load(r.pth, codebooks=10)
    with pytest.raises(AudiotokError, match="padding must be one of"):
        audiotok.load(r.pth, padding="same")


def test_a_padded_batch_equals_its_items_alone(dac_refs):
    """The references change a shorter item's last frame when it is padded to a longer one;
    audiotok encodes and decodes each length on its own."""
    r = dac_refs("tiny_odd")
    codec = audiotok.load(r.pth)
    items = [noise(n, 20 + i)[0, 0] for i, n in enumerate((9000, 9000, 4321, 321))]
    batch = codec.encode(items, codec.sample_rate)
    audio = codec.decode(batch)
    for i, item in enumerate(items):
        alone = codec.encode(item, codec.sample_rate)
        t = int(batch.lengths[i])
        assert torch.equal(batch.tokens[i, :, :t], alone.tokens[0])
        assert torch.equal(alone.tokens, reference.reference_codes(r.ref, item[None, None]))
        one = codec.decode(alone)  # (a batch of two may round differently: 1 ulp-level)
        assert (audio[i, :, : one.shape[-1]] - one[0]).abs().max() <= SAME_MODEL
        assert not audio[i, :, one.shape[-1]:].any()
    padded = torch.zeros(1, 1, 9000)
    padded[..., :4321] = items[2]
    assert not torch.equal(reference.reference_codes(r.ref, padded)[..., :14],
                           batch.tokens[2:3, :, :14])  # what padding does to the reference


@pytest.mark.parametrize("name", ["44khz", "24khz"])
def test_full_size(dac_refs, name):
    """The released sizes (76 M / 75 M parameters): 1 s and a ragged length, both layouts."""
    r = dac_refs(name)
    codec = audiotok.load(r.pth)
    hf_codec = audiotok.load(r.hf_dir)
    hop = codec.samples_per_frame
    for i, n in enumerate((codec.sample_rate // 4, 3 * hop + 7)):
        x = noise(n, 30 + i)
        want = reference.reference_codes(r.ref, x)
        codes = codec.encode(x[0], codec.sample_rate)
        assert torch.equal(codes.tokens, want)
        assert torch.equal(hf_codec.encode(x[0], codec.sample_rate).tokens, want)
        audio = codec.decode(codes)
        ref_audio = reference.reference_decode(r.ref, want)[..., :n]
        assert audio.shape == ref_audio.shape
        assert (audio - ref_audio).abs().max() <= 1e-4
    assert codec.config.decoded_samples(10) == (5120 if name == "44khz" else 3192)


def test_checkpoints_are_told_apart_and_saved(dac_refs, tmp_path):
    """weights*.pth is DAC's, not S2's (which claims any other .pth); a folder holding one
    loads; audiotok's save_pretrained loads back to the same codes; a weights file without
    the model's arguments is refused with the reason."""
    import shutil

    from audiotok.models import detect_family

    r = dac_refs("tiny")
    folder = tmp_path / "pth"
    folder.mkdir()
    shutil.copy(r.pth, folder / "weights_44khz_8kbps_0.0.1.pth")
    assert detect_family(folder).name == "dac"
    assert detect_family(folder / "weights_44khz_8kbps_0.0.1.pth").name == "dac"
    assert detect_family(r.hf_dir).name == "dac"
    codec = audiotok.load(folder)
    x = noise(3000, 5)
    tokens = codec.encode(x[0], codec.sample_rate).tokens
    codec.save_pretrained(tmp_path / "saved")
    again = audiotok.load(tmp_path / "saved")
    assert torch.equal(again.encode(x[0], codec.sample_rate).tokens, tokens)
    bare = tmp_path / "bare" / "weights.pth"
    bare.parent.mkdir()
    torch.save(r.ref.state_dict(), bare)
    with pytest.raises(CheckpointError, match="needs its model arguments"):
        audiotok.load(bare)


def test_a_narrow_latent_as_the_16kbps_model(tmp_path):
    """44.1 kHz 16 kbps: latent 128 and 18 codebooks (here 16 at the small size), which
    transformers cannot express; its weights.pth loads and equals the package."""
    kwargs = reference.TINY_LATENT
    model = reference.dac_model(kwargs)
    codec = audiotok.load(reference.save_pth(model, kwargs, tmp_path, "weights_44khz_16kbps.pth"))
    assert (codec.config.latent_dim, codec.num_codebooks) == (16, 18)
    x = noise(3000, 7)
    want = reference.reference_codes(model, x)
    codes = codec.encode(x[0], codec.sample_rate)
    assert torch.equal(codes.tokens, want)
    ref_audio = reference.reference_decode(model, want)[..., :3000]
    assert (codec.decode(codes) - ref_audio).abs().max() <= AUDIO_PARITY


def test_the_name_resolves_through_the_hub_cache(dac_refs, tmp_path):
    """`audiotok.load("dac-44khz")` offline, from a cache laid out as descript/dac_44khz is
    (the transformers layout), in a fresh process: the package's codes, the licence announced."""
    from tests.test_hub import load_through_cache

    r = dac_refs("tiny")
    x = noise(2000, 9)
    stderr, codes = load_through_cache(tmp_path, "descript/dac_44khz", r.hf_dir, "dac-44khz",
                                       x[0, 0].numpy(), 44100)
    assert "MIT licence" in stderr
    assert np.array_equal(codes, reference.reference_codes(r.ref, x).numpy())
