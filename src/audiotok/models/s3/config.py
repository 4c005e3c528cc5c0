"""S3 tokenizer configurations: the four released variants and small test sizes."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from .token2wav.config import Token2WavConfig

SAMPLE_RATE = 16000
HOP = 160  # samples per mel frame (100 frames a second)
WINDOW_FRAMES = 3000  # mel frames the encoder sees at most (30 s)
WINDOW_STRIDE = 2600  # mel frames between long-audio window starts (26 s)


@dataclass(frozen=True)
class S3Config:
    """One S3 tokenizer. variant: "v1" (50 Hz, VQ 4096), "v1_25hz" (25 Hz, VQ 4096),
    "v2_25hz" or "v3_25hz" (25 Hz, FSQ 3^8 = 6561; v3 has 12 layers)."""

    variant: str = "v2_25hz"
    n_mels: int = 128
    width: int = 1280
    heads: int = 20  # of 64 channels each (RoPE's table is 64 wide)
    layers: int = 6
    fsmn_kernel: int = 31
    ln_eps: float = 1e-5
    positions: int = 1500  # v1's table of positions; v2/v3: RoPE over 2048
    token2wav: Token2WavConfig | None = None  # v2 weights with a decoder (tokens -> audio)

    def __post_init__(self):
        if self.token2wav is not None and self.variant != "v2_25hz":
            raise ValueError(f"token-to-audio decodes v2 tokens; these weights are {self.variant}")

    @property
    def vq(self) -> bool:
        """A 4096-entry VQ (v1, v1_25hz); otherwise FSQ of 8 ternary digits (v2, v3)."""
        return self.variant.startswith("v1")

    @property
    def codebook_size(self) -> int:
        return 4096 if self.vq else 3**8

    @property
    def conv1_stride(self) -> int:
        return 1 if self.variant == "v1" else 2

    @property
    def frames_per_token(self) -> int:
        """Mel frames a token: 2 at 50 Hz, 4 at 25 Hz."""
        return 2 * self.conv1_stride

    @property
    def samples_per_token(self) -> int:
        return HOP * self.frames_per_token

    @property
    def token_rate(self) -> int:
        return SAMPLE_RATE // self.samples_per_token

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["token2wav"] = None if self.token2wav is None else self.token2wav.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict) -> S3Config:
        known = {f.name for f in fields(cls)}
        d = {k: v for k, v in d.items() if k in known}
        if d.get("token2wav") is not None:
            d["token2wav"] = Token2WavConfig.from_dict(d["token2wav"])
        cfg = cls(**d)
        if cfg.variant not in VARIANTS:
            raise ValueError(f"unknown S3 variant {cfg.variant!r}; one of {', '.join(VARIANTS)}")
        return cfg


VARIANTS = {
    "v1": S3Config("v1"),
    "v1_25hz": S3Config("v1_25hz"),
    "v2_25hz": S3Config("v2_25hz"),
    "v3_25hz": S3Config("v3_25hz", layers=12),
}


def small(variant: str) -> S3Config:
    """A small configuration of `variant` for tests (heads stay 64 channels wide)."""
    return replace(VARIANTS[variant], width=128, heads=2, layers=2)
