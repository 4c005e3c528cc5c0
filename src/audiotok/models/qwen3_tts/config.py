"""Configuration of the Qwen3-TTS 12 Hz tokenizer: Mimi's (the encoder) and its decoder's.
`from_hf` reads the hub's config.json (`encoder_config`: a transformers MimiConfig,
`decoder_config`); `to_dict` / `from_dict` is what audiotok's save_pretrained writes."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from ...errors import ConfigError
from ..family import config_from_dict
from ..mimi.config import MimiConfig


@dataclass(frozen=True)
class DecoderConfig:
    codebook_size: int = 2048
    codebook_dim: int = 512  # the quantizer's output; its codebooks are half as wide
    num_quantizers: int = 16  # 1 semantic + 15 acoustic
    latent_dim: int = 1024
    hidden_size: int = 512
    num_hidden_layers: int = 8
    num_attention_heads: int = 16
    num_key_value_heads: int = 16
    head_dim: int = 64
    intermediate_size: int = 1024
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    sliding_window: int = 72  # each step attends to itself and the 71 before it
    upsampling_ratios: tuple[int, ...] = (2, 2)  # ConvNeXt upsamplers, 12.5 -> 50 Hz
    decoder_dim: int = 1536
    upsample_rates: tuple[int, ...] = (8, 5, 4, 3)  # SnakeBeta blocks, 50 Hz -> 24 kHz

    @property
    def hop_length(self) -> int:
        return math.prod(self.upsampling_ratios) * math.prod(self.upsample_rates)


# qwen-tts's Qwen3TTSTokenizerV2DecoderConfig defaults, for keys a config.json leaves out (the
# released model's values are DecoderConfig's)
_REFERENCE_DEFAULTS = {"hidden_size": 1024, "intermediate_size": 3072}


@dataclass(frozen=True)
class Qwen3TtsConfig:
    encoder: MimiConfig = field(default_factory=MimiConfig)
    decoder: DecoderConfig = field(default_factory=DecoderConfig)
    num_quantizers: int = 16  # the encoder's first 16 codebooks (encoder_valid_num_quantizers)
    # the encoder transformer's attention: "full" (every past step: transformers' eager and
    # SDPA attention, which the reference runs) or "window" (encoder.context steps)
    attention: str = "full"

    def __post_init__(self):
        if self.attention not in ("full", "window"):
            raise ConfigError(f"attention must be full or window, got {self.attention!r}")
        if self.encoder.samples_per_frame != self.decoder.hop_length:
            raise ConfigError(f"the encoder's frame ({self.encoder.samples_per_frame} samples) "
                              f"and the decoder's ({self.decoder.hop_length}) differ")
        if self.num_quantizers != self.decoder.num_quantizers or \
                self.num_quantizers > self.encoder.num_quantizers:
            raise ConfigError(f"{self.num_quantizers} codebooks: the decoder takes "
                              f"{self.decoder.num_quantizers}, the encoder has "
                              f"{self.encoder.num_quantizers}")

    @property
    def sample_rate(self) -> int:
        return self.encoder.sample_rate

    @property
    def samples_per_frame(self) -> int:
        return self.encoder.samples_per_frame

    def to_dict(self) -> dict:
        return {"encoder": self.encoder.to_dict(),
                "decoder": {k: list(v) if isinstance(v, tuple) else v
                            for k, v in asdict(self.decoder).items()},
                "num_quantizers": self.num_quantizers, "attention": self.attention}

    @classmethod
    def from_dict(cls, d: dict) -> Qwen3TtsConfig:
        d = {k: v for k, v in d.items() if k not in ("codec", "format_version")}
        try:
            return cls(encoder=MimiConfig.from_dict(d.pop("encoder", {})),
                       decoder=config_from_dict(DecoderConfig, d.pop("decoder", {}),
                                                "Qwen3-TTS decoder"),
                       **d)
        except TypeError as e:
            raise ConfigError(f"bad Qwen3-TTS tokenizer config: {e}") from None

    @classmethod
    def from_hf(cls, d: dict) -> Qwen3TtsConfig:
        """From the hub's config.json (qwen-tts's Qwen3TTSTokenizerV2Config)."""
        dec = dict(d.get("decoder_config") or {})
        if "codebook_dim" not in dec:
            raise ConfigError("the decoder config lacks codebook_dim (the reference has no "
                              "default for it)")
        checks = {"hidden_act": "silu", "attention_bias": False,
                  "input_sample_rate": 24000, "output_sample_rate": 24000}
        for key, expected in checks.items():
            value = dec.get(key, d.get(key, expected))
            if value != expected:
                raise ConfigError(f"unsupported Qwen3-TTS tokenizer config: {key}={value!r} "
                                  f"(expected {expected!r})")
        scaling = dec.get("rope_scaling") or {}
        if scaling.get("rope_type", scaling.get("type", "default")) != "default":
            raise ConfigError(f"unsupported Qwen3-TTS tokenizer config: rope_scaling={scaling}")
        known = {**_REFERENCE_DEFAULTS,
                 **{f: dec[f] for f in DecoderConfig.__dataclass_fields__ if f in dec}}
        known.setdefault("head_dim", known["hidden_size"] // known["num_attention_heads"])
        decoder = config_from_dict(DecoderConfig, known, "Qwen3-TTS decoder")
        return cls(encoder=MimiConfig.from_hf(dict(d.get("encoder_config") or {})),
                   decoder=decoder,
                   num_quantizers=d.get("encoder_valid_num_quantizers", 16))
