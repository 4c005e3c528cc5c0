"""EnCodec test fixtures: the encodec package's 24 kHz model, MusicGen's 32 kHz one and the
48 kHz stereo one on random weights, each with transformers' EncodecModel on the same weights,
saved in both layouts once per session."""

from types import SimpleNamespace

import pytest

from tests.models.encodec import reference


def _references(tmp_path_factory, variant: str, hf_config: dict | None):
    try:
        reference.import_encodec()
    except ImportError as e:
        pytest.skip(f"the EnCodec test oracle: pip install --no-deps encodec==0.1.1 (see "
                    f".ci/run): {e}")
    model = reference.encodec_model(variant=variant)
    hf = reference.hf_model(model, hf_config)
    folder = tmp_path_factory.mktemp(f"encodec_{variant}")
    hf.save_pretrained(folder / "hf")
    th = reference.save_th(model, folder / "orig", f"encodec_{variant}-test.th")
    return SimpleNamespace(ref=model, hf=hf, th=th, hf_dir=folder / "hf")


@pytest.fixture(scope="session")
def enc_ref(tmp_path_factory):
    return _references(tmp_path_factory, "24khz", None)


@pytest.fixture(scope="session")
def enc32_ref(tmp_path_factory):
    """MusicGen's codec (facebook/encodec_32khz's configuration)."""
    return _references(tmp_path_factory, "32khz", reference.HF_32KHZ)


@pytest.fixture(scope="session")
def enc48_ref(tmp_path_factory):
    """The 48 kHz stereo model (GroupNorm, 1 s segments, normalised audio)."""
    return _references(tmp_path_factory, "48khz", reference.HF_48KHZ)
