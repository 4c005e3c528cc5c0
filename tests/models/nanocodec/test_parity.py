"""NanoCodec against NeMo's own modules (nemo_toolkit 3.0.0) on random weights: codes identical
at lengths around the frame (each item of a ragged batch as NeMo gives it alone), both rate
sets and the released size; audio within 1e-4; the .nemo file read without NeMo."""

import io
import tarfile

import pytest
import torch

import audiotok
from audiotok.errors import CheckpointError
from audiotok.models.nanocodec.codec import NanoCodecCodec

LENGTHS = (1, 1763, 1764, 1765, 5000, 22050 + 17)


def _noise(n: int, seed: int) -> torch.Tensor:
    return 0.1 * torch.randn(n, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("name", ["tiny", "tiny_189"])
def test_codes_equal_nemos_alone_at_every_length(nano, name):
    r = nano(name)
    spf = r.codec.samples_per_frame
    xs = [_noise(n, i) for i, n in enumerate(LENGTHS)]
    got = r.codec.encode(xs[::-1], sample_rate=22050)  # one ragged batch
    distinct = set()
    for j, x in enumerate(xs[::-1]):
        want = r.ref.encode(x[None])[0]
        n = int(got.lengths[j])
        assert n == want.shape[-1] == -(-x.numel() // spf)
        assert torch.equal(got.tokens[j, :, :n], want), x.numel()
        distinct |= set(want.flatten().tolist())
    assert len(distinct) > 40  # (the FSQ reaches many codes)


def test_nemos_batches_are_not_invariant_and_ours_are(nano):
    """NeMo masks a shorter item's tail with zeros where alone it replicates its last sample:
    its last frames' codes change (ours equal the item alone: the test above)."""
    r = nano("tiny")
    short, long = _noise(25 * 1764, 1), _noise(40 * 1764, 2)
    batch = torch.stack([torch.nn.functional.pad(short, (0, 15 * 1764)), long])
    padded = r.ref.encode_batch(batch, torch.tensor([25 * 1764, 40 * 1764]))[0, :, :25]
    assert not torch.equal(padded, r.ref.encode(short[None])[0])


@pytest.mark.parametrize("name", ["tiny", "tiny_189"])
def test_audio_within_1e_4_of_nemo(nano, name):
    r = nano(name)
    g = torch.Generator().manual_seed(5)
    size, groups = r.codec.codebook_sizes[0], r.codec.num_codebooks
    frames = (1, 9, 31)
    codes = [torch.randint(0, size, (groups, t), generator=g) for t in frames]
    centre = 1204 if size == 2016 else 2056  # (an all-zero latent's code)
    codes[-1][:, :3] = torch.tensor([0, size - 1, centre])  # the extreme codes, the centre
    tokens = torch.zeros(len(codes), groups, max(frames), dtype=torch.long)
    for i, c in enumerate(codes):
        tokens[i, :, : c.shape[-1]] = c
    audio = r.codec.decode(audiotok.Codes(tokens, torch.tensor(frames)))  # ragged
    for i, c in enumerate(codes):
        want = r.ref.decode(c[None])[0]
        assert want.shape[-1] == c.shape[-1] * r.codec.samples_per_frame
        assert (audio[i, 0, : want.shape[-1]] - want).abs().max() <= 1e-4
        assert want.abs().max() > 1e-2


def test_the_released_size(nano):
    """The 0.6 kbps model as released (encoder 24, decoder 864 wide): 2 s and a bit."""
    r = nano("full")
    x = _noise(44100 + 123, 9)
    want = r.ref.encode(x[None])[0]
    got = r.codec.encode(x, sample_rate=22050)
    assert torch.equal(got.tokens[0], want)
    audio = r.codec.decode(want[None])[0, 0]
    assert (audio - r.ref.decode(want[None])[0]).abs().max() <= 1e-4


def test_nemo_files(nano, tmp_path):
    """A gzipped .nemo, the folder holding one and audiotok's save load to the same model; a
    truncated file, another model's config and mismatched FSQ levels are refused clearly."""
    from tests.models.nanocodec import reference

    r = nano("tiny")
    x = _noise(4000, 3)
    want = r.codec.encode(x, sample_rate=22050).tokens
    gz = reference.save_nemo(r.ref, reference.TINY, tmp_path / "gz" / "model.nemo", gzip=True)
    for path in (gz, gz.parent):
        assert torch.equal(audiotok.load(path).encode(x, sample_rate=22050).tokens, want)
    r.codec.save_pretrained(tmp_path / "saved")
    again = audiotok.load(tmp_path / "saved")
    assert again.config == r.codec.config and again.title == "NanoCodec 0.6 kbps"
    assert torch.equal(again.encode(x, sample_rate=22050).tokens, want)
    cut = tmp_path / "cut.nemo"
    cut.write_bytes(r.path.read_bytes()[:3000])
    with pytest.raises(CheckpointError, match="truncated, corrupt or not a .nemo file|holds"):
        NanoCodecCodec.from_checkpoint(cut)
    with tarfile.open(r.path) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}

    def rewrite(name: str, change) -> None:
        path = tmp_path / name
        with tarfile.open(path, "w") as tar:
            for member, data in members.items():
                data = change(member, data)
                info = tarfile.TarInfo(member)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        return path

    other = rewrite("other.nemo", lambda m, d: d.replace(b"CausalHiFiGANDecoder",
                                                         b"HiFiGANDecoder"))
    with pytest.raises(CheckpointError, match="needs NeMo's CausalHiFiGANDecoder"):
        NanoCodecCodec.from_checkpoint(other)
    levels = rewrite("levels.nemo", lambda m, d: d.replace(b"- 9\n", b"- 5\n")
                     if m.endswith(".yaml") else d)
    with pytest.raises(CheckpointError, match="FSQ group 0 has levels"):
        NanoCodecCodec.from_checkpoint(levels)


def test_preset_through_a_hub_cache(nano, tmp_path):
    from tests.test_hub import COMMIT, _run, cache_repo

    r = nano("tiny")
    repo = "nvidia/nemo-nano-codec-22khz-0.6kbps-12.5fps"
    cache = tmp_path / "cache"
    cache_repo(cache, repo, {"nemo-nano-codec-22khz-0.6kbps-12.5fps.nemo": r.path})
    x = _noise(3000, 6)
    torch.save(x, tmp_path / "x.pt")
    code = ("import audiotok, torch\n"
            f"x = torch.load(r'{tmp_path / 'x.pt'}')\n"
            "c = audiotok.load('nanocodec-0.6kbps')\n"
            "print(c.source.split('snapshots')[1], "
            "','.join(map(str, c.encode(x, 22050).tokens.flatten().tolist())))\n")
    out = _run(code, {"HF_HUB_CACHE": str(cache), "HF_HOME": str(tmp_path / "home")})
    assert out.returncode == 0, out.stderr
    want = ",".join(map(str, r.codec.encode(x, sample_rate=22050).tokens.flatten().tolist()))
    assert out.stdout.split() == [f"/{COMMIT}/nemo-nano-codec-22khz-0.6kbps-12.5fps.nemo", want]
    assert out.stderr.count("NVIDIA Open Model License") == 1
