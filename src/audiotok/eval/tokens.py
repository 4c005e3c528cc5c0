"""How a codec uses its codebooks over a corpus: per codebook the utilisation (distinct codes /
codebook size), entropy (bits), perplexity (2^entropy) and normalised entropy (entropy /
log2(codebook size)); and the bitrate the codebooks carry at the codec's frame rate."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from ..errors import AudiotokError


class TokenCounts:
    """Code histograms per codebook, added to item by item."""

    def __init__(self, codebook_sizes: Sequence[int]):
        self.sizes = tuple(int(s) for s in codebook_sizes)
        self.counts = [np.zeros(s, dtype=np.int64) for s in self.sizes]

    def add(self, tokens: np.ndarray) -> None:
        """tokens: [K, T] integer codes of one item."""
        tokens = np.asarray(tokens)
        if tokens.ndim != 2 or tokens.shape[0] != len(self.sizes):
            raise AudiotokError(f"tokens of shape {tokens.shape}; expected [{len(self.sizes)}, T]")
        for k, size in enumerate(self.sizes):
            row = tokens[k].astype(np.int64)
            if row.size and (row.min() < 0 or row.max() >= size):
                raise AudiotokError(f"codebook {k}: codes outside [0, {size})")
            self.counts[k] += np.bincount(row, minlength=size)

    @property
    def frames(self) -> int:
        return int(self.counts[0].sum()) if self.counts else 0


def codebook_stats(counts: np.ndarray) -> dict[str, float]:
    """Statistics of one codebook's histogram."""
    size = len(counts)
    total = int(counts.sum())
    if total == 0:
        raise AudiotokError("no tokens counted")
    p = counts[counts > 0] / total
    entropy = float(-(p * np.log2(p)).sum())
    return {"size": size, "count": total, "used": int((counts > 0).sum()),
            "utilisation": float((counts > 0).sum() / size), "entropy_bits": entropy,
            "perplexity": float(2.0 ** entropy),
            "normalised_entropy": entropy / math.log2(size) if size > 1 else 0.0}


def token_stats(counts: TokenCounts, frame_rate: float) -> dict:
    """Per-codebook statistics and the corpus totals: nominal bitrate (sum of log2 sizes times
    the frame rate) and entropy bitrate (sum of per-codebook entropies times the frame rate, what
    an ideal per-codebook entropy coder would need)."""
    books = [codebook_stats(c) for c in counts.counts]
    return {"frame_rate": frame_rate, "frames": counts.frames,
            "nominal_bitrate": frame_rate * sum(math.log2(s) for s in counts.sizes),
            "entropy_bitrate": frame_rate * sum(b["entropy_bits"] for b in books),
            "codebooks": books}


def tokens_folder_stats(folder: str | Path) -> dict:
    """token_stats over a `tokenize` output folder (its finished shards), without re-encoding."""
    from ..pipeline.shards import MANIFEST, _load_manifest, _pyarrow

    root = Path(folder)
    manifest = _load_manifest(root / MANIFEST) if (root / MANIFEST).is_file() else None
    if manifest is None:
        raise AudiotokError(f"{root}: not a tokenize output folder (no {MANIFEST})")
    _, pq = _pyarrow()
    counts = TokenCounts(manifest["codebook_sizes"])
    k = manifest["num_codebooks"]
    items = 0
    for shard in manifest.get("shards", []):
        table = pq.read_table(root / shard["file"], columns=["tokens", "num_codebooks"])
        for flat in _token_rows(table):
            counts.add(np.asarray(flat).reshape(k, -1))
            items += 1
    if items == 0:
        raise AudiotokError(f"{root}: no finished shards with tokens")
    stats = token_stats(counts, float(manifest["frame_rate"]))
    return {"model": manifest.get("model"), "codec": manifest.get("codec"),
            "model_source": manifest.get("model_source"), "items": items, **stats}


def _token_rows(table) -> Iterable[np.ndarray]:
    column = table.column("tokens")
    for chunk in column.chunks:
        offsets = chunk.offsets.to_numpy()
        values = chunk.values.to_numpy()
        for i in range(len(chunk)):
            yield values[offsets[i]: offsets[i + 1]]


def format_stats(stats: dict) -> str:
    """A plain-text table of token_stats."""
    lines = [f"frames {stats['frames']}, frame rate {stats['frame_rate']:.2f} Hz, nominal "
             f"{stats['nominal_bitrate'] / 1000:.3f} kbit/s, entropy "
             f"{stats['entropy_bitrate'] / 1000:.3f} kbit/s",
             f"{'codebook':>8} {'size':>6} {'used':>6} {'util':>6} {'entropy':>8} "
             f"{'perplexity':>10} {'norm H':>6}"]
    for k, b in enumerate(stats["codebooks"]):
        lines.append(f"{k:>8} {b['size']:>6} {b['used']:>6} {b['utilisation']:>6.3f} "
                     f"{b['entropy_bits']:>8.3f} {b['perplexity']:>10.1f} "
                     f"{b['normalised_entropy']:>6.3f}")
    return "\n".join(lines)


def dump(stats: dict) -> str:
    return json.dumps(stats, indent=1)
