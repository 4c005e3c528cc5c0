"""Configuration of BiCodec (Spark-TTS's codec): 16 kHz speech <-> semantic tokens at 50 Hz (one
codebook of 8192 searched by cosine) from wav2vec2-XLSR-53 features, plus 32 global tokens per
utterance (FSQ, 4096) from a speaker encoder over a 6 s reference clip.

Read from Spark's files: `BiCodec/config.yaml` (key `audio_tokenizer`), the model folder's
`config.yaml` (sample rate, reference clip, volume normalisation) and
`wav2vec2-large-xlsr-53/config.json`; the sizes the weights tell win over the defaults.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from ...errors import ConfigError
from ...nn.hubert import HubertConfig
from ..family import config_from_dict

# XLSR-53's sizes (wav2vec2-large with stable layer norm); only the first 16 layers are run
XLSR = HubertConfig(hidden_size=1024, heads=16, intermediate_size=4096, layers=24,
                    stable_layer_norm=True)


@dataclass(frozen=True)
class BiCodecConfig:
    sample_rate: int = 16000
    hop_length: int = 320  # samples a semantic token (wav2vec2's hop)
    # the speaker branch's mel spectrogram (torchaudio MelSpectrogram, magnitude, no log)
    n_fft: int = 1024
    win_length: int = 640
    mel_fmin: float = 10.0
    mel_fmax: float | None = None  # None: sample_rate / 2
    num_mels: int = 128
    # the semantic encoder: a Vocos backbone over the wav2vec2 features
    feature_dim: int = 1024
    vocos_dim: int = 384
    vocos_intermediate_dim: int = 2048
    encoder_layers: int = 12
    latent_dim: int = 1024
    # the factorized VQ
    codebook_size: int = 8192
    codebook_dim: int = 8
    # the speaker encoder (ECAPA-TDNN, perceiver, FSQ)
    speaker_latent_dim: int = 128
    global_tokens: int = 32
    fsq_levels: tuple[int, ...] = (4, 4, 4, 4, 4, 4)
    speaker_dim: int = 1024  # the d-vector's width
    # the prenet (a Vocos backbone conditioned on the d-vector) and the wave generator
    prenet_dim: int = 384
    prenet_intermediate_dim: int = 2048
    prenet_layers: int = 12
    decoder_channels: int = 1536
    decoder_rates: tuple[int, ...] = (8, 5, 4, 2)
    decoder_kernels: tuple[int, ...] = (16, 11, 8, 4)
    # the tokenizer's front end
    ref_segment_seconds: float = 6.0
    volume_normalize: bool = True
    feature_layers: tuple[int, ...] = (11, 14, 16)  # wav2vec2 hidden states averaged
    wav2vec2: HubertConfig = field(default_factory=lambda: XLSR)

    def __post_init__(self):
        for name in ("sample_rate", "hop_length", "codebook_size", "global_tokens",
                     "decoder_channels", "num_mels"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ConfigError(f"{name} must be a positive integer, got "
                                  f"{getattr(self, name)!r}")
        if math.prod(self.decoder_rates) != self.hop_length or \
                len(self.decoder_rates) != len(self.decoder_kernels):
            raise ConfigError(f"decoder rates {list(self.decoder_rates)} must multiply to the "
                              f"hop {self.hop_length}, one kernel each")
        if any((k - r) % 2 for k, r in zip(self.decoder_kernels, self.decoder_rates,
                                           strict=True)):
            raise ConfigError("each decoder kernel minus its rate must be even (whole frames)")
        if math.prod(self.wav2vec2.conv_strides) != self.hop_length:
            raise ConfigError(f"wav2vec2's strides must take {self.hop_length} samples a frame")
        if not self.feature_layers or max(self.feature_layers) > self.wav2vec2.layers or \
                min(self.feature_layers) < 1:
            raise ConfigError(f"feature layers {list(self.feature_layers)} must be among "
                              f"wav2vec2's {self.wav2vec2.layers}")
        if self.wav2vec2.hidden_size != self.feature_dim:
            raise ConfigError(f"the semantic encoder takes {self.feature_dim} features, "
                              f"wav2vec2 gives {self.wav2vec2.hidden_size}")

    @property
    def global_codebook_size(self) -> int:
        return math.prod(self.fsq_levels)

    @property
    def ref_samples(self) -> int:
        """The reference clip's length: ref_segment_seconds in whole hops (96 000)."""
        return int(self.sample_rate * self.ref_segment_seconds) // self.hop_length * \
            self.hop_length

    @property
    def receptive_samples(self) -> int:
        """wav2vec2's first frame's input (400 samples: shorter audio has no frame)."""
        w = self.wav2vec2
        field_ = 1
        for k, s in zip(reversed(w.conv_kernels), reversed(w.conv_strides), strict=True):
            field_ = (field_ - 1) * s + k
        return field_

    def to_dict(self) -> dict:
        d = asdict(self)
        for k, v in d.items():
            if isinstance(v, tuple):
                d[k] = list(v)
        d["wav2vec2"] = {k: list(v) if isinstance(v, tuple) else v
                         for k, v in d["wav2vec2"].items()}
        return d

    @classmethod
    def from_dict(cls, d: dict) -> BiCodecConfig:
        d = dict(d)
        if (w := d.pop("wav2vec2", None)) is not None:
            d["wav2vec2"] = config_from_dict(HubertConfig, w, "BiCodec wav2vec2")
        return config_from_dict(cls, d, "BiCodec")

    @classmethod
    def from_spark(cls, codec: dict, top: dict | None = None,
                   wav2vec2: HubertConfig | None = None) -> BiCodecConfig:
        """Spark's `BiCodec/config.yaml` (`audio_tokenizer` section), the model folder's
        `config.yaml` (`top`) and the wav2vec2 sizes."""
        top = top or {}
        try:
            mel, enc = codec.get("mel_params", {}), codec.get("encoder", {})
            q, spk = codec.get("quantizer", {}), codec.get("speaker_encoder", {})
            pre, dec = codec.get("prenet", {}), codec.get("decoder", {})
            for part, ratios in (("encoder", enc.get("sample_ratios", [1, 1])),
                                 ("prenet", pre.get("sample_ratios", [1, 1]))):
                if any(r != 1 for r in ratios):
                    raise ConfigError(f"BiCodec's {part} with sample ratios {ratios} is not "
                                      "supported (the released model's are [1, 1])")
            if spk.get("fsq_num_quantizers", 1) != 1:
                raise ConfigError("BiCodec's speaker FSQ with more than one quantizer is not "
                                  "supported")
            if not q.get("use_l2_normlize", True):
                raise ConfigError("BiCodec's quantizer without L2 normalisation is not supported")
            kw = dict(
                sample_rate=int(top.get("sample_rate", mel.get("sample_rate", 16000))),
                hop_length=int(top.get("latent_hop_length", mel.get("hop_length", 320))),
                n_fft=int(mel.get("n_fft", 1024)), win_length=int(mel.get("win_length", 640)),
                mel_fmin=float(mel.get("mel_fmin", 10)),
                mel_fmax=None if mel.get("mel_fmax") is None else float(mel["mel_fmax"]),
                num_mels=int(mel.get("num_mels", 128)),
                feature_dim=int(enc.get("input_channels", 1024)),
                vocos_dim=int(enc.get("vocos_dim", 384)),
                vocos_intermediate_dim=int(enc.get("vocos_intermediate_dim", 2048)),
                encoder_layers=int(enc.get("vocos_num_layers", 12)),
                latent_dim=int(enc.get("out_channels", 1024)),
                codebook_size=int(q.get("codebook_size", 8192)),
                codebook_dim=int(q.get("codebook_dim", 8)),
                speaker_latent_dim=int(spk.get("latent_dim", 128)),
                global_tokens=int(spk.get("token_num", 32)),
                fsq_levels=tuple(int(v) for v in spk.get("fsq_levels", (4,) * 6)),
                speaker_dim=int(spk.get("out_dim", 1024)),
                prenet_dim=int(pre.get("vocos_dim", 384)),
                prenet_intermediate_dim=int(pre.get("vocos_intermediate_dim", 2048)),
                prenet_layers=int(pre.get("vocos_num_layers", 12)),
                decoder_channels=int(dec.get("channels", 1536)),
                decoder_rates=tuple(int(v) for v in dec.get("rates", (8, 5, 4, 2))),
                decoder_kernels=tuple(int(v) for v in dec.get("kernel_sizes", (16, 11, 8, 4))),
                ref_segment_seconds=float(top.get("ref_segment_duration", 6)),
                volume_normalize=bool(top.get("volume_normalize", True)),
            )
        except (TypeError, ValueError, AttributeError) as e:
            raise ConfigError(f"bad BiCodec config: {e}") from None
        if wav2vec2 is not None:
            kw["wav2vec2"] = wav2vec2
        return cls(**kw)
