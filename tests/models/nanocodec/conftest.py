"""NanoCodec fixtures: NeMo's modules on random weights (small at both rate sets, and the
released 0.6 kbps size), saved as .nemo files, once per session, built on first use."""

from types import SimpleNamespace

import pytest

import audiotok
from tests.models.nanocodec import reference

SPECS = {"tiny": reference.TINY, "tiny_189": reference.TINY_189, "full": reference.FULL,
         "short": reference.SHORT}


@pytest.fixture(scope="session")
def nano(tmp_path_factory):
    """name -> SimpleNamespace(ref: NeMo's modules, path: the .nemo, codec: ours from it)."""
    built = {}

    def get(name):
        if name not in built:
            model = reference.Codec(SPECS[name])
            path = reference.save_nemo(model, SPECS[name],
                                       tmp_path_factory.mktemp(f"nano_{name}") / f"{name}.nemo")
            built[name] = SimpleNamespace(ref=model, path=path, codec=audiotok.load(path))
        return built[name]

    return get
