"""X-Codec family fixtures: Boson's Higgs Audio v2 tokenizer on random weights (small, and the
released size), saved as Boson's folder and as transformers', once per session, built on first
use."""

from types import SimpleNamespace

import pytest

import audiotok
from tests.models.xcodec import reference

SPECS = {"tiny": reference.TINY, "full": reference.FULL}


@pytest.fixture(scope="session")
def higgs(tmp_path_factory):
    """name -> SimpleNamespace(ref: Boson's model, folder: its hub folder, codec: ours loaded
    from it, hf_folder / hf / hf_codec: transformers' folder, model and ours from that folder
    with padding="transformers"; the last three built on first use)."""
    built = {}

    def get(name):
        if name not in built:
            spec = SPECS[name]
            model = reference.build(spec)
            folder = reference.save_boson(model, spec, tmp_path_factory.mktemp(f"higgs_{name}"))
            built[name] = SimpleNamespace(ref=model, spec=spec, folder=folder,
                                          codec=audiotok.load(folder))
        return built[name]

    def with_hf(name):
        r = get(name)
        if not hasattr(r, "hf"):
            r.hf_folder = reference.save_hf(r.ref, r.spec,
                                            tmp_path_factory.mktemp(f"higgs_hf_{name}"))
            r.hf = reference.hf_model(r.ref, r.spec)
            r.hf_codec = audiotok.load(r.hf_folder, padding="transformers")
        return r

    get.with_hf = with_hf
    return get
