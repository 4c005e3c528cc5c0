"""DAC test fixtures: the dac package's model on random weights (small, small with the odd
stride of 24/16 kHz, and the released 44.1 and 24 kHz sizes), with transformers' DacModel on
the same weights, saved in both layouts once per session."""

from types import SimpleNamespace

import pytest

from tests.models.dac import reference

CONFIGS = {"tiny": reference.TINY, "tiny_odd": reference.TINY_ODD,
           "44khz": reference.FULL_44, "24khz": reference.FULL_24,
           "speech": reference.SPEECH, "speech_small": reference.SPEECH_SMALL}
# DAC.speech: its hub file's name, and no transformers form (its tests use the package's file)
SPEECH = dict.fromkeys(("speech", "speech_small"), "weights_24khz_1.5kbps_v1.0.pth")


@pytest.fixture(scope="session")
def dac_refs(tmp_path_factory):
    """name -> SimpleNamespace(ref: the dac package's model, hf: transformers' model,
    pth: its weights.pth, hf_dir: the transformers folder; hf and hf_dir None for DAC.speech),
    built on first use."""
    try:
        reference.import_dac()  # (the stand-ins first on sys.path)
    except ImportError as e:
        pytest.skip(f"the DAC test oracle: pip install --no-deps descript-audio-codec==1.0.0 "
                    f"argbind docstring-parser (see .ci/run): {e}")
    built = {}

    def get(name):
        if name not in built:
            kwargs = CONFIGS[name]
            model = reference.dac_model(kwargs)
            hf = None if name in SPEECH else reference.hf_model(model, kwargs)
            folder = tmp_path_factory.mktemp(f"dac_{name}")
            built[name] = SimpleNamespace(
                ref=model, hf=hf, kwargs=kwargs,
                pth=reference.save_pth(model, kwargs, folder / "orig",
                                       SPEECH.get(name, "weights.pth")),
                hf_dir=None if hf is None else reference.save_hf(hf, folder / "hf"))
        return built[name]

    return get
