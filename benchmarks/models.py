"""Full-size models with random weights that several benchmarks share, written once to --workdir.

    python benchmarks/models.py s2 /tmp/audiotok-bench/s2-pro-random/codec.pth   # (a child process)
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch


def random_weights(codec: str, workdir: Path) -> Path:
    """The checkpoint of full-size S2 Pro ("s2") or X-Codec2 ("xcodec2") with random weights,
    made on first use (S2's in a child process, so its memory does not count in the caller's)."""
    if codec == "s2":
        path = workdir / "s2-pro-random" / "codec.pth"
        if not path.exists():
            subprocess.run([sys.executable, __file__, "s2", str(path)], check=True)
        return path
    path = workdir / "xcodec2-random"
    if not (path / "model.safetensors").exists():
        from transformers import Xcodec2Config, Xcodec2Model

        torch.manual_seed(0)
        Xcodec2Model(Xcodec2Config()).eval().save_pretrained(path)
    return path


def make_s2(path: Path) -> None:
    """S2 Pro with random weights, saved in fish-speech's layout."""
    from audiotok.models.s2.config import S2_PRO
    from audiotok.models.s2.model import S2Model
    from audiotok.models.s2.weights import to_fish_speech

    torch.manual_seed(0)
    sd = to_fish_speech(S2Model(S2_PRO).state_dict())
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(sd, path)


def random_mimi(seed: int = 0, config=None):
    """A full-size (or `config`) Mimi codec with random weights that use every codebook."""
    from audiotok.models.mimi.codec import MimiCodec
    from audiotok.models.mimi.config import MIMI
    from audiotok.models.mimi.model import MimiModel

    torch.manual_seed(seed)
    model = MimiModel(config or MIMI).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "layer_scale" in name:
                p.uniform_(0.3, 0.5)
        latent = model.latent(torch.randn(1, 1, 1920 * 4) * 0.1)
        for rvq in (model.quantizer.semantic, model.quantizer.acoustic):
            scale = rvq.input_proj(latent).std()
            rvq.codebook.normal_().mul_(scale)
    return MimiCodec(model)


def random_tokens(codec, frames: int, seed: int) -> torch.Tensor:
    """[K, frames] tokens drawn uniformly from each codebook."""
    g = torch.Generator().manual_seed(seed)
    return torch.stack([torch.randint(0, n, (frames,), generator=g)
                        for n in codec.codebook_sizes])


if __name__ == "__main__":
    if sys.argv[1:2] == ["s2"]:
        make_s2(Path(sys.argv[2]))
    else:
        sys.exit("usage: models.py s2 PATH")
