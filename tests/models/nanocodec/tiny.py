"""The NanoCodec codecs the batch-invariance contract test runs: NeMo's modules at a small
size on random weights (the 0.6 kbps rates), saved as a .nemo file."""

from tests.models.nanocodec import reference


def checkpoints(factory) -> dict:
    model = reference.Codec(reference.TINY)
    return {"tiny": reference.save_nemo(model, reference.TINY,
                                        factory.mktemp("nanocodec") / "tiny.nemo")}
