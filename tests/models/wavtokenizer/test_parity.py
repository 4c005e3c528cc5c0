"""WavTokenizer against its reference code (outetts 0.4.4's vendored copy) on random weights:
codes identical at lengths that hit every padding branch, each item of a ragged batch as the
reference gives it alone; audio within 1e-4; every checkpoint layout."""

import pytest
import torch

import audiotok
from audiotok.errors import CheckpointError
from audiotok.models.wavtokenizer.codec import WavTokenizerCodec
from tests.models.wavtokenizer import reference

# samples: under one frame (down to 1: the reflection zero-extends first), around one and two
# frames at hop 320 and 600, a second and a bit
LENGTHS = (1, 200, 319, 320, 321, 599, 600, 601, 24037)


def _noise(n: int, seed: int) -> torch.Tensor:
    return 0.1 * torch.randn(n, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("name", ["tiny", "tiny_40"])
def test_codes_equal_the_reference_alone_at_every_length(wt_refs, name):
    r = wt_refs(name)
    xs = [_noise(n, i) for i, n in enumerate(LENGTHS)]
    got = r.codec.encode(xs[::-1], sample_rate=24000)  # one ragged batch
    distinct = set()
    for j, x in enumerate(xs[::-1]):
        want = reference.codes(r.ref, x[None])[0]
        n = int(got.lengths[j])
        assert n == want.shape[-1] == -(-x.numel() // r.codec.samples_per_frame)
        assert torch.equal(got.tokens[j, :, :n], want), x.numel()
        distinct |= set(want.flatten().tolist())
    assert len(distinct) > 20  # (the search is not trivial)


def test_long_inputs_encode_in_windows(wt_refs, monkeypatch):
    """Audio of two windows or more (2 s each) runs the encoder's convolutions window by
    window, the LSTM on the whole: the reference's codes, and the one pass's."""
    from audiotok.nn import seanet

    r = wt_refs("tiny")
    used = []
    real = seanet.latents_in_windows
    monkeypatch.setattr(seanet, "latents_in_windows",
                        lambda *a: used.append(a[1].shape[-1]) or real(*a))
    xs = [_noise(120000 + 77, 11), _noise(96000, 12), _noise(60000, 13)]
    got = r.codec.encode(xs, sample_rate=24000)
    assert sorted(used) == [96000, 120077]  # (not the third: under two windows)
    for i, x in enumerate(xs):
        want = reference.codes(r.ref, x[None])[0]
        assert torch.equal(got.tokens[i, :, : got.lengths[i]], want), i
    monkeypatch.setattr(r.codec, "encode_window_seconds", None)  # one pass
    assert torch.equal(r.codec.encode(xs, sample_rate=24000).tokens, got.tokens)
    assert len(used) == 2


def test_the_reference_is_not_batch_invariant_and_we_are(wt_refs):
    """The reference's zero-padded batch changes a shorter item's codes (the reflection at its
    end reads the zeros); ours equal the item alone (test above)."""
    r = wt_refs("tiny")
    short, long = _noise(7000, 1), _noise(16000, 2)
    batch = torch.stack([torch.nn.functional.pad(short, (0, 9000)), long])
    padded = reference.codes(r.ref, batch)[0, :, : -(-7000 // 320)]
    alone = reference.codes(r.ref, short[None])[0]
    assert not torch.equal(padded, alone)


@pytest.mark.parametrize("name", ["tiny", "tiny_40"])
def test_audio_within_1e_4_of_the_reference(wt_refs, name):
    r = wt_refs(name)
    g = torch.Generator().manual_seed(5)
    size = r.codec.codebook_sizes[0]
    for frames in ((1, 9, 40), (17,)):
        codes = [torch.randint(0, size, (1, t), generator=g) for t in frames]
        tokens = torch.zeros(len(codes), 1, max(frames), dtype=torch.long)
        for i, c in enumerate(codes):
            tokens[i, :, : c.shape[-1]] = c
        audio = r.codec.decode(audiotok.Codes(tokens, torch.tensor(frames)))  # ragged
        for i, c in enumerate(codes):
            want = reference.decode(r.ref, c[None])[0]
            assert want.shape[-1] == c.shape[-1] * r.codec.samples_per_frame
            got = audio[i, 0, : want.shape[-1]]
            assert (got - want).abs().max() <= 1e-4
            assert want.abs().max() > 1e-2  # (not silence)


def test_the_released_size(wt_refs):
    """768 wide, 12 ConvNeXt blocks, 4096 codes: 2 s encoded and decoded."""
    r = wt_refs("full")
    x = _noise(48000 + 123, 9)
    want = reference.codes(r.ref, x[None])[0]
    got = r.codec.encode(x, sample_rate=24000)
    assert torch.equal(got.tokens[0], want)
    audio = r.codec.decode(want[None])[0, 0]
    assert (audio - reference.decode(r.ref, want[None])[0]).abs().max() <= 1e-4


def test_outettss_interface_folder(wt_refs, tmp_path):
    """OuteTTS's repository layout loads (the folder, or its encoder file as the hub preset
    fetches it) to the same model, and gives what OuteTTS's own AudioCodec gives."""
    r, folder = wt_refs("tiny"), wt_refs("interface")
    x = _noise(12345, 3)
    want = r.codec.encode(x, sample_rate=24000)
    outetts = reference.interface_codec(folder)
    with reference.on_path(), torch.inference_mode():
        theirs = outetts.encode(x[None])  # [n_q, B, T]
        heard = outetts.decode(theirs)  # [B, N]
    assert torch.equal(theirs[:, 0], want.tokens[0])
    for path in (folder, folder / "encoder" / "encoder_model.pt"):
        codec = audiotok.load(path)
        assert codec.name == "wavtokenizer"
        assert torch.equal(codec.encode(x, sample_rate=24000).tokens, want.tokens)
        audio = codec.decode(theirs[:, 0])  # (no sample count: the whole frames)
        assert (audio[0, 0] - heard[0]).abs().max() <= 1e-4


def test_saved_and_reloaded(wt_refs, tmp_path):
    r = wt_refs("tiny_40")
    r.codec.save_pretrained(tmp_path / "saved")
    again = audiotok.load(tmp_path / "saved")
    assert again.config == r.codec.config and again.samples_per_frame == 600
    x = _noise(5000, 4)
    assert torch.equal(again.encode(x, sample_rate=24000).tokens,
                       r.codec.encode(x, sample_rate=24000).tokens)


def test_bad_checkpoints_get_clear_errors(wt_refs, tmp_path):
    r = wt_refs("tiny")
    other = tmp_path / "other.ckpt"
    torch.save({"state_dict": {"generator.conv.weight": torch.zeros(2)}}, other)
    with pytest.raises(CheckpointError, match="not a WavTokenizer checkpoint"):
        WavTokenizerCodec.from_checkpoint(other)
    # an interface folder whose decoder holds another codebook
    folder = reference.save_interface(r.ref, tmp_path / "mixed")
    path = folder / "decoder" / "decoder_model.pt"
    saved = torch.load(path, weights_only=True)
    saved["model_state_dict"]["codebook_weights"] = saved["codebook_weights"] + 1
    torch.save(saved, path)
    with pytest.raises(CheckpointError, match="codebook_weights differ"):
        audiotok.load(folder)
    truncated = tmp_path / "cut.ckpt"
    truncated.write_bytes(r.ckpt.read_bytes()[:5000])
    for load in (audiotok.load, WavTokenizerCodec.from_checkpoint):
        with pytest.raises(CheckpointError, match="truncated, corrupt or not a checkpoint"):
            load(truncated)


def test_presets_through_a_hub_cache(wt_refs, tmp_path):
    """`wavtokenizer-large-75` fetches the .ckpt of novateur/WavTokenizer-large-speech-75token,
    `wavtokenizer-outetts` OuteTTS's folder (its encoder file first, the decoder's beside it);
    here from a local cache laid out as the hub's, offline."""
    from tests.test_hub import COMMIT, _run, cache_repo

    r, folder = wt_refs("tiny"), wt_refs("interface")
    cache = tmp_path / "cache"
    cache_repo(cache, "novateur/WavTokenizer-large-speech-75token",
               {"wavtokenizer_large_speech_320_24k.ckpt": r.ckpt})
    cache_repo(cache, "OuteAI/wavtokenizer-large-75token-interface",
               {f"{part}/{name}": folder / part / name for part in ("encoder", "decoder")
                for name in (f"{part}_model.pt", "config.json")})
    x = _noise(4000, 6)
    torch.save(x, tmp_path / "x.pt")
    code = ("import audiotok, torch\n"
            f"x = torch.load(r'{tmp_path / 'x.pt'}')\n"
            "for name in ('wavtokenizer-large-75', 'wavtokenizer-outetts'):\n"
            "    c = audiotok.load(name)\n"
            "    t = c.encode(x, 24000).tokens.flatten().tolist()\n"
            "    print(c.source.split('snapshots')[1], ','.join(map(str, t)))\n")
    out = _run(code, {"HF_HUB_CACHE": str(cache), "HF_HOME": str(tmp_path / "home")})
    assert out.returncode == 0, out.stderr
    want = ",".join(map(str, r.codec.encode(x, sample_rate=24000).tokens.flatten().tolist()))
    assert out.stdout.split() == [f"/{COMMIT}/wavtokenizer_large_speech_320_24k.ckpt", want,
                                  f"/{COMMIT}", want]
    assert out.stderr.count("MIT licence") == 1
