"""The EnCodec codecs the batch-invariance contract test runs: the encodec package's 24 kHz
(stateful streams) and 48 kHz stereo (segments with scales) models on random weights."""

import pytest

from tests.models.encodec import reference


def checkpoints(factory) -> dict:
    try:
        reference.import_encodec()
    except ImportError as e:
        pytest.skip(f"the EnCodec test oracle is not installed (see .ci/run): {e}")
    return {v: reference.save_th(reference.encodec_model(variant=v),
                                 factory.mktemp(f"encodec_{v}_invariance"),
                                 f"encodec_{v}-test.th")
            for v in ("24khz", "48khz")}
