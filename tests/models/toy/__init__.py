"""A toy codec family for the contract test (tests/models/test_contract.py): one codebook of 256
mu-law levels, one code per 4 samples (the frame's mean), 8 kHz; causal and stateless. It lives
outside the library and is registered only inside that test, to show that a family needs its
folder and nothing else."""

from audiotok.models.family import Checkpoint, Family, Preset


def _detect(checkpoint: Checkpoint) -> bool:
    return checkpoint.config.get("model_type") == "mulaw-toy"


FAMILY = Family(
    name="mulaw", title="Toy mu-law codec", licence="toy licence (tests only)",
    codec=".codec:MuLawCodec", package=__name__,
    presets=(Preset("mulaw-toy", "nobody/mulaw-toy", ("config.json",)),),
    detect=_detect,
)
