"""The EnCodec references for parity tests: the `encodec` package's 24 kHz model (PyPI encodec
0.1.1, `EncodecModel.encodec_model_24khz(pretrained=False)`) with random weights, and
transformers' EncodecModel holding the same weights; saved as the package's state dict
(`encodec_24khz-*.th`) and as the hub's transformers repository is laid out.

Default init leaves the codebooks all zero (every code 0) and the biases at 0; the codebooks
are filled with N(0, s^2 0.7^(2i)) for codebook i, s the encoder output's spread on noise (as
the spec's recipe says), the biases and weight-norm gains randomised."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

STAND_INS = Path(__file__).parent.parent / "dac" / "stand_ins"  # (torchaudio)


def import_encodec():
    if str(STAND_INS) not in sys.path:
        sys.path.insert(0, str(STAND_INS))
    import encodec

    return encodec


def encodec_model(seed: int = 0):
    encodec = import_encodec()
    torch.manual_seed(seed)
    model = encodec.EncodecModel.encodec_model_24khz(pretrained=False).eval()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") and "lstm" not in name:
                p.copy_(0.02 * torch.randn(p.shape, generator=g))
            elif name.endswith("weight_g"):
                p.mul_(0.5 + torch.rand(p.shape, generator=g))
        spread = model.encoder(0.1 * torch.randn(1, 1, 24000, generator=g)).std()
        for i, layer in enumerate(model.quantizer.vq.layers):
            book = layer._codebook
            book.embed.copy_(spread * 0.7**i * torch.randn(book.embed.shape, generator=g))
            book.inited.fill_(1)
    return model


def save_th(model, folder: Path, name: str = "encodec_24khz-test.th") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), folder / name)
    return folder / name


def hf_model(model):
    """transformers' EncodecModel with the package model's weights (its names)."""
    from transformers import EncodecConfig, EncodecModel

    hf = EncodecModel(EncodecConfig()).eval()
    sd = {}
    for key, value in model.state_dict().items():
        new = (key.replace("encoder.model.", "encoder.layers.")
               .replace("decoder.model.", "decoder.layers.")
               .replace(".conv.conv.", ".conv.").replace(".convtr.convtr.", ".conv.")
               .replace("quantizer.vq.layers.", "quantizer.layers.")
               .replace("._codebook.", ".codebook.")
               .replace(".weight_g", ".parametrizations.weight.original0")
               .replace(".weight_v", ".parametrizations.weight.original1"))
        sd[new] = value
    hf.load_state_dict(sd, strict=True)
    return hf


def reference_codes(model, audio: torch.Tensor, bandwidth: float | None = None) -> torch.Tensor:
    model.set_target_bandwidth(bandwidth) if bandwidth else setattr(model, "bandwidth", None)
    with torch.no_grad():
        frames = model.encode(audio)
    assert len(frames) == 1
    return frames[0][0]


def reference_decode(model, codes: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model.decode([(codes, None)])
