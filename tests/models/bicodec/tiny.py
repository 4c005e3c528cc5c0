"""The BiCodec codecs the batch-invariance contract test runs: Spark's modules at a small size on
random weights, saved as Spark's model folder."""

from tests.models.bicodec import reference


def checkpoints(factory) -> dict:
    model, w2v = reference.build(reference.TINY), reference.wav2vec2(reference.TINY)
    return {"tiny": reference.save_folder(model, w2v, reference.TINY, factory.mktemp("bicodec"))}
