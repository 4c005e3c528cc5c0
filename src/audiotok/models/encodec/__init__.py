"""EnCodec (Meta): 24 kHz mono, causal, 2-32 codebooks of 1024 at 75 Hz (1.5-24 kbit/s), the
codec of Bark and VALL-E; MusicGen's 32 kHz mono variant (not causal, 4 codebooks of 2048 at
50 Hz); and the 48 kHz stereo model (1 s segments, normalised, 2-16 codebooks of 1024 at 150 Hz).

The family's declaration (models/family.py); the model code is imported on first load."""

from ..family import Checkpoint, Family, LoadOption, Preset


def layout_of(keys) -> str | None:
    """'hf' (transformers' EncodecModel), 'encodec' (the encodec package's and audiotok's names)
    or None (not EnCodec) from tensor names."""
    keys = list(keys)
    if any(k.startswith("quantizer.layers.") and ".codebook.embed" in k for k in keys):
        return "hf"
    if any(k.startswith("quantizer.vq.layers.") for k in keys) or "quantizer.embed" in keys:
        return "encodec" if any(k.startswith("encoder.model.0.conv.conv.") for k in keys) \
            else None
    return None


def _detect(checkpoint: Checkpoint) -> bool:
    """A transformers EncodecConfig; the encodec package's encodec_*.th files (or a folder
    holding one); safetensors weights with EnCodec's tensor names."""
    if checkpoint.config.get("model_type") == "encodec":
        return True
    if checkpoint.path.is_dir() and not (checkpoint.path / "model.safetensors").exists():
        return checkpoint.has("encodec_*.th")
    if checkpoint.suffix == ".th":
        return checkpoint.weights.name.startswith("encodec_")
    return layout_of(checkpoint.tensor_names) is not None


FAMILY = Family(
    name="encodec",
    title="Meta EnCodec",
    licence="licence not stated for the weights (the encodec code is MIT since April 2023; the "
            "facebook/encodec_* model cards and the repository name none for the weights)",
    codec=".codec:EncodecCodec",
    onnx=".onnx:onnx_graphs",
    package=__name__,
    presets=(Preset("encodec-24khz", "facebook/encodec_24khz",
                    ("model.safetensors", "config.json")),
             Preset("encodec-32khz", "facebook/encodec_32khz",
                    ("model.safetensors", "config.json")),
             Preset("encodec-48khz", "facebook/encodec_48khz",
                    ("model.safetensors", "config.json"))),
    detect=_detect,
    llm_schemes={"bark": ".llm:BarkIds", "valle": ".llm:ValleIds", "musicgen": ".llm:MusicgenIds",
                 "musicgen-stereo": ".llm:MusicgenStereoIds"},
    options={"codebooks": LoadOption("codebooks encode gives (24 kHz: 1..32, 32 kHz: 1..4, "
                                     "48 kHz: 1..16; default all, as the encodec package; "
                                     "transformers defaults to its smallest bandwidth)", int),
             "bandwidth": LoadOption("a target bandwidth in kbit/s, which sets the codebooks "
                                     "(24 kHz: 1.5, 3, 6, 12, 24; 6 is 8 codebooks, Bark's "
                                     "and VALL-E's; 32 kHz: 2.2; 48 kHz: 3, 6, 12, 24)")},
)
