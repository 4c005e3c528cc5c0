"""report.md and a self-contained report.html: the systems side by side, token statistics, the
precision study, and for the example items the audio and spectrograms (matplotlib PNGs)."""

from __future__ import annotations

import base64
import html
import io
import math
from pathlib import Path

import numpy as np

from ..audio import read_audio, write_audio_bytes
from ..fileio import atomic_output
from .results import example_path, save_example, slug

FIGURES = "figures"
EXAMPLE_SECONDS = 20.0  # audio and spectrograms of an example are cut to this


def write_reports(root: Path, summary: dict, results: list[dict], systems, items,
                  examples: int, counts: dict, read) -> None:
    """Write DIR/report.md (figures as DIR/figures/*.png) and DIR/report.html (all inline).
    counts: each codec system's TokenCounts (for the codebook-usage plots); read: how the
    run read items (ReadSettings), to make examples a rerun added."""
    figures = _Figures(root / FIGURES)
    example_rows = _examples(root, results, systems, items, examples, figures, read)
    usage = {name: figures.codebook_usage(name, counts[name])
             for name, s in summary["systems"].items() if "tokens" in s}
    with atomic_output(root / "report.md") as tmp:
        tmp.write_text(markdown(summary, example_rows, usage))
    with atomic_output(root / "report.html") as tmp:
        tmp.write_text(html_report(summary, example_rows, usage))


# -- numbers ---------------------------------------------------------------------------------

def _fmt(x: float) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    if x == 0:
        return "0"
    a = abs(x)
    return f"{x:.0f}" if a >= 100 else f"{x:.2f}" if a >= 1 else f"{x:.3f}" if a >= 0.01 else \
        f"{x:.2e}"


def _cell(stats: dict) -> str:
    if not stats.get("count"):
        return "-"
    lo, hi = stats["ci95"]
    return f"{_fmt(stats['mean'])} [{_fmt(lo)}, {_fmt(hi)}]"


