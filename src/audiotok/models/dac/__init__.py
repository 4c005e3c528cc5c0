"""DAC (Descript Audio Codec): 44.1 kHz (9 codebooks of 1024 at 86 Hz), 24 kHz (32 at 75 Hz)
and 16 kHz (12 at 50 Hz) mono; Snake activations, a residual VQ of factorised, L2-normalised
codebooks; not causal. The codec of Dia and Parler-TTS (44.1 kHz, 9 codebooks); IBM's
DAC.speech v1.0 (24 kHz, 2 codebooks) is OuteTTS 1.0's.

The family's declaration (models/family.py); the model code is imported on first load."""

from ..family import Checkpoint, Family, LoadOption, Preset


def layout_of(keys) -> str | None:
    """'hf' (transformers' DacModel), 'dac' (the dac package's and audiotok's names) or None
    (not DAC) from tensor names."""
    keys = list(keys)
    if not any(k.startswith("quantizer.quantizers.") for k in keys):
        return None
    if any(k.startswith(("encoder.conv1.", "decoder.conv1.")) for k in keys):
        return "hf"
    if any(k.startswith("encoder.block.0.") for k in keys) and \
            any(k.startswith("decoder.model.0.") for k in keys):
        return "dac"
    return None


def _detect(checkpoint: Checkpoint) -> bool:
    """A transformers DacConfig; the dac package's weights*.pth files (or a folder holding
    one); safetensors weights with DAC's tensor names."""
    if checkpoint.config.get("model_type") == "dac":
        return True
    if checkpoint.path.is_dir() and not (checkpoint.path / "model.safetensors").exists():
        return checkpoint.has("weights*.pth")
    if checkpoint.suffix == ".pth":
        return checkpoint.weights.name.startswith("weights")
    return layout_of(checkpoint.tensor_names) is not None and \
        "vq_strides" not in checkpoint.config  # (SNAC's names are DAC's, plus its levels)


def _presets():
    return (*(Preset(f"dac-{rate}khz", f"descript/dac_{rate}khz",
                     ("model.safetensors", "config.json")) for rate in (44, 24, 16)),
            Preset("dac-speech", "ibm-research/DAC.speech.v1.0",
                   ("weights_24khz_1.5kbps_v1.0.pth",)))


FAMILY = Family(
    name="dac",
    title="Descript Audio Codec (DAC)",
    licence="MIT licence (https://github.com/descriptinc/descript-audio-codec, the "
            "descript/dac_44khz, _24khz and _16khz model cards)",
    codec=".codec:DacCodec",
    package=__name__,
    presets=_presets(),
    detect=_detect,
    onnx=".onnx:onnx_graphs",
    llm_schemes={"dia": ".llm:DiaIds", "parler": ".llm:ParlerIds", "outetts": ".llm:OuteTtsIds"},
    options={"codebooks": LoadOption("codebooks encode gives (1..9 at 44.1 kHz, 1..32 "
                                     "at 24 kHz, 1..12 at 16 kHz; default all)", int),
             "padding": LoadOption("a partial last frame: frame (the input is zero-padded "
                                   "to whole frames, as the dac package; the default) or "
                                   "layer (no padding, as transformers' DacModel: a partial "
                                   "last frame is dropped)"),
             "pipeline": LoadOption("plain (the model on the whole input; the default) or "
                                    "outetts (OuteTTS 1.0's: loudness normalised to -18 LUFS, "
                                    "5 s encode windows, 2048-frame decode chunks with fades; "
                                    "24 kHz weights such as dac-speech)")},
)
