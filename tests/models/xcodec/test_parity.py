"""The Higgs Audio v2 tokenizer against Boson's code (boson-multimodal 0.1.1) and transformers'
HiggsAudioV2TokenizerModel on random weights: codes identical at lengths that hit every
padding branch (each item of a ragged batch as the reference gives it alone), with each
reference's padding; audio within 1e-4; both checkpoint layouts."""

import pytest
import torch

import audiotok
from audiotok.errors import AudioError, AudiotokError, CheckpointError
from audiotok.models.xcodec.codec import XCodecCodec
from tests.models.xcodec import reference

# samples: N mod 960 at the edges of the pad path (119..631: the acoustic encoder runs on
# padded audio) and outside it, after a second or two
LENGTHS = tuple(24000 + r for r in (0, 118, 119, 500, 631, 632, 959)) + (48000 + 7,)


def _noise(n: int, seed: int) -> torch.Tensor:
    return 0.1 * torch.randn(n, generator=torch.Generator().manual_seed(seed))


def test_codes_equal_bosons_alone_at_every_length(higgs):
    r = higgs("tiny")
    xs = [_noise(n, i) for i, n in enumerate(LENGTHS)]
    got = r.codec.encode(xs[::-1], sample_rate=24000)  # one ragged batch
    distinct = set()
    for j, x in enumerate(xs[::-1]):
        want = reference.codes(r.ref, x[None, None])[0]
        n = int(got.lengths[j])
        assert n == want.shape[-1] == x.numel() // 960 + (x.numel() % 960 >= 119)
        assert torch.equal(got.tokens[j, :, :n], want), x.numel()
        distinct |= set(want.flatten().tolist())
    assert len(distinct) > 300  # (the search is not trivial)


def test_codes_equal_transformers_with_its_padding(higgs):
    """transformers' folder loads to the same model: with padding="transformers" its codes
    (hop / 2 zeros each side on the pad path), with the default Boson's."""
    r = higgs.with_hf("tiny")
    xs = [_noise(n, 10 + i) for i, n in enumerate(LENGTHS)]
    got = r.hf_codec.encode(xs, sample_rate=24000)
    boson = audiotok.load(r.hf_folder).encode(xs, sample_rate=24000)
    assert torch.equal(boson.tokens, r.codec.encode(xs, sample_rate=24000).tokens)
    latents_differ = False
    for j, x in enumerate(xs):
        want = reference.hf_codes(r.hf, x[None, None])[0]
        assert torch.equal(got.tokens[j, :, : got.lengths[j]], want), x.numel()
        latents_differ |= not torch.equal(boson.tokens[j, :, : boson.lengths[j]], want)
    assert latents_differ  # (the two paddings give other codes on the pad path)


def test_the_references_are_not_batch_invariant_and_we_are(higgs):
    """transformers' zero-padded batch changes a shorter item's codes (HuBERT's GroupNorm and
    attention see the zeros; Boson's code refuses such a batch on its pad path); ours equal the
    item alone (the tests above run ragged batches)."""
    r = higgs.with_hf("tiny")
    short, long = _noise(24000, 1), _noise(48000, 2)
    batch = torch.stack([torch.nn.functional.pad(short, (0, 24000)), long])[:, None]
    padded = reference.hf_codes(r.hf, batch)[0, :, :25]
    alone = reference.hf_codes(r.hf, short[None, None])[0]
    assert not torch.equal(padded, alone)
    with pytest.raises(RuntimeError):  # Boson's pad path builds a batch of one from B rows
        reference.codes(r.ref, torch.stack([_noise(24500, 3), _noise(24500, 4)])[:, None])


def test_audio_within_1e_4_of_both_references(higgs):
    r = higgs.with_hf("tiny")
    g = torch.Generator().manual_seed(5)
    frames = (1, 9, 40)
    codes = [torch.randint(0, 1024, (8, t), generator=g) for t in frames]
    tokens = torch.zeros(len(codes), 8, max(frames), dtype=torch.long)
    for i, c in enumerate(codes):
        tokens[i, :, : c.shape[-1]] = c
    audio = r.codec.decode(audiotok.Codes(tokens, torch.tensor(frames)))  # ragged
    for i, c in enumerate(codes):
        want = reference.decode(r.ref, c[None])[0, 0]
        assert want.shape[-1] == c.shape[-1] * 960
        assert (audio[i, 0, : want.shape[-1]] - want).abs().max() <= 1e-4
        assert (reference.hf_decode(r.hf, c[None])[0, 0] - want).abs().max() <= 1e-4
        assert want.abs().max() > 1e-2  # (not silence)


