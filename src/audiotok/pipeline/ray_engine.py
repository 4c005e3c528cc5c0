"""The Ray engine: the same stages on Ray Data. Reading and resampling run as Ray tasks, encoding
in a pool of model actors (`workers` of them, one GPU each on a CUDA device), and the driver
commits shards through the same OutputDir as the local engine, so both write the same dataset
and a run of either can continue the other's."""

from __future__ import annotations

import logging

import numpy as np
import torch

from ..errors import AudiotokError
from .batching import Decoded, Failure, ReadSettings, Row, encode_decoded, read_item
from .local import ShardWriter
from .shards import ShardResult
from .sources import Item

ITEMS_PER_CALL = 32  # items handed to an actor per call; it buckets them by length itself
READ_CPUS = 0.5  # reserved by each reading task


def run_ray(job, address: str | None) -> None:
    """Tokenize every pending shard of `job` (see run.Job) on a Ray cluster or local instance."""
    ray = _ray()
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
    logging.getLogger("ray.data").setLevel(logging.WARNING)  # no per-dataset INFO lines
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False  # ours shows items, hours and ETA
    context.print_on_execution_start = False
    pending = job.pending()
    if not pending:
        return
    rows = [_item_row(shard, it) for shard, items in pending for it in items]
    remaining = {shard: len(items) for shard, items in pending}
    results = {shard: ShardResult(shard) for shard, _ in pending}
    gpu = job.codec.device.type == "cuda"
    threads = torch.get_num_threads()
    # CPU actors use `threads` torch threads and reserve as many whole CPUs (fewer when needed
    # to leave one for reading). Reading tasks reserve half a CPU: different resources also
    # keep Ray from fusing them into the actors, so reading overlaps encoding.
    spare = ray.cluster_resources().get("CPU", 1.0) - 1.0
    actor_cpus = 1 if gpu else max(1, min(threads, int(spare // job.workers)))
    ds = (ray.data.from_items(rows, override_num_blocks=max(1, len(rows) // 8))
          .map(_read, fn_kwargs={"settings": job.read}, num_cpus=READ_CPUS)
          .map_batches(Encoder, batch_size=ITEMS_PER_CALL, batch_format="pyarrow",
                       compute=ray.data.ActorPoolStrategy(size=job.workers),
                       num_gpus=1 if gpu else 0,
                       num_cpus=actor_cpus,
                       fn_constructor_kwargs={
                           # Ray shows each GPU actor only its own GPU: the type suffices
                           "model": job.model, "device": job.codec.device.type,
                           "dtype": job.codec.dtype, "threads": threads,
                           "checksum": job.out.header["model_sha256"],
                           "batch_seconds": job.batch_seconds,
                           "token_type": job.out.header["token_type"]}))
    items = {it.index: it for _, shard in pending for it in shard}
    with ShardWriter(job.out) as writer:
        for r in ds.iter_rows():
            item, shard = items[r["index"]], r["shard"]
            if r["error"]:
                results[shard].failures.append(Failure(item, r["error"]))
                job.progress.update(failed=1)
            else:
                tokens = np.frombuffer(r["tokens"], job.out.header["token_type"])
                row = Row(item, tokens.reshape(r["num_codebooks"], -1), r["n_samples"],
                          r["sample_rate"], np.frombuffer(r["globals"], np.int64)
                          if r["globals"] else None)
                results[shard].rows.append(row)
                job.progress.update(rows=[row])
            remaining[shard] -= 1
            if remaining[shard] == 0:
                writer.put(results.pop(shard))


def _ray():
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError:
        raise AudiotokError("--engine ray needs Ray Data: pip install 'audiotok[ray]' (or pip "
                            "install 'ray[data]')") from None
    return ray


def _item_row(shard: int, it: Item) -> dict:
    return {"shard": shard, "index": it.index, "id": it.id, "path": it.path,
            "row": -1 if it.row is None else it.row}


def _read(r: dict, settings: ReadSettings) -> dict:
    item = Item(r["index"], r["id"], r["path"], row=None if r["row"] < 0 else r["row"])
    d = read_item(item, settings)
    ok = d.error is None
    return {"shard": r["shard"], "index": r["index"], "error": d.error or "",
            "samples": d.samples.tobytes() if ok else b"", "sample_rate": d.source_rate,
            "n_samples": d.source_samples}


class Encoder:
    """A model actor: loads the codec once, checks its weights, encodes batches of items."""

    def __init__(self, model: str, device: str, dtype: torch.dtype, threads: int, checksum: str,
                 batch_seconds: float, token_type: str):
        from ..models import load

        torch.set_num_threads(threads)
        self.codec = load(model, device=device, dtype=dtype)
        if self.codec.weights_sha256() != checksum:
            raise AudiotokError(f"{model}: the weights on this node differ from the driver's")
        self.batch_seconds = batch_seconds
        self.token_type = token_type

    def __call__(self, batch) -> dict:
        rows = batch.to_pylist()
        decoded = [Decoded(Item(r["index"], "", ""),
                           np.frombuffer(r["samples"], np.float32).copy(),
                           r["sample_rate"], r["n_samples"], r["error"] or None) for r in rows]
        good = [d for d in decoded if d.error is None]
        encoded, failures = encode_decoded(self.codec, good, self.batch_seconds) if good else \
            ([], [])
        tokens = {row.item.index: row.tokens for row in encoded}
        utterance = {row.item.index: row.globals for row in encoded if row.globals is not None}
        errors = {d.item.index: d.error for d in decoded if d.error is not None}
        errors.update({f.item.index: f.reason for f in failures})
        return {
            "shard": [r["shard"] for r in rows],
            "index": [r["index"] for r in rows],
            "error": [errors.get(r["index"], "") for r in rows],
            "tokens": [tokens[r["index"]].astype(self.token_type).tobytes()
                       if r["index"] in tokens else b"" for r in rows],
            "globals": [utterance[r["index"]].astype(np.int64).tobytes()
                        if r["index"] in utterance else b"" for r in rows],
            "num_codebooks": [self.codec.num_codebooks] * len(rows),
            "n_samples": [r["n_samples"] for r in rows],
            "sample_rate": [r["sample_rate"] for r in rows],
        }
