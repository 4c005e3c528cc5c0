"""The Ray engine on a local Ray instance writes the same dataset as the local engine."""

import json

import pytest

from audiotok.pipeline import tokenize
from tests.pipeline.conftest import S2_MODEL, XC_MODEL, read_output

ray = pytest.importorskip("ray", reason="the ray extra is not installed")
pytest.importorskip("ray.data")
pytest.importorskip("pyarrow")


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.mark.parametrize("model", [S2_MODEL, XC_MODEL], ids=["s2", "xcodec2"])
def test_ray_equals_local(corpus, tmp_path, local_ray, model):
    common = dict(batch_seconds=3.0, shard_items=3, progress=False)
    local = tokenize(corpus, model, tmp_path / "local", workers=1, **common)
    on_ray = tokenize(corpus, model, tmp_path / "ray", engine="ray", workers=1, **common)
    assert (on_ray.tokenized, on_ray.failed) == (local.tokenized, local.failed) == (8, 3)
    a, b = read_output(tmp_path / "local"), read_output(tmp_path / "ray")
    assert a["rows"] == b["rows"]
    assert a["manifest"]["shards"] == b["manifest"]["shards"]  # byte-identical shard files
    assert (tmp_path / "local/errors.jsonl").read_text() == \
        (tmp_path / "ray/errors.jsonl").read_text()


def test_ray_resumes_a_local_run(corpus, tmp_path, local_ray):
    out = tmp_path / "out"
    tokenize(corpus, S2_MODEL, out, shard_items=3, workers=0, progress=False)
    manifest = out / "manifest.json"
    full = read_output(out)
    m = json.loads(manifest.read_text())
    m["shards"] = m["shards"][:2]  # as if the run had stopped after two shards
    manifest.write_text(json.dumps(m))
    s = tokenize(corpus, S2_MODEL, out, engine="ray", shard_items=3, progress=False)
    assert s.done_before == 6 and s.tokenized + s.failed == 5
    assert read_output(out)["rows"] == full["rows"]


def test_ray_keeps_utterance_tokens(corpus, tmp_path, tmp_path_factory, local_ray):
    """A codec whose codes carry utterance tokens (BiCodec's 32 global tokens): the Ray
    engine's shards hold the same globals column as the local engine's."""
    from tests.models.bicodec.tiny import checkpoints

    model = str(checkpoints(tmp_path_factory)["tiny"])
    common = dict(batch_seconds=3.0, shard_items=4, progress=False)
    tokenize(corpus, model, tmp_path / "local", workers=1, **common)
    tokenize(corpus, model, tmp_path / "ray", engine="ray", workers=1, **common)
    a, b = read_output(tmp_path / "local"), read_output(tmp_path / "ray")
    assert a["rows"] == b["rows"] and len(a["rows"]) == 8
    assert all(len(r["globals"]) == 32 for r in a["rows"].values())
    assert a["manifest"]["shards"] == b["manifest"]["shards"]