def tables(summary: dict) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) of every table in the report."""
    names = list(summary["systems"])
    sysd = summary["systems"]
    out = []
    rows = []
    for info in summary["metrics"].values():
        for value in info["values"]:
            arrow = "higher is better" if sysd[names[0]]["metrics"][value]["higher_is_better"] \
                else "lower is better"
            rows.append([f"{value} ({info['rate'] / 1000:g} kHz, {arrow})"]
                        + [_cell(sysd[n]["metrics"][value]) for n in names])
    rows.append(["items measured / failed"] + [f"{sysd[n]['items']} / {sysd[n]['errors']}"
                                               for n in names])
    rows.append(["bitrate, kbit/s"] + [_fmt(sysd[n].get("bitrate_kbps")) for n in names])
    rows.append(["encode real-time factor"] + [_fmt(sysd[n]["speed"].get("encode_rtf"))
                                              for n in names])
    rows.append(["decode real-time factor"] + [_fmt(sysd[n]["speed"].get("decode_rtf"))
                                              for n in names])
    out.append(("Results: mean [95 % bootstrap interval]", ["metric"] + names, rows))

    defs = [[m, f"{i['rate']} Hz", i["description"]] for m, i in summary["metrics"].items()]
    out.append(("Metrics", ["metric", "rate", "definition"], defs))

    for n in names:
        t = sysd[n].get("tokens")
        if t:
            rows = [[str(k), str(b["size"]), str(b["used"]), _fmt(b["utilisation"]),
                     _fmt(b["entropy_bits"]), _fmt(b["perplexity"]), _fmt(b["normalised_entropy"])]
                    for k, b in enumerate(t["codebooks"])]
            out.append((f"Tokens of {n}: {t['frames']} frames at {t['frame_rate']:.2f} Hz, "
                        f"nominal {t['nominal_bitrate'] / 1000:.3f} kbit/s, entropy "
                        f"{t['entropy_bitrate'] / 1000:.3f} kbit/s",
                        ["codebook", "size", "used", "utilisation", "entropy (bits)",
                         "perplexity", "normalised entropy"], rows))
    prec = [n for n in names if "precision" in sysd[n]]
    if prec:
        rows = [[n, _cell(sysd[n]["precision"]["tokens_equal"]),
                 _cell(sysd[n]["precision"].get("decode_snr_vs_reference", {}))] for n in prec]
        ref = summary["settings"]["reference_dtype"]
        out.append((f"Precision: {summary['settings']['dtype']} against {ref}",
                    ["model", f"tokens equal to {ref}", f"decode SNR vs {ref}, dB"], rows))
    skips = []
    for n in names:
        reasons: dict[str, list] = {}  # reason -> [items, metrics]
        for metric in summary["metrics"]:
            value = summary["metrics"][metric]["values"][0]
            for why, count in sysd[n]["metrics"][value].get("skipped", {}).items():
                entry = reasons.setdefault(why, [count, []])
                entry[1].append(metric)
        skips += [[n, ", ".join(metrics), str(count), why]
                  for why, (count, metrics) in reasons.items()]
        skips += [[n, "(item failed)", str(count), why]
                  for why, count in sysd[n]["error_reasons"].items()]
    if skips:
        out.append(("Skipped and failed", ["model", "metrics", "items", "reason"], skips))
    return out


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    esc = [[c.replace("|", "\\|") for c in r] for r in [header] + rows]
    lines = ["| " + " | ".join(esc[0]) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in esc[1:]]
    return "\n".join(lines)


def _intro(summary: dict) -> list[str]:
    s = summary["settings"]
    run = summary.get("run", {})
    lines = [f"Source: {summary['source']}, {summary['num_items']} items. Precision "
             f"{s['dtype']}" + (f", reference {s['reference_dtype']}" if s["reference_dtype"]
                                else "") + f". audiotok {summary['audiotok_version']}."]
    if run:
        lines.append(f"This run: {run['measured']} results measured, {run['failed']} failed, "
                     f"{run['done_before']} done before, in {run['seconds']:.1f} s.")
    lines.append("Each item is read at its own rate and downmixed; each model gets it resampled "
                 "to its rate (soxr HQ). Each metric gets the original and the reconstruction "
                 "resampled to the metric's rate, the reconstruction cut or zero-padded to the "
                 "original's length. Real-time factor: compute seconds per second of audio.")
    if run.get("visqol_lattice") is False:
        lines.append("ViSQOL ran without its deep-lattice model (install "
                     "visqol-python[lattice]); its SVR mapping reads higher.")
    return lines


def markdown(summary: dict, examples: list[dict], usage: dict[str, Path | None]) -> str:
    parts = ["# audiotok eval report", "", *_intro(summary), ""]
    for title, header, rows in tables(summary):
        parts += [f"## {title}", "", _md_table(header, rows), ""]
    if any(usage.values()):
        parts += ["## Codebook usage", ""]
        parts += [f"![{n}]({p.relative_to(p.parent.parent).as_posix()})" for n, p in usage.items()
                  if p]
        parts.append("")
    if examples:
        parts += ["## Examples", ""]
        for ex in examples:
            parts += [f"### {ex['id']}", ""]
            for entry in ex["audio"]:
                rel = entry["path"].relative_to(entry["path"].parents[2]).as_posix()
                parts.append(f"- {entry['name']}: [{rel}]({rel})")
            if ex["figure"]:
                parts += ["", f"![spectrograms of {ex['id']}]"
                              f"({ex['figure'].relative_to(ex['figure'].parent.parent).as_posix()})"]
            parts.append("")
    return "\n".join(parts)


def html_report(summary: dict, examples: list[dict], usage: dict[str, Path | None]) -> str:
    e = html.escape
    body = ["<h1>audiotok eval report</h1>"] + [f"<p>{e(x)}</p>" for x in _intro(summary)]
    for title, header, rows in tables(summary):
        cls = "text" if header[-1] in ("definition", "reason") else "num"
        body.append(f"<h2>{e(title)}</h2><table class={cls}><thead><tr>"
                    + "".join(f"<th>{e(h)}</th>" for h in header) + "</tr></thead><tbody>"
                    + "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>"
                              for r in rows) + "</tbody></table>")
    if any(usage.values()):
        body.append("<h2>Codebook usage</h2>")
        body += [f'<figure><img alt="codebook usage of {e(n)}" src="{_data_uri(p)}">'
                 f"<figcaption>{e(n)}</figcaption></figure>" for n, p in usage.items() if p]
    if examples:
        body.append("<h2>Examples</h2>")
        for ex in examples:
            body.append(f"<h3>{e(ex['id'])}</h3><div class=players>")
            for entry in ex["audio"]:
                body.append(f"<figure><figcaption>{e(entry['name'])}</figcaption>"
                            f'<audio controls preload="metadata" src="{entry["uri"]}"></audio>'
                            "</figure>")
            body.append("</div>")
            if ex["figure"]:
                body.append(f'<img class=spec alt="spectrograms of {e(ex["id"])}" '
                            f'src="{_data_uri(ex["figure"])}">')
    style = ("body{font-family:system-ui,sans-serif;margin:2em;max-width:1400px;color:#222}"
             "table{border-collapse:collapse;margin:.5em 0 1.5em}"
             "th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left}"
             "table.num td,table.num th{text-align:right}"
             "table.num td:first-child,table.num th:first-child{text-align:left}"
             "th{background:#f2f2f2}"
             "img{max-width:100%}.players{display:flex;flex-wrap:wrap;gap:1em}"
             "figure{margin:.3em}")
    return ("<!doctype html><html lang=en><head><meta charset=utf-8>"
            "<title>audiotok eval report</title>"
            f"<style>{style}</style></head><body>{''.join(body)}</body></html>\n")


def _data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()


# -- examples and figures ---------------------------------------------------------------------

def _examples(root: Path, results, systems, items, count: int, figures: _Figures,
              read) -> list[dict]:
    """Audio (saved by the run, or made now for examples added on a rerun) and spectrograms of
    the first `count` items every system measured."""
    from ..pipeline.batching import read_item

    ok = {(r["id"], r["system"]) for r in results if "error" not in r}
    out = []
    for item in items:
        if len(out) >= count:
            break
        if not all((item.id, s.name) in ok for s in systems):
            continue
        entries = []
        for name, system in [("original", None)] + [(s.name, s) for s in systems
                                                    if s.reconstructs]:
            path = example_path(root, name, item.index)
            if not path.exists():
                d = read_item(item, read)
                if d.error:
                    break
                if system is None:
                    save_example(root, name, item.index, d.samples, d.source_rate)
                else:
                    r = system.run(d.samples, d.source_rate)
                    save_example(root, name, item.index, r.audio, r.rate)
            audio, rate = read_audio(path)
            audio = audio[0, : int(EXAMPLE_SECONDS * rate)]
            wav = write_audio_bytes(np.clip(audio, -1, 1), rate, "WAV", "PCM_16")
            entries.append({"name": name, "path": path, "audio": audio, "rate": rate,
                            "uri": "data:audio/wav;base64," + base64.b64encode(wav).decode()})
        else:
            out.append({"id": item.id, "audio": entries,
                        "figure": figures.spectrograms(item.index, item.id, entries)})
    return out


class _Figures:
    """PNG figures under DIR/figures (None where matplotlib is missing)."""

    def __init__(self, folder: Path):
        self.folder = folder
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt

            self.plt = plt
        except ImportError:
            self.plt = None

    def _save(self, fig, name: str) -> Path:
        path = self.folder / name
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=90)
        self.plt.close(fig)
        with atomic_output(path) as tmp:
            tmp.write_bytes(buf.getvalue())
        return path

    def spectrograms(self, index: int, item_id: str, entries: list[dict]) -> Path | None:
        """One row per signal: log-magnitude spectrogram (1024-point Hann window, hop 256), on
        a common 0..(highest Nyquist) frequency axis so band limits show."""
        if self.plt is None:
            return None
        top = max(e["rate"] for e in entries) / 2
        fig, axes = self.plt.subplots(len(entries), 1, figsize=(11, 1.9 * len(entries)),
                                      sharex=True, squeeze=False)
        for ax, e in zip(axes[:, 0], entries, strict=True):
            db = _spectrogram_db(e["audio"])
            ax.imshow(db, origin="lower", aspect="auto", cmap="magma", vmin=-100, vmax=0,
                      extent=(0, len(e["audio"]) / e["rate"], 0, e["rate"] / 2000))
            ax.set_ylim(0, top / 1000)
            ax.set_ylabel("kHz")
            ax.set_title(e["name"], fontsize=9, loc="left")
        axes[-1, 0].set_xlabel("seconds")
        fig.tight_layout()
        return self._save(fig, f"spectrogram-{index:08d}.png")

    def codebook_usage(self, name: str, counts) -> Path | None:
        """Per codebook: its codes' frequencies sorted from the most used (log scale), over the
        code rank as a share of the codebook, with the share of codes used."""
        if self.plt is None:
            return None
        books = counts.counts
        fig, ax = self.plt.subplots(figsize=(8, 3.2))
        for k, c in enumerate(books):
            freq = np.sort(c[c > 0])[::-1] / c.sum()
            ax.plot(np.arange(1, freq.size + 1) / c.size, freq, lw=1,
                    label=f"{k}: {freq.size / c.size:.0%} used")
        ax.set_yscale("log")
        ax.set_xlabel("code rank / codebook size")
        ax.set_ylabel("frequency")
        ax.set_title(f"{name}: sorted code frequencies per codebook", fontsize=9)
        if len(books) <= 12:
            ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        return self._save(fig, f"codebooks-{slug(name)}.png")


def _spectrogram_db(x: np.ndarray, window: int = 1024, hop: int = 256) -> np.ndarray:
    if len(x) < window:
        x = np.pad(x, (0, window - len(x)))
    frames = np.lib.stride_tricks.sliding_window_view(x, window)[::hop] * np.hanning(window)
    mag = np.abs(np.fft.rfft(frames, axis=1)).T / (window / 4)
    return 20 * np.log10(np.maximum(mag, 1e-5))
