"""DistillNeuCodec (Neuphonic): NeuCodec's tokens and decoder with a smaller encoder (DistilHuBERT
and a local-attention acoustic encoder); 16 kHz in, 24 kHz out, 50 frames/s; not causal.

The family's declaration (models/family.py); the model code is imported on first load."""

from ..family import Checkpoint, Family, Preset


def _detect(checkpoint: Checkpoint) -> bool:
    """Our saved config, or the neucodec package's pytorch_model.bin of DistillNeuCodec (its
    acoustic encoder is `codec_encoder.*`)."""
    if checkpoint.config.get("model_type") == "distill-neucodec":
        return True
    return any(k.startswith("codec_encoder.") for k in checkpoint.tensor_names)


FAMILY = Family(
    name="distill-neucodec",
    title="DistillNeuCodec",
    licence="Apache-2.0 licence (https://huggingface.co/neuphonic/distill-neucodec)",
    codec=".codec:DistillNeuCodecCodec",
    package=__name__,
    presets=(Preset("distill-neucodec", "neuphonic/distill-neucodec",
                    ("pytorch_model.bin", "meta.yaml")),),
    detect=_detect,
    onnx=".onnx:onnx_graphs",
    llm_schemes={},
)
