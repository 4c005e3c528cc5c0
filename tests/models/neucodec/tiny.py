"""The NeuCodec codec the batch-invariance contract test runs: the package's small size on
random weights."""

from tests.models.neucodec import reference


def checkpoints(factory) -> dict:
    m = reference.package_model(reference.SMALL)
    return {"small": reference.save_package(m, factory.mktemp("neucodec_invariance"))}
