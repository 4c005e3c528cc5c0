"""WavTokenizer test fixtures: the reference model on random weights (small at 75 and 40
frames/s, and the released size at 75), saved as its .ckpt and as OuteTTS's interface folder,
once per session, built on first use."""

from types import SimpleNamespace

import pytest

import audiotok
from tests.models.wavtokenizer import reference

SPECS = {"tiny": reference.TINY, "tiny_40": reference.TINY_40, "full": reference.FULL_75}


@pytest.fixture(scope="session")
def wt_refs(tmp_path_factory):
    """name -> SimpleNamespace(ref: the reference model, ckpt: its .ckpt, codec: ours loaded
    from it); the interface folder of the small model at `interface` (built on first use)."""
    built = {}

    def get(name):
        if name not in built:
            if name == "interface":
                folder = tmp_path_factory.mktemp("wavtokenizer_interface")
                built[name] = reference.save_interface(get("tiny").ref, folder)
                return built[name]
            model = reference.build(SPECS[name])
            ckpt = reference.save_ckpt(model, tmp_path_factory.mktemp(f"wavtokenizer_{name}")
                                       / "model.ckpt")
            built[name] = SimpleNamespace(ref=model, ckpt=ckpt, codec=audiotok.load(ckpt))
        return built[name]

    return get
