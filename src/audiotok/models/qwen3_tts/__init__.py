"""The Qwen3-TTS 12 Hz speech tokenizer (Qwen): Mimi's encoder (its first 16 of 32 codebooks:
1 semantic + 15 acoustic, 2048 each, 12.5 frames/s at 24 kHz) and a decoder of its own, causal
end to end (a windowed transformer, ConvNeXt upsamplers, SnakeBeta blocks, output clamped).
The codec of the Qwen3-TTS 12 Hz models.

The family's declaration (models/family.py); the model code is imported on first load."""

from ..family import Checkpoint, Family, LoadOption, Preset

MODEL_TYPE = "qwen3_tts_tokenizer_12hz"


def _detect(checkpoint: Checkpoint) -> bool:
    """The tokenizer's config.json, or a Qwen3-TTS model folder holding it in
    speech_tokenizer/."""
    if checkpoint.config.get("model_type") == MODEL_TYPE:
        return True
    inner = checkpoint.path / "speech_tokenizer" / "config.json"
    return checkpoint.path.is_dir() and inner.is_file() and MODEL_TYPE in inner.read_text()


FAMILY = Family(
    name="qwen3-tts",
    title="Qwen3-TTS 12 Hz tokenizer",
    licence="Apache-2.0 licence (Qwen/Qwen3-TTS-Tokenizer-12Hz)",
    codec=".codec:Qwen3TtsCodec",
    package=__name__,
    presets=(Preset("qwen3-tts-tokenizer", "Qwen/Qwen3-TTS-Tokenizer-12Hz",
                    ("model.safetensors", "config.json")),),
    detect=_detect,
    onnx=".onnx:onnx_graphs",
    llm_schemes={"qwen3-tts": ".llm:Qwen3TtsIds"},
    options={"attention": LoadOption(
        "the encoder transformer's attention: full (every past step, as the reference runs "
        "with transformers' eager or SDPA attention; the default) or window (the last 250 "
        "steps, as Mimi and the reference under flash-attention 2; streams exactly)")},
)
