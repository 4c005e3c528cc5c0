"""SNAC (multi-scale neural audio codec, H. Siuzdak): 3 or 4 residual VQ levels at different
rates, 4096 codes each; `snac_24khz` is the codec of Orpheus TTS, Maya1, Veena, Svara-TTS and
Mini-Omni, `snac_32khz` / `snac_44khz` add local attention. No part is causal.

The family's declaration (models/family.py); the model code is imported on first load."""

from ..family import Checkpoint, Family, LoadOption, Preset

_CONFIG_KEYS = {"encoder_rates", "decoder_rates", "vq_strides", "codebook_dim"}


def _detect(checkpoint: Checkpoint) -> bool:
    """The `snac` package's config.json (its SNAC() arguments, no model_type) beside the
    weights."""
    return _CONFIG_KEYS <= set(checkpoint.config) and "model_type" not in checkpoint.config


def _presets():
    return tuple(Preset(f"snac-{rate}khz", f"hubertsiuzdak/snac_{rate}khz",
                        ("pytorch_model.bin", "config.json")) for rate in (24, 32, 44))


FAMILY = Family(
    name="snac",
    title="SNAC",
    licence="MIT licence (the hubertsiuzdak/snac_24khz, _32khz and _44khz model cards)",
    codec=".codec:SnacCodec",
    package=__name__,
    presets=_presets(),
    detect=_detect,
    onnx=".onnx:onnx_graphs",
    llm_schemes={"orpheus": ".llm:OrpheusIds", "mini-omni": ".llm:MiniOmniIds"},
    options={"noise": LoadOption("the decoder's noise: seeded (a function of the seed and "
                                 "each sample's position, the default), torch (torch's global "
                                 "generator, as the snac package) or off"),
             "seed": LoadOption("the seed of seeded noise (default 0)", int)},
)
