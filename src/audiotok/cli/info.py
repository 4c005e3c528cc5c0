"""`audiotok info`: facts about a model or codes files."""

from __future__ import annotations

import json
import sys

import click

from ..codes import Codes, load_codes
from ..errors import AudiotokError
from ..models.registry import FAMILIES
from .common import DEFAULT_MODEL, codec_options, device_option, fail, load_codec, one_line


@click.command()
@click.argument("files", nargs=-1, type=click.Path(exists=True))
@click.option("--model", "-m", default=None,
              help=f"Model to describe (default {DEFAULT_MODEL} when no files are given).")
@codec_options
@click.option("--codecs", is_flag=True,
              help="List the codec families audiotok knows (names, capabilities, licences).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@device_option
def info(files, model, codecs, as_json, device):
    """Facts about a model (sizes, rates, parameters, weight licence), about codes files, or
    (--codecs) about every codec family."""
    report: dict = {}
    failed = 0
    if codecs:
        report.update({f"codec {f.name}": _family_facts(f) for f in FAMILIES.values()})
    if model or not (files or codecs):
        report["model"] = load_codec(model or DEFAULT_MODEL, device, None).info()
    for f in files:
        try:
            report[f] = _codes_facts(load_codes(f))
        except AudiotokError as e:
            failed += 1
            fail(f"{f}: {one_line(e)}")
    if as_json:
        click.echo(json.dumps(report, indent=1))
    else:
        for name, facts in report.items():
            click.echo(f"{name}:")
            for k, v in facts.items():
                click.echo(f"  {k}: {v}")
    if failed:
        sys.exit(1)


STREAM_KINDS = {
    "layers": "exact, every layer's own state (library and server)",
    "steps": "exact, stateful (library and server)",
    "windows": "windowed (server)",
    "segments": "exact, segment by segment (library and server)",
    "chunks": "the reference's chunks (library and server)",
    None: "none",
}


def _family_facts(family) -> dict:
    from ..streaming.spec import LAYERS

    spec = family.codec_class().streaming  # (the family's; a variant may refine it)
    return {"title": family.title, "names": [p.name for p in family.presets],
            "hub": [p.repo_id for p in family.presets], "causal": spec.decode == LAYERS,
            "streaming": STREAM_KINDS[spec.decode] + (
                "" if spec.encode is None else f"; encode: {STREAM_KINDS[spec.encode]}"),
            "exports": family.export_formats(), "llm_schemes": list(family.llm_schemes),
            "load_options": {n: o.help for n, o in family.options.items()} or "none",
            "weights_licence": family.licence}


def _codes_facts(codes: Codes) -> dict:
    facts = {
        "codec": codes.codec or "unknown (.npy)",
        "items": len(codes),
        "codebooks": codes.tokens.shape[1],
        "frames": codes.lengths.tolist(),
    }
    if codes.sample_rate:
        facts["sample_rate"] = codes.sample_rate
        facts["frame_rate"] = codes.frame_rate
        facts["durations_s"] = [round(n / codes.frame_rate, 3) for n in codes.lengths.tolist()]
    if codes.num_samples is not None:
        facts["num_samples"] = codes.num_samples.tolist()
        if codes.sample_rate:
            facts["durations_s"] = [round(n / codes.sample_rate, 3)
                                    for n in codes.num_samples.tolist()]
    facts.update({k: v for k, v in codes.meta.items()})
    return facts
