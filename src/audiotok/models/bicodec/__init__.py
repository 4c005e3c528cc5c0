"""BiCodec (Spark-TTS's codec): 16 kHz speech <-> semantic tokens (one codebook of 8192 at 50
frames/s, from wav2vec2-XLSR-53 features) plus 32 global tokens per utterance (FSQ, 4096: the
speaker, from a 6 s reference clip); not causal.

The family's declaration (models/family.py); the model code is imported on first load."""

from pathlib import Path

from ..family import Checkpoint, Family, LoadOption, Preset

CODEC_FILES = ("BiCodec/model.safetensors", "BiCodec/config.yaml")


def spark_folder(path: Path) -> Path | None:
    """The Spark-TTS model folder `path` is, or is inside (BiCodec/ or a file in it): the one
    holding BiCodec/model.safetensors and BiCodec/config.yaml; None if it is not one."""
    path = Path(path)
    for folder in (path, path.parent, path.parent.parent):
        if all((folder / f).is_file() for f in CODEC_FILES):
            return folder
    return None


def _detect(checkpoint: Checkpoint) -> bool:
    """Spark-TTS's model folder, its BiCodec/ folder or a file in it."""
    return spark_folder(checkpoint.path) is not None


FAMILY = Family(
    name="bicodec",
    title="BiCodec (Spark-TTS)",
    licence="CC BY-NC-SA 4.0 (the SparkAudio/Spark-TTS-0.5B model card): NON-COMMERCIAL use "
            "only, share-alike",
    codec=".codec:BiCodecCodec",
    package=__name__,
    presets=(
        Preset("bicodec-spark-tts", "SparkAudio/Spark-TTS-0.5B",
               ("BiCodec/model.safetensors", "BiCodec/config.yaml", "config.yaml",
                "wav2vec2-large-xlsr-53/config.json",
                "wav2vec2-large-xlsr-53/pytorch_model.bin")),
    ),
    detect=_detect,
    onnx=".onnx:onnx_graphs",
    llm_schemes={"spark-tts": ".llm:SparkTtsIds"},
    options={"volume": LoadOption("the input's volume before tokenizing: normalize (Spark's "
                                  "rule, as its tokenizer; the default) or asis")},
)
