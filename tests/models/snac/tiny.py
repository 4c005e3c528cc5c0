"""The SNAC codecs the batch-invariance contract test runs: the reference's tiny models on
random weights, without and with local attention."""

import pytest

from tests.models.snac import reference


def checkpoints(factory) -> dict:
    pytest.importorskip("snac", reason="snac is the SNAC test oracle: pip install snac==1.2.1")
    return {name: reference.save(reference.snac_model(config), config,
                                 factory.mktemp(f"snac_{name}_invariance"))
            for name, config in (("tiny", reference.TINY), ("tiny_attn", reference.TINY_ATTN))}
