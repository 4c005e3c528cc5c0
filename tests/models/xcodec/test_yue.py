"""X-Codec as YuE runs it (xcodec_mini_infer: 16 kHz, 12 codebooks) from its own layout (a
.pth holding `codec_model` beside X-Codec's SoundStream yaml), against X-Codec's code (Boson's
class at X-Codec's settings is its SoundStream): codes identical around the pad path, the one
codebook YuE's stage 1 takes, audio within 1e-4; the `xcodec-yue` preset; YuE's token ids
(hand-computed from its CodecManipulator and infer.py), both ways."""

import numpy as np
import pytest
import torch

import audiotok
from audiotok.errors import CheckpointError
from audiotok.export.llm import TokenIdError, scheme_for
from audiotok.models.xcodec.codec import XCodecCodec
from tests.models.xcodec import reference


@pytest.fixture(scope="module")
def yue(tmp_path_factory):
    model = reference.build(reference.TINY, kind=reference.YUE)
    folder = reference.save_yue(model, reference.TINY, tmp_path_factory.mktemp("yue") /
                                "final_ckpt")
    return model, folder


def test_codes_and_audio_equal_xcodecs(yue):
    model, folder = yue
    codec = audiotok.load(folder / "ckpt_00360000.pth")
    assert (codec.name, codec.title, codec.sample_rate, codec.num_codebooks) == \
        ("xcodec", "X-Codec", 16000, 12)
    g = torch.Generator().manual_seed(3)
    xs = [0.1 * torch.randn(16000 + r, generator=g) for r in (0, 79, 80, 200, 311, 312)]
    got = codec.encode(xs, sample_rate=16000)  # one ragged batch
    for i, x in enumerate(xs):
        want = reference.codes(model, x[None, None])[0]
        assert torch.equal(got.tokens[i, :, : got.lengths[i]], want), x.numel()
    one = audiotok.load(folder, codebooks=1)  # YuE's stage 1: target_bw 0.5
    assert torch.equal(one.encode(xs[2], sample_rate=16000).tokens[0], got.tokens[2, :1])
    codes = got.tokens[:1, :, : got.lengths[0]]
    want = reference.decode(model, codes)
    assert (codec.decode(codes) - want).abs().max() <= 1e-4 and want.abs().max() > 1e-3


def test_preset_and_a_missing_config(yue, tmp_path):
    from tests.test_hub import COMMIT, _run, cache_repo

    _, folder = yue
    cache = tmp_path / "cache"
    cache_repo(cache, "m-a-p/xcodec_mini_infer",
               {f"final_ckpt/{n}": folder / n for n in ("ckpt_00360000.pth", "config.yaml")})
    code = ("import audiotok\n"
            "c = audiotok.load('xcodec-yue')\n"
            "print(c.source.split('snapshots')[1], c.title, c.num_codebooks)\n")
    out = _run(code, {"HF_HUB_CACHE": str(cache), "HF_HOME": str(tmp_path / "home")})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [f"/{COMMIT}/final_ckpt/ckpt_00360000.pth", "X-Codec", "12"]
    lone = tmp_path / "lone.pth"
    lone.write_bytes((folder / "ckpt_00360000.pth").read_bytes())
    with pytest.raises(CheckpointError, match="needs its config beside it"):
        XCodecCodec.from_checkpoint(lone)


def test_stage1_ids():
    """CodecManipulator("xcodec", 0, 1): id = 45334 + code; infer.py's audio prompt
    [<SOA>, <xcodec>, ids, <EOA>] and its dual-track interleave (vocals first)."""
    s = scheme_for("yue-stage1", (1024,) * 12)
    tokens = np.zeros((12, 3), np.int64)
    tokens[0] = [0, 7, 1023]
    tokens[1] = 5  # (stage 1 takes codebook 0 only)
    ids = s.to_ids(tokens)
    assert ids.tolist() == [32001, 32016, 45334, 45341, 46357, 32002]
    assert s.from_ids(ids).tolist() == [[0, 7, 1023]]
    assert np.array_equal(s.from_text(s.to_text(tokens)), tokens[:1])
    vocals, accompaniment = tokens.copy(), tokens.copy()
    accompaniment[0] = [1, 2, 3]
    dual = s.to_ids_dual(vocals, accompaniment)
    assert dual.tolist() == [32001, 32016, 45334, 45335, 45341, 45336, 46357, 45337, 32002]
    # text between two blocks; the second ends on an odd id (dropped)
    two_blocks = np.concatenate([dual, [9, 9], dual[:-2], [32002]])
    v, a = s.from_ids_dual(two_blocks)
    assert v.tolist() == [[0, 7, 1023, 0, 7]] and a.tolist() == [[1, 2, 3, 1, 2]]
    with pytest.raises(TokenIdError, match="unpaired"):
        s.from_ids(dual[:-1])
    with pytest.raises(TokenIdError, match="at frame 1, codebook 0 is not a YuE X-Codec id"):
        s.from_ids([32001, 45334, 46358, 32002])


def test_stage2_ids():
    """CodecManipulator("xcodec", 0, 8): 45334 + k x 1024 + code, 8 ids a frame; the prompt
    [<SOA>, <stage_1>, codebook 0, <stage_2>]; YuE's fix of ids outside a codebook (its row's
    most frequent value, bad ones counted, the first seen of ties)."""
    s = scheme_for("yue-stage2", (1024,) * 8)
    tokens = np.arange(16).reshape(8, 2) * 60
    ids = s.to_ids(tokens)
    assert ids[:8].tolist() == [45334 + k * 1024 + 120 * k for k in range(8)]
    assert ids[8:10].tolist() == [45334 + 60, 45334 + 1024 + 180]
    assert np.array_equal(s.from_ids(ids), tokens)
    assert s.prompt(tokens).tolist() == [32001, 32013, 45334, 45394, 32017]
    bad = ids.copy()
    bad[8 + 3] = 10  # frame 1, codebook 3: far below its range
    with pytest.raises(TokenIdError, match="frame 1, codebook 3"):
        s.from_ids(bad)
    three = np.tile(ids, 3)  # codebook 3's row: 360, 420, 360, 420, 360, 420
    three[8 * 2 + 3] = 99  # frame 2 bad: 420 is the most frequent
    assert s.from_ids(three, clamp=True)[3].tolist() == [360, 420, 420, 420, 360, 420]
    three = np.tile(ids, 3)
    three[8 * 4 + 3] = three[8 * 5 + 3] = 99  # frames 4, 5: 360, 420 and 99 twice each
    assert s.from_ids(three, clamp=True)[3].tolist() == [360, 420, 360, 420, 360, 360]
    with pytest.raises(TokenIdError, match="at least 8 codebook"):
        scheme_for("yue-stage2", (1024,) * 4)