def test_fewer_codebooks(higgs, tmp_path):
    """codebooks=n: the first n codes of each frame (Boson's bandwidth n x 0.25 kbps); any
    leading codebooks decode, as Boson decodes them."""
    r = higgs("tiny")
    x = _noise(30000, 6)
    two = XCodecCodec.from_checkpoint(r.folder / "model.pth", codebooks=2)
    got = two.encode(x, sample_rate=24000)
    want = reference.codes(r.ref, x[None, None])[0]
    assert got.tokens.shape[1] == 2 and torch.equal(got.tokens[0], want[:2])
    heard = r.codec.decode(want[None, :3])[0, 0]
    assert (heard - reference.decode(r.ref, want[None, :3])[0, 0]).abs().max() <= 1e-4
    with pytest.raises(AudiotokError, match="codebooks"):
        XCodecCodec.from_checkpoint(r.folder / "model.pth", codebooks=9)


def test_the_released_size(higgs):
    """HuBERT-base (12 layers), the released acoustic widths (64 / 1024) and D 256: a second
    and a bit on the pad path, encoded and decoded."""
    r = higgs("full")
    x = _noise(24000 + 500, 9)
    want = reference.codes(r.ref, x[None, None])[0]
    got = r.codec.encode(x, sample_rate=24000)
    assert torch.equal(got.tokens[0], want)
    audio = r.codec.decode(want[None])[0, 0]
    assert (audio - reference.decode(r.ref, want[None])[0, 0]).abs().max() <= 1e-4


def test_short_inputs(higgs):
    """119 samples give a frame (HuBERT's first window), fewer a clear error."""
    codec = higgs("tiny").codec
    assert codec.encode(_noise(119, 1), sample_rate=24000).tokens.shape == (1, 8, 1)
    with pytest.raises(AudioError, match="at least 119 samples"):
        codec.encode(_noise(118, 1), sample_rate=24000)


def test_saved_and_reloaded(higgs, tmp_path):
    r = higgs("tiny")
    r.codec.save_pretrained(tmp_path / "saved")
    again = audiotok.load(tmp_path / "saved")
    assert again.config == r.codec.config and again.title == "Higgs Audio v2 tokenizer"
    x = _noise(5000, 4)
    assert torch.equal(again.encode(x, sample_rate=24000).tokens,
                       r.codec.encode(x, sample_rate=24000).tokens)


def test_bad_checkpoints_get_clear_errors(higgs, tmp_path):
    r = higgs("tiny")
    lone = tmp_path / "lone"
    lone.mkdir()
    (lone / "model.pth").write_bytes((r.folder / "model.pth").read_bytes())
    with pytest.raises(CheckpointError, match="needs its config beside it"):
        XCodecCodec.from_checkpoint(lone / "model.pth")
    other = tmp_path / "other.pth"
    torch.save({"generator.conv.weight": torch.zeros(2)}, other)
    with pytest.raises(CheckpointError, match="not an X-Codec checkpoint"):
        XCodecCodec.from_checkpoint(other)
    sd = torch.load(r.folder / "model.pth", weights_only=True)
    torch.save({k: v for k, v in sd.items() if not k.startswith("semantic_model.")},
               lone / "model.pth")
    (lone / "config.json").write_text((r.folder / "config.json").read_text())
    with pytest.raises(CheckpointError, match="no semantic_model"):
        audiotok.load(lone)
    truncated = tmp_path / "cut" / "model.pth"
    truncated.parent.mkdir()
    (truncated.parent / "config.json").write_text((r.folder / "config.json").read_text())
    truncated.write_bytes((r.folder / "model.pth").read_bytes()[:5000])
    with pytest.raises(CheckpointError, match="truncated, corrupt or not a checkpoint"):
        audiotok.load(truncated.parent)
    with pytest.raises(AudiotokError, match="padding must be"):
        audiotok.load(r.folder, padding="hf")


def test_preset_through_a_hub_cache(higgs, tmp_path):
    """`higgs-audio-v2-tokenizer` fetches Boson's model.pth and config.json; here from a local
    cache laid out as the hub's, offline."""
    from tests.test_hub import COMMIT, _run, cache_repo

    r = higgs("tiny")
    cache = tmp_path / "cache"
    cache_repo(cache, "bosonai/higgs-audio-v2-tokenizer",
               {name: r.folder / name for name in ("model.pth", "config.json")})
    x = _noise(4000, 6)
    torch.save(x, tmp_path / "x.pt")
    code = ("import audiotok, torch\n"
            f"x = torch.load(r'{tmp_path / 'x.pt'}')\n"
            "c = audiotok.load('higgs-audio-v2-tokenizer')\n"
            "t = c.encode(x, 24000).tokens.flatten().tolist()\n"
            "print(c.source.split('snapshots')[1], ','.join(map(str, t)))\n")
    out = _run(code, {"HF_HUB_CACHE": str(cache), "HF_HOME": str(tmp_path / "home")})
    assert out.returncode == 0, out.stderr
    want = ",".join(map(str, r.codec.encode(x, sample_rate=24000).tokens.flatten().tolist()))
    assert out.stdout.split() == [f"/{COMMIT}/model.pth", want]
    assert out.stderr.count("Boson Higgs Audio 2 Community License") == 1
