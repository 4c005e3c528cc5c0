"""Token-to-audio configurations: the flow (S3 tokens -> 50 Hz mel) and the HiFT vocoder
(mel -> 24 kHz audio) of CosyVoice 2 and Chatterbox, released sizes and small test sizes."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace

SAMPLE_RATE = 24000
MEL_HOP = 480  # samples per mel frame (50 Hz)
TOKEN_MEL_RATIO = 2  # mel frames per token
N_MELS = 80
SPEAKER_DIM = 192  # CAMPPlus x-vector
VOCAB = 6561  # v2 tokens 0..6560


@dataclass(frozen=True)
class FlowConfig:
    """The conformer encoder (512 channels: its lookahead and upsampling layers are built at
    that width) and the causal U-Net estimator of the flow, with its sampler's settings."""

    heads: int = 8  # encoder attention heads of 64 channels
    linear_units: int = 2048  # encoder feed-forward width
    blocks: int = 6  # encoder layers before upsampling (4 after, fixed)
    up_blocks: int = 4
    lookahead: int = 3  # tokens the pre-lookahead convolution sees ahead
    chunk: int = 25  # tokens per attention chunk in the streaming mode (static_chunk_size)
    unet_channels: int = 256
    unet_blocks: int = 4  # transformer blocks per U-Net stage
    unet_mid: int = 12  # middle stages
    unet_heads: int = 8
    unet_head_dim: int = 64
    steps: int = 10  # Euler steps (cosine schedule)
    cfg_rate: float = 0.7  # classifier-free guidance: (1 + r) v_cond - r v_uncond

    width: int = field(default=512, init=False)


@dataclass(frozen=True)
class HiftConfig:
    """The HiFT vocoder: an F0 predictor, a harmonic-plus-noise source (`sine`: "sinegen2",
    CosyVoice 2's; "sinegen", Chatterbox's) and an iSTFT-Net generator."""

    base_channels: int = 512
    f0_channels: int = 512
    harmonics: int = 8
    upsample_rates: tuple[int, ...] = (8, 5, 3)
    upsample_kernels: tuple[int, ...] = (16, 11, 7)
    resblock_kernels: tuple[int, ...] = (3, 7, 11)
    resblock_dilations: tuple[int, ...] = (1, 3, 5)
    source_kernels: tuple[int, ...] = (7, 7, 11)
    n_fft: int = 16
    hop: int = 4
    sine: str = "sinegen2"
    sine_amp: float = 0.1
    noise_std: float = 0.003
    voiced_threshold: float = 10.0
    lrelu_slope: float = 0.1
    audio_limit: float = 0.99

    @property
    def upsample(self) -> int:
        """Samples per mel frame (480)."""
        n = self.hop
        for r in self.upsample_rates:
            n *= r
        return n


NOISES = ("fixed", "drawn")


@dataclass(frozen=True)
class Token2WavConfig:
    """The flow, the vocoder, and the reference's conventions: `noise` "fixed" (CosyVoice 2:
    the flow starts from one buffer, torch.manual_seed(0) then randn [1, 80, 15000], the same
    for every call) or "drawn" (Chatterbox: drawn for each call from its seed), and `fade_in`
    (Chatterbox: the first 960 samples faded in, the first 480 silent; 0: none)."""

    flow: FlowConfig = FlowConfig()
    hift: HiftConfig = HiftConfig()
    noise: str = "fixed"
    fade_in: int = 0
    speaker_encoder: bool = True  # CAMPPlus, to make voices (False: voices come from files)
    speaker_onnx: str | None = None  # or the path of CosyVoice 2's campplus.onnx, which makes
    # them on onnxruntime (where the files are, not a fact of the weights: not in to_dict)

    def __post_init__(self):
        if self.noise not in NOISES:
            raise ValueError(f"noise must be one of {NOISES}, got {self.noise!r}")

    def to_dict(self) -> dict:
        return {"flow": {f.name: getattr(self.flow, f.name) for f in fields(FlowConfig)
                         if f.init},
                "hift": asdict(self.hift), "noise": self.noise, "fade_in": self.fade_in,
                "speaker_encoder": self.speaker_encoder}

    @classmethod
    def from_dict(cls, d: dict) -> Token2WavConfig:
        hift = {k: tuple(v) if isinstance(v, list) else v for k, v in d.get("hift", {}).items()}
        return cls(FlowConfig(**d.get("flow", {})), HiftConfig(**hift),
                   d.get("noise", "fixed"), int(d.get("fade_in", 0)),
                   bool(d.get("speaker_encoder", True)))


COSYVOICE2 = Token2WavConfig()
CHATTERBOX = Token2WavConfig(hift=HiftConfig(sine="sinegen"), noise="drawn", fade_in=960)


def small(like: Token2WavConfig = COSYVOICE2) -> Token2WavConfig:
    """A small configuration for tests with `like`'s conventions (the encoder stays 512 wide,
    heads 64 wide)."""
    return replace(like, flow=FlowConfig(heads=2, linear_units=256, blocks=1, up_blocks=4,
                                         unet_channels=64, unet_blocks=1, unet_mid=2,
                                         unet_heads=2, unet_head_dim=64),
                   hift=replace(like.hift, base_channels=64, f0_channels=64))
