"""The WavTokenizer codecs the batch-invariance contract test runs: the reference's small
models on random weights (75 and 40 frames/s), saved as its .ckpt."""

from tests.models.wavtokenizer import reference


def checkpoints(factory) -> dict:
    return {name: reference.save_ckpt(reference.build(spec),
                                      factory.mktemp(f"wavtokenizer_{name}") / "model.ckpt")
            for name, spec in (("tiny", reference.TINY), ("tiny_40", reference.TINY_40))}
