"""Configuration of the X-Codec family: the Higgs Audio v2 tokenizer (24 kHz, 25 frames/s, 8
codebooks of 1024 searched in 64 dimensions) and X-Codec v1 (16 kHz, 50 frames/s, 8 codebooks
of 1024 at full width).

Both join a DAC encoder (`encoder_dim` channels doubling at each of `ratios`, `latent_dim`
out) and a HuBERT at 16 kHz whose hidden states, averaged over its layers, go through a
convolutional "semantic encoder"; the two are concatenated, projected and quantised by a
Euclidean residual VQ; only the acoustic part is decoded, by a DAC decoder (`decoder_dim`
channels, no tanh). Boson's `config.json` (HiggsAudioTokenizer's keyword arguments) and
transformers' (`model_type` "higgs_audio_v2_tokenizer" or "xcodec") are both read.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace

from ...errors import ConfigError
from ...nn.hubert import HubertConfig
from ..family import config_from_dict

SEMANTIC_RATE = 16000  # HuBERT's input rate
SEMANTIC_HOP = 320  # HuBERT's samples a frame at 16 kHz
SEMANTIC_PAD = 160  # zeros each side of HuBERT's input (both references)


@dataclass(frozen=True)
class XCodecConfig:
    sample_rate: int = 24000
    ratios: tuple[int, ...] = (8, 5, 4, 2, 3)  # the encoder's strides, and the decoder's
    encoder_dim: int = 64
    latent_dim: int = 256  # the acoustic latents' width (Boson's D)
    decoder_dim: int = 1024
    n_q: int = 8
    codebook_size: int = 1024
    codebook_dim: int | None = 64  # None: the codebooks are as wide as the quantizer's input
    hubert: HubertConfig = field(default_factory=HubertConfig)

    def __post_init__(self):
        if self.codebook_dim == self.quantizer_dim:  # (no projection, as the references)
            object.__setattr__(self, "codebook_dim", None)
        for name in ("sample_rate", "encoder_dim", "latent_dim", "decoder_dim", "n_q",
                     "codebook_size"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ConfigError(f"{name} must be a positive integer, got "
                                  f"{getattr(self, name)!r}")
        if not self.ratios or any(not isinstance(r, int) or r < 1 for r in self.ratios):
            raise ConfigError(f"ratios must be positive integers, got {list(self.ratios)}")
        if self.decoder_dim % 2 ** len(self.ratios):
            raise ConfigError(f"decoder_dim {self.decoder_dim} must halve {len(self.ratios)} "
                              "times")
        if self.semantic_downsample < 1 or \
                self.hop_length * SEMANTIC_RATE != \
                self.semantic_downsample * SEMANTIC_HOP * self.sample_rate:
            raise ConfigError(f"a frame of {self.hop_length} samples at {self.sample_rate} Hz "
                              f"is not a whole number of HuBERT frames ({SEMANTIC_HOP} samples "
                              f"at {SEMANTIC_RATE} Hz)")
        if math.prod(self.hubert.conv_strides) != SEMANTIC_HOP:
            raise ConfigError(f"HuBERT's strides must take {SEMANTIC_HOP} samples a frame")

    @property
    def hop_length(self) -> int:
        return math.prod(self.ratios)

    @property
    def semantic_downsample(self) -> int:
        """HuBERT frames a code frame (Boson's semantic_downsample_factor: every n-th kept)."""
        return int(self.hop_length / (self.sample_rate / SEMANTIC_RATE) / SEMANTIC_HOP)

    @property
    def semantic_dim(self) -> int:
        return self.hubert.hidden_size

    @property
    def quantizer_dim(self) -> int:
        return self.latent_dim + self.semantic_dim

    @property
    def is_higgs(self) -> bool:
        """Higgs Audio v2's tokenizer (Boson's fork: 24 kHz, projected codebooks)."""
        return self.sample_rate != SEMANTIC_RATE

    def to_dict(self) -> dict:
        d = asdict(self)
        d["ratios"] = list(d["ratios"])
        d["hubert"] = {k: list(v) if isinstance(v, tuple) else v for k, v in d["hubert"].items()}
        return d

    @classmethod
    def from_dict(cls, d: dict) -> XCodecConfig:
        d = dict(d)
        hubert = d.pop("hubert", None)
        if hubert is not None:
            hubert = config_from_dict(HubertConfig, hubert, "X-Codec HuBERT")
            d["hubert"] = hubert
        return config_from_dict(cls, d, "X-Codec")

    @classmethod
    def from_boson(cls, d: dict, **widths) -> XCodecConfig:
        """Boson's config.json (HiggsAudioTokenizer's keyword arguments), with the widths its
        code fixes (encoder_dim, decoder_dim, hubert) as read from the weights."""
        try:
            if not isinstance(d.get("bins", 1024), int):
                raise ConfigError("finite scalar quantization (bins as levels) is not supported")
            return cls(sample_rate=int(d.get("sample_rate", 16000)),
                       ratios=tuple(d.get("ratios", (8, 5, 4, 2))),
                       latent_dim=int(d.get("D", 128)), n_q=int(d.get("n_q", 8)),
                       codebook_size=int(d.get("bins", 1024)),
                       codebook_dim=d.get("codebook_dim"), **widths)
        except (TypeError, ValueError) as e:
            raise ConfigError(f"bad Higgs Audio tokenizer config: {e}") from None

    @classmethod
    def from_soundstream(cls, d: dict, **widths) -> XCodecConfig:
        """X-Codec's SoundStream arguments (its yaml's generator config; YuE's too): the
        codebooks its last bandwidth buys, full-width codebooks, the semantic
        teacher of the weights' shapes (HuBERT, or WavLM: its relative position embedding)."""
        try:
            rate, ratios = int(d.get("sample_rate", 16000)), tuple(d.get("ratios", (8, 5, 4, 2)))
            bandwidth = list(d.get("target_bandwidths", (1, 1.5, 2, 4, 6)))[-1]
            frame_rate = math.ceil(rate / math.prod(ratios))
            return cls(sample_rate=rate, ratios=ratios, latent_dim=int(d.get("D", 128)),
                       n_q=int(1000 * bandwidth // (frame_rate * 10)),
                       codebook_size=int(d.get("bins", 1024)), codebook_dim=None, **widths)
        except (TypeError, ValueError) as e:
            raise ConfigError(f"bad X-Codec config: {e}") from None

    @classmethod
    def from_hf(cls, d: dict) -> XCodecConfig:
        """transformers' HiggsAudioV2TokenizerConfig or XcodecConfig (config.json; absent keys
        take transformers' defaults for that model type)."""
        higgs = d.get("model_type") == "higgs_audio_v2_tokenizer"
        try:
            acoustic = d.get("acoustic_model_config") or {}
            semantic = d.get("semantic_model_config") or {}
            rates = tuple(acoustic.get("downsampling_ratios", (8, 5, 4, 2)))
            rate = int(d.get("sample_rate", 24000 if higgs else 16000))
            bins = int(d.get("codebook_size", 1024))
            frame_rate = math.ceil(rate / math.prod(rates))
            bandwidth = list(d.get("target_bandwidths", (0.5, 1, 1.5, 2, 4)))[-1]
            latent = acoustic.get("hidden_size", 256)
            hub = HubertConfig()
            hubert = replace(
                hub, conv_dims=tuple(semantic.get("conv_dim", hub.conv_dims)),
                conv_kernels=tuple(semantic.get("conv_kernel", hub.conv_kernels)),
                conv_strides=tuple(semantic.get("conv_stride", hub.conv_strides)),
                hidden_size=semantic.get("hidden_size", hub.hidden_size),
                heads=semantic.get("num_attention_heads", hub.heads),
                intermediate_size=semantic.get("intermediate_size", hub.intermediate_size),
                layers=semantic.get("num_hidden_layers", hub.layers),
                pos_conv_kernel=semantic.get("num_conv_pos_embeddings", hub.pos_conv_kernel),
                pos_conv_groups=semantic.get("num_conv_pos_embedding_groups",
                                             hub.pos_conv_groups),
                layer_norm_eps=semantic.get("layer_norm_eps", hub.layer_norm_eps),
                projection_norm=semantic.get("feat_proj_layer_norm", hub.projection_norm),
                relative_buckets=semantic.get("num_buckets", 320)
                if semantic.get("model_type") == "wavlm" else 0,
                relative_distance=semantic.get("max_bucket_distance", hub.relative_distance))
            book = d.get("codebook_dim", 64 if higgs else None)
            return cls(sample_rate=rate, ratios=rates,
                       encoder_dim=acoustic.get("encoder_hidden_size", 64), latent_dim=latent,
                       decoder_dim=acoustic.get("decoder_hidden_size", 1024),
                       n_q=int(1000 * bandwidth // (frame_rate * math.ceil(math.log2(bins)))),
                       codebook_size=bins,
                       codebook_dim=None if book in (None, latent + hubert.hidden_size) else book,
                       hubert=hubert)
        except (TypeError, ValueError) as e:
            raise ConfigError(f"bad transformers X-Codec config: {e}") from None


# the released models: Higgs Audio v2's tokenizer, X-Codec v1 (its HuBERT variants)
HIGGS_V2 = XCodecConfig()
XCODEC = XCodecConfig(sample_rate=16000, ratios=(8, 5, 4, 2), codebook_dim=None)
