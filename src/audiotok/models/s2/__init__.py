"""Fish Audio's S2 Pro codec: 44.1 kHz mono, 1 semantic + 9 residual codebooks, causal.

The family's declaration (models/family.py); the model code is imported on first load."""

from ..family import Checkpoint, Exporter, Family, Preset


def _detect(checkpoint: Checkpoint) -> bool:
    """fish-speech torch checkpoints and s2.cpp GGUF files, or a folder holding one, or a
    safetensors file beside an S2 config.json."""
    if checkpoint.path.is_dir() and not (checkpoint.path / "model.safetensors").exists():
        return checkpoint.has("codec.pth", "codec.ckpt", "*.gguf")
    return checkpoint.suffix in (".pth", ".ckpt", ".pt", ".gguf") or \
        {"encoder_rates", "residual_codebooks"} <= set(checkpoint.config)


FAMILY = Family(
    name="s2",
    title="Fish Audio S2 codec",
    licence="Fish Audio Research License (non-commercial use only; "
            "https://huggingface.co/fishaudio/s2-pro/blob/main/LICENSE.md)",
    codec=".codec:S2Codec",
    detect_last=True,  # any .pth/.ckpt/.pt file
    package=__name__,
    presets=(Preset("s2-pro", "fishaudio/s2-pro", ("codec.pth",)),),
    detect=_detect,
    onnx=".onnx:onnx_graphs",
    exporters={"gguf": Exporter(
        ".gguf:export_gguf", "a codec-only GGUF file for s2.cpp", dtypes=("f16", "f32"),
        describe="GGUF {dtype}, architecture fish-speech-codec")},
    llm_schemes={"fish-s2": ".llm:FishS2Ids"},
)
