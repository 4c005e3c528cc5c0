"""X-Codec2: 16 kHz speech, one FSQ codebook of 65 536, 50 frames/s; not causal.

The family's declaration (models/family.py); the model code is imported on first load."""

from ..family import Checkpoint, Family, Preset


def layout_of(keys) -> str | None:
    """'hf', 'original' or None (not X-Codec2) from tensor names."""
    keys = list(keys)
    if any(k.startswith("acoustic_encoder.") for k in keys):
        return "hf"
    if any(k.startswith("CodecEnc.") for k in keys):
        return "original"
    return None


def _detect(checkpoint: Checkpoint) -> bool:
    """A transformers Xcodec2Model config, or safetensors weights in either layout whose
    config names no other model type (NeuCodec's and other families' say so)."""
    model_type = checkpoint.config.get("model_type")
    return model_type == "xcodec2" or model_type is None and \
        checkpoint.suffix == ".safetensors" and layout_of(checkpoint.tensor_names) is not None


FAMILY = Family(
    name="xcodec2",
    title="X-Codec2",
    licence="CC-BY-NC-4.0 licence (non-commercial use only; "
            "https://huggingface.co/HKUSTAudio/xcodec2)",
    codec=".codec:XCodec2Codec",
    package=__name__,
    presets=(Preset("xcodec2", "HKUSTAudio/xcodec2", ("model.safetensors",)),
             Preset("xcodec2-hf", "HKUSTAudio/xcodec2-hf", ("model.safetensors", "config.json"))),
    detect=_detect,
    onnx=".onnx:onnx_graphs",
    llm_schemes={"llasa": ".llm:LlasaIds"},
)
