"""SNAC against the `snac` 1.2.1 package on random weights (tiny, tiny with local attention,
and the released 24 and 32 kHz sizes): tokens identical for every length rule, decoding equal
with the noise off and with torch's noise under the same seed; padded batches equal their items
alone; seeded noise the same in any window; checkpoints and options."""

import pytest
import torch

import audiotok
from audiotok.errors import AudiotokError, CheckpointError, CodesError
from audiotok.models.snac.config import SnacConfig
from audiotok.models.snac.model import levels_to_rows, rows_to_levels
from tests.bounds import SAME_MODEL
from tests.models.snac import reference
from tests.models.snac.conftest import CONFIGS

# lengths in samples: around the padding unit P (coarse frame, or 4 of them with attention)
LENGTHS = {"tiny": (1, 23, 24, 25, 479), "tiny_attn": (1, 95, 96, 97, 300),
           "24khz": (1, 2047, 2048, 2049, 24000), "32khz": (1, 12289), "44khz": (1, 12289)}


def audio(n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(1, 1, n, generator=g) * 0.3


@pytest.mark.parametrize("name", list(CONFIGS))
def test_tokens_and_audio_equal_the_reference(snac_pair, name):
    ref, folder = snac_pair[name]
    cfg = SnacConfig.from_dict(CONFIGS[name])
    codec = audiotok.load(folder, noise="torch")
    off = audiotok.load(folder, noise="off")
    ref_off = reference.snac_model(CONFIGS[name])
    reference.noise_off(ref_off)
    items = [audio(n, i) for i, n in enumerate(LENGTHS[name])]
    codes = codec.encode([x[0] for x in items])  # one call: a batch of every length
    used = set()
    with torch.no_grad():
        for i, x in enumerate(items):
            expected = ref.encode(x)
            assert [c.shape[-1] for c in expected] == [n * codes.lengths[i].item()
                                                       for n in cfg.codes_per_level]
            tokens = codes.tokens[i : i + 1, :, : codes.lengths[i]]
            assert torch.equal(tokens, levels_to_rows(expected, cfg)), (name, x.shape[-1])
            used.update(expected[-1].flatten().tolist())
            torch.manual_seed(7)
            want = ref.decode(expected)
            torch.manual_seed(7)
            got = codec.model.decode(tokens)
            assert (got - want).abs().max() <= 1e-4
            assert (off.model.decode(tokens) - ref_off.decode(expected)).abs().max() <= 1e-4
        assert len(used) > 3  # the finest level uses many codes: no trivial path
        # the codec's decode trims each item to its own length
        back = off.decode(codes)
        for i, x in enumerate(items):
            whole = ref_off.decode(ref.encode(x))[..., : x.shape[-1]]
            assert (back[i : i + 1, :, : x.shape[-1]] - whole).abs().max() <= 1e-4


def test_equal_lengths_batch_like_the_reference(snac_pair):
    ref, folder = snac_pair["24khz"]
    codec = audiotok.load(folder, noise="off")
    x = torch.cat([audio(5000, 1), audio(5000, 2)])
    with torch.no_grad():
        expected = levels_to_rows(ref.encode(x), codec.config)
    assert torch.equal(codec.encode(x).tokens, expected)


def test_seeded_noise_is_the_same_in_a_batch_and_in_any_window(snac_pair):
    _, folder = snac_pair["24khz"]
    codec = audiotok.load(folder)  # seeded noise, seed 0
    assert codec.noise == "seeded"
    g = torch.Generator().manual_seed(3)
    tokens = torch.randint(0, 4096, (2, 7, 12), generator=g)
    whole = codec.decode(tokens)
    alone = codec.decode(tokens[1:])
    assert (whole[1:] - alone).abs().max() <= SAME_MODEL
    assert torch.equal(codec.decode(tokens), whole)  # deterministic
    # frames 5..8 from a window with 3 coarse frames of context each side (exact at 24 kHz)
    with torch.inference_mode():
        window = codec.model.decode(tokens[:, :, 2:12], frame_offset=2)
    spf = codec.samples_per_frame
    kept = window[..., 3 * spf : 7 * spf]
    assert (kept - whole[..., 5 * spf : 9 * spf]).abs().max() <= SAME_MODEL
    other = audiotok.load(folder, seed=1).decode(tokens)
    off = audiotok.load(folder, noise="off").decode(tokens)
    assert (other - whole).abs().max() > 1e-3 and (off - whole).abs().max() > 1e-3


def test_32khz_frames_are_whole_attention_windows(snac_pair):
    _, folder = snac_pair["32khz"]
    codec = audiotok.load(folder)
    assert codec.frame_rule == "ceil:4" and codec.num_frames(1) == 4
    assert codec.num_frames(12289) == 8 and codec.streaming.window.align == 4
    assert audiotok.load(snac_pair["tiny_attn"][1]).frame_rule == "ceil"  # window = 1 frame


def test_token_rows_are_the_levels_in_time_order():
    cfg = SnacConfig.from_dict(reference.TINY)  # strides 4, 2, 1: 1 + 2 + 4 rows
    levels = [torch.tensor([[10, 11]]), torch.tensor([[20, 21, 22, 23]]),
              torch.tensor([[30, 31, 32, 33, 34, 35, 36, 37]])]
    rows = levels_to_rows(levels, cfg)
    assert rows[0].tolist() == [[10, 11], [20, 22], [21, 23], [30, 34], [31, 35], [32, 36],
                                [33, 37]]
    assert all(torch.equal(a, b) for a, b in zip(rows_to_levels(rows, cfg), levels,
                                                 strict=True))


def test_checkpoints_and_options(snac_pair, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(audiotok.codec, "_ANNOUNCED", set())
    ref, folder = snac_pair["tiny"]
    codec = audiotok.load(folder)
    assert codec.name == "snac" and "MIT" in capsys.readouterr().err
    info = codec.info()
    assert (info["num_codebooks"], info["levels"], info["noise"]) == (7, 3, "seeded")
    legacy = reference.save(ref, reference.TINY, tmp_path / "legacy", legacy=True)
    assert audiotok.load(legacy).weights_sha256() == codec.weights_sha256()
    # the weights file itself (its config.json beside it) is detected as SNAC too
    assert audiotok.load(folder / "pytorch_model.bin").weights_sha256() == \
        codec.weights_sha256()
    codec.save_pretrained(tmp_path / "ours")
    assert audiotok.load(tmp_path / "ours").weights_sha256() == codec.weights_sha256()
    (tmp_path / "bare").mkdir()
    (tmp_path / "bare" / "pytorch_model.bin").write_bytes((folder / "pytorch_model.bin")
                                                          .read_bytes())
    with pytest.raises(CheckpointError, match="needs its config.json"):
        audiotok.load(tmp_path / "bare", codec="snac")
    with pytest.raises(AudiotokError, match="noise must be one of"):
        audiotok.load(folder, noise="loud")
    with pytest.raises(AudiotokError, match="seed must be an integer"):
        audiotok.load(folder, seed="x")


def test_per_level_codes_both_ways(snac_pair):
    """to_levels gives the package's list exactly as its encode does; from_levels takes it
    back (decode of it equals the package's decode of the list), and refuses bad lists."""
    ref, folder = snac_pair["tiny"]
    codec = audiotok.load(folder, noise="off")
    x = audio(240, 3)
    codes = codec.encode(x[0])
    with torch.no_grad():
        expected = ref.encode(x)
    levels = codec.to_levels(codes)
    assert all(torch.equal(a, b) for a, b in zip(levels, expected, strict=True))
    back = codec.from_levels(expected, num_samples=[240])
    assert torch.equal(back.tokens, codes.tokens) and back.num_samples.tolist() == [240]
    assert torch.equal(codec.decode(back), codec.decode(codes))
    with pytest.raises(CodesError, match="list of 3 per-level"):
        codec.from_levels(expected[:2])
    with pytest.raises(CodesError, match=r"must be \[\(1, 10\), \(1, 20\), \(1, 40\)\]"):
        codec.from_levels([expected[0], expected[1], expected[2][:, :-1]])
    bad = [c.clone() for c in expected]
    bad[2][0, 5] = 64
    with pytest.raises(CodesError, match="64"):
        codec.from_levels(bad)
