"""EnCodec test fixtures: the encodec package's 24 kHz model on random weights, with
transformers' EncodecModel on the same weights, saved in both layouts once per session."""

from types import SimpleNamespace

import pytest

from tests.models.encodec import reference


@pytest.fixture(scope="session")
def enc_ref(tmp_path_factory):
    try:
        reference.import_encodec()
    except ImportError as e:
        pytest.skip(f"the EnCodec test oracle: pip install --no-deps encodec==0.1.1 (see "
                    f".ci/run): {e}")
    model = reference.encodec_model()
    hf = reference.hf_model(model)
    folder = tmp_path_factory.mktemp("encodec")
    hf.save_pretrained(folder / "hf")
    return SimpleNamespace(ref=model, hf=hf, th=reference.save_th(model, folder / "orig"),
                           hf_dir=folder / "hf")
