"""NeuCodec (Neuphonic): X-Codec2 with a 24 kHz decoder; 16 kHz speech in, one FSQ codebook of
65 536, 50 frames/s; not causal.

The family's declaration (models/family.py); the model code is imported on first load."""

from ..family import Checkpoint, Family, Preset


def _detect(checkpoint: Checkpoint) -> bool:
    """A transformers NeuCodecModel config, or the neucodec package's pytorch_model.bin with
    the meta.yaml that the hub repository holds beside it."""
    if checkpoint.config.get("model_type") == "neucodec":
        return True
    return any(k.startswith("CodecEnc.") for k in checkpoint.tensor_names) and \
        checkpoint.has("meta.yaml")


FAMILY = Family(
    name="neucodec",
    title="NeuCodec",
    licence="Apache-2.0 licence (https://huggingface.co/neuphonic/neucodec)",
    codec=".codec:NeuCodecCodec",
    package=__name__,
    presets=(Preset("neucodec", "neuphonic/neucodec", ("model.safetensors", "config.json")),),
    detect=_detect,
    onnx="..xcodec2.onnx:onnx_graphs",  # X-Codec2's graphs at NeuCodec's rates
    llm_schemes={"neutts": ".llm:NeuTTSIds"},
)
