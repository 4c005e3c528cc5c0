"""S3 test fixtures: s3tokenizer's models on random weights (small, and the released sizes on
first use), each saved once as the state dict its init_from_pt reads."""

from types import SimpleNamespace

import pytest

from tests.models.s3 import reference

VARIANTS = tuple(reference.NAMES)


@pytest.fixture(scope="session")
def s3_refs(tmp_path_factory):
    """(variant, "small" | "full") -> SimpleNamespace(ref: s3tokenizer's model, pt: its
    state dict file), built on first use."""
    try:
        reference.import_s3tokenizer()
    except ImportError as e:
        pytest.skip(f"the S3 test oracle: pip install --no-deps s3tokenizer==0.3.0 (see "
                    f"tests/install_references.sh): {e}")
    built = {}

    def get(variant: str, size: str = "small"):
        if (variant, size) not in built:
            ref = reference.reference_model(variant, small=size == "small")
            folder = tmp_path_factory.mktemp(f"s3_{variant}_{size}")
            built[variant, size] = SimpleNamespace(
                ref=ref, pt=reference.save_pt(ref, folder / f"{reference.NAMES[variant]}.pt"))
        return built[variant, size]

    return get
