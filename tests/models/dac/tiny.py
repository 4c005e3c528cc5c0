"""The DAC codecs the batch-invariance contract test runs: the dac package's tiny models on
random weights (44.1 kHz strides, and the odd stride of 24/16 kHz)."""

import pytest

from tests.models.dac import reference


def checkpoints(factory) -> dict:
    try:
        reference.import_dac()
    except ImportError as e:
        pytest.skip(f"the DAC test oracle is not installed (see .ci/run): {e}")
    out = {}
    for name, kwargs in (("tiny", reference.TINY), ("tiny_odd", reference.TINY_ODD)):
        out[name] = reference.save_pth(reference.dac_model(kwargs), kwargs,
                                       factory.mktemp(f"dac_{name}_invariance"))
    return out
