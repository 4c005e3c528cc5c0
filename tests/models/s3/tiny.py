"""The S3 codecs the batch-invariance contract test runs: s3tokenizer's small v1 (50 Hz, VQ)
and v2 (25 Hz, FSQ) models on random weights, saved as audiotok folders."""

import pytest

import audiotok
from tests.models.s3 import reference


def checkpoints(factory) -> dict:
    try:
        reference.import_s3tokenizer()
    except ImportError as e:
        pytest.skip(f"the S3 test oracle is not installed (see tests/install_references.sh): {e}")
    out = {}
    for variant in ("v1", "v2_25hz"):
        folder = factory.mktemp(f"s3_{variant}_invariance")
        pt = reference.save_pt(reference.reference_model(variant, small=True), folder / "m.pt")
        audiotok.load(pt, variant=variant).save_pretrained(folder / "codec")
        out[variant] = folder / "codec"
    return out
