"""The DAC references for parity tests: the `dac` package's DAC (PyPI descript-audio-codec
1.0.0) with random weights, and transformers' DacModel holding the same weights; saved as the
package saves them (`weights.pth`: state_dict with weight_g/weight_v, metadata kwargs) and as
the hub's transformers repositories are laid out (config.json + model.safetensors).

Default init leaves every Snake alpha at 1, every bias at 0 and each weight-norm gain equal to
its direction's norm (the package's init_weights writes `weight`, which weight norm recomputes);
they are randomised, as the spec's recipe says (alpha U(0.25, 1.75), biases N(0, 0.02^2), gains
x U(0.5, 1.5)); the codebooks are N(0, 1)."""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path

import torch

STAND_INS = Path(__file__).parent / "stand_ins"

# small: the spec's (encoder 8, decoder 32); odd stride 5 as 24/16 kHz; and the released sizes
TINY = {"encoder_dim": 8, "decoder_dim": 32, "sample_rate": 44100}
TINY_ODD = {**TINY, "encoder_rates": [2, 4, 5, 8], "decoder_rates": [8, 5, 4, 2],
            "n_codebooks": 12, "sample_rate": 16000}
TINY_LATENT = {**TINY, "latent_dim": 16, "n_codebooks": 18}  # the 16 kbps model's narrow latent
FULL_44 = {}
FULL_24 = {"encoder_rates": [2, 4, 5, 8], "decoder_rates": [8, 5, 4, 2], "n_codebooks": 32,
           "sample_rate": 24000}
SPEECH = {**FULL_24, "n_codebooks": 2}  # IBM's DAC.speech v1.0 (weights_24khz_1.5kbps_v1.0.pth)
SPEECH_SMALL = {**TINY_ODD, "n_codebooks": 2, "sample_rate": 24000}


def import_dac():
    """The dac package, with the stand-ins for torchaudio and audiotools (stand_ins/README)."""
    if str(STAND_INS) not in sys.path:
        sys.path.insert(0, str(STAND_INS))
    import dac

    return dac


def dac_model(kwargs: dict, seed: int = 0):
    dac = import_dac()
    torch.manual_seed(seed)
    model = dac.DAC(**kwargs).eval()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("alpha"):
                p.copy_(0.25 + 1.5 * torch.rand(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.02 * torch.randn(p.shape, generator=g))
            elif name.endswith("weight_g"):
                p.mul_(0.5 + torch.rand(p.shape, generator=g))
    return model


def all_kwargs(kwargs: dict) -> dict:
    """The DAC(...) arguments as the package's save writes them (every default filled)."""
    dac = import_dac()
    sig = inspect.signature(dac.DAC)
    return {k: kwargs.get(k, p.default) for k, p in sig.parameters.items()}


def save_pth(model, kwargs: dict, folder: Path, name: str = "weights.pth") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    torch.save({"state_dict": model.state_dict(), "metadata": {"kwargs": all_kwargs(kwargs)}},
               folder / name)
    return folder / name


def hf_names(model) -> dict[str, str]:
    """The package's module names -> transformers' (its converter's mapping)."""
    n_enc = len(model.encoder_rates)
    n_dec = len(model.decoder_rates)
    out = {"encoder.block.0": "encoder.conv1", f"encoder.block.{n_enc + 1}": "encoder.snake1",
           f"encoder.block.{n_enc + 2}": "encoder.conv2", "decoder.model.0": "decoder.conv1",
           f"decoder.model.{n_dec + 1}": "decoder.snake1",
           f"decoder.model.{n_dec + 2}": "decoder.conv2"}
    parts = ["snake1", "conv1", "snake2", "conv2"]
    for i in range(1, n_enc + 1):
        for j in range(3):
            for p, part in enumerate(parts):
                out[f"encoder.block.{i}.block.{j}.block.{p}"] = \
                    f"encoder.block.{i - 1}.res_unit{j + 1}.{part}"
        out[f"encoder.block.{i}.block.3"] = f"encoder.block.{i - 1}.snake1"
        out[f"encoder.block.{i}.block.4"] = f"encoder.block.{i - 1}.conv1"
    for i in range(1, n_dec + 1):
        out[f"decoder.model.{i}.block.0"] = f"decoder.block.{i - 1}.snake1"
        out[f"decoder.model.{i}.block.1"] = f"decoder.block.{i - 1}.conv_t1"
        for j in range(3):
            for p, part in enumerate(parts):
                out[f"decoder.model.{i}.block.{j + 2}.block.{p}"] = \
                    f"decoder.block.{i - 1}.res_unit{j + 1}.{part}"
    return out


def hf_model(model, kwargs: dict):
    """transformers' DacModel with the package model's weights (weight norm folded)."""
    from transformers import DacConfig, DacModel

    full = all_kwargs(kwargs)
    config = DacConfig(encoder_hidden_size=full["encoder_dim"],
                       downsampling_ratios=list(full["encoder_rates"]),
                       decoder_hidden_size=full["decoder_dim"], n_codebooks=full["n_codebooks"],
                       codebook_size=full["codebook_size"], codebook_dim=full["codebook_dim"],
                       sampling_rate=full["sample_rate"])
    names = hf_names(model)
    sd = {}
    for key, value in model.state_dict().items():
        module, _, leaf = key.rpartition(".")
        if leaf == "weight_v":
            continue
        if leaf == "weight_g":
            v = model.state_dict()[f"{module}.weight_v"]
            value, leaf = torch._weight_norm(v, value, 0), "weight"
        sd[f"{names.get(module, module)}.{leaf}"] = value
    hf = DacModel(config).eval()
    hf.load_state_dict(sd, strict=True)
    return hf


def save_hf(hf, folder: Path) -> Path:
    hf.save_pretrained(folder)
    return folder


def reference_codes(model, audio: torch.Tensor, n: int | None = None) -> torch.Tensor:
    """The package's codes: preprocess (zero-pad to whole frames), encode."""
    with torch.no_grad():
        _, codes, *_ = model.encode(model.preprocess(audio, model.sample_rate), n)
    return codes


def reference_decode(model, codes: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model.decode(model.quantizer.from_codes(codes)[0])


def write_config(folder: Path, d: dict) -> None:
    (folder / "config.json").write_text(json.dumps(d))
