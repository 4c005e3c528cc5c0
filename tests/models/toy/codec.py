"""The toy family's model and codec (see __init__.py)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

from audiotok.codec import Codec
from audiotok.streaming.spec import LAYERS, StreamSpec

from . import FAMILY

MU = 255.0


@dataclass
class MuLawConfig:
    sample_rate: int = 8000
    hop: int = 4

    def to_dict(self) -> dict:
        return asdict(self)


class MuLawModel(nn.Module):
    def __init__(self, config: MuLawConfig):
        super().__init__()
        self.config = config
        self.gain = nn.Parameter(torch.ones(1))  # a weight, so that dtype and devices apply

    def encode(self, audio: torch.Tensor) -> torch.Tensor:
        x = audio.reshape(audio.shape[0], 1, -1, self.config.hop).mean(-1).clamp(-1, 1)
        y = torch.sign(x) * torch.log1p(MU * x.abs()) / torch.log1p(torch.tensor(MU))
        return torch.round((y + 1) / 2 * 255).long()

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        y = codes.float() / 255 * 2 - 1
        x = torch.sign(y) * ((1 + MU) ** y.abs() - 1) / MU * self.gain
        return x.repeat_interleave(self.config.hop, dim=-1)

    def stream_roots(self, kind: str) -> list[nn.Module]:
        return []  # stateless: nothing to keep between steps

    def float32_islands(self) -> list[nn.Module]:
        return []


class MuLawCodec(Codec):
    family = FAMILY
    streaming = StreamSpec(decode=LAYERS, encode=LAYERS)  # causal: each frame on its own
    frame_rule = "ceil"

    def __init__(self, model: MuLawModel, **kw):
        super().__init__(model, model.config, **kw)
        self.sample_rate = model.config.sample_rate
        self.samples_per_frame = model.config.hop
        self.num_codebooks = 1
        self.codebook_sizes = (256,)

    @classmethod
    def from_checkpoint(cls, path: Path, config=None, **kw) -> MuLawCodec:
        path = Path(path)
        folder = path if path.is_dir() else path.parent
        d = json.loads((folder / "config.json").read_text())
        config = config or MuLawConfig(d.get("sample_rate", 8000), d.get("hop", 4))
        return cls(MuLawModel(config), source=str(folder), **kw)

    def _encode_batch(self, audio: torch.Tensor) -> torch.Tensor:
        return self.model.encode(audio)

    def _decode_batch(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return self.model.decode(tokens)
