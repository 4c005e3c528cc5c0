"""The X-Codec codecs the batch-invariance contract test runs: Boson's Higgs Audio v2 tokenizer
at a small size on random weights, saved as Boson's folder."""

from tests.models.xcodec import reference


def checkpoints(factory) -> dict:
    model = reference.build(reference.TINY)
    return {"higgs": reference.save_boson(model, reference.TINY, factory.mktemp("higgs"))}
