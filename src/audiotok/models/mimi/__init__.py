"""Mimi (Kyutai): 24 kHz mono, 12.5 frames/s, 1 semantic + 31 acoustic codebooks of 2048,
causal end to end; the codec of Moshi, Sesame CSM, Kyutai STT and Kyutai TTS.

The family's declaration (models/family.py); the model code is imported on first load."""

from ..family import Checkpoint, Family, LoadOption, Preset


def layout_of(keys) -> str | None:
    """'hf', 'moshi', 'audiotok' or None (not Mimi) from tensor names."""
    keys = list(keys)
    if any(k.startswith("quantizer.semantic_residual_vector_quantizer.") for k in keys):
        return "hf"
    if any(k.startswith("quantizer.rvq_first.") for k in keys):
        return "moshi"
    if "quantizer.semantic.codebook" in keys and "downsample.conv.weight" in keys:
        return "audiotok"
    return None


def _detect(checkpoint: Checkpoint) -> bool:
    """A transformers MimiConfig, or safetensors weights in the transformers or moshi layout
    (a folder: model.safetensors, or moshi's tokenizer-*/mimi-* file)."""
    if checkpoint.config.get("model_type") == "mimi":
        return True
    if checkpoint.path.is_dir() and not (checkpoint.path / "model.safetensors").exists():
        return checkpoint.has("tokenizer-*.safetensors", "*mimi*.safetensors")
    return layout_of(checkpoint.tensor_names) in ("hf", "moshi")


FAMILY = Family(
    name="mimi",
    title="Kyutai Mimi",
    licence="CC-BY 4.0 licence (attribution required; https://huggingface.co/kyutai/mimi)",
    codec=".codec:MimiCodec",
    package=__name__,
    presets=(Preset("mimi", "kyutai/mimi", ("model.safetensors", "config.json")),),
    detect=_detect,
    onnx=".onnx:onnx_graphs",
    llm_schemes={"csm": ".llm:CsmIds", "kyutai-stt": ".llm:KyutaiSttIds",
                 "moshi": ".llm:MoshiIds"},
    options={"codebooks": LoadOption("codebooks encode gives, 1..32 (default all; Moshi uses 8)",
                                     int),
             "padding": LoadOption("a partial last frame: frame (the input is zero-padded, as "
                                   "moshi >= 0.2.5; the default) or layer (each convolution "
                                   "pads, as transformers and CSM)")},
)
