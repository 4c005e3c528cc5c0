"""The DistillNeuCodec codec the batch-invariance contract test runs: the package's small
size on random weights."""

from tests.models.neucodec import reference


def checkpoints(factory) -> dict:
    m = reference.distill_package_model(reference.DISTILL_SMALL)
    return {"small": reference.save_package(m, factory.mktemp("distill_invariance"))}
