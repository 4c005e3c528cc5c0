"""NeuCodec (Neuphonic): X-Codec2 with a 24 kHz decoder; 16 kHz speech in, one FSQ codebook of
65 536, 50 frames/s; not causal. DistillNeuCodec (a smaller encoder, the same decoder) loads
through this family too.

The family's declaration (models/family.py); the model code is imported on first load."""

from ..family import Checkpoint, Family, Preset


def _detect(checkpoint: Checkpoint) -> bool:
    """A transformers NeuCodecModel config, or the neucodec package's pytorch_model.bin with
    the meta.yaml that the hub repository holds beside it."""
    if checkpoint.config.get("model_type") in ("neucodec", "distill-neucodec"):
        return True
    weights = checkpoint.suffix == ".bin" or checkpoint.has("pytorch_model.bin")
    return weights and checkpoint.has("meta.yaml")


FAMILY = Family(
    name="neucodec",
    title="NeuCodec",
    licence="Apache-2.0 licence (https://huggingface.co/neuphonic/neucodec)",
    codec=".codec:NeuCodecCodec",
    package=__name__,
    presets=(Preset("neucodec", "neuphonic/neucodec", ("model.safetensors", "config.json")),
             Preset("distill-neucodec", "neuphonic/distill-neucodec",
                    ("pytorch_model.bin", "meta.yaml"))),
    detect=_detect,
    llm_schemes={"neutts": ".llm:NeuTTSIds"},
)
