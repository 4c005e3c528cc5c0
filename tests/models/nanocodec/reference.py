"""The NanoCodec reference for parity tests: NeMo's own codec modules (nemo_toolkit 3.0.0's
`tts/modules/audio_codec_modules.py` and `common/parts/utils.py`, in .refs/nemo:
tests/install_references.sh), loaded by file path with stand-ins for the NeMo packages they
import (type checking, neural types, logging, the mel front ends they never run), on random
weights; saved as a `.nemo` file (an uncompressed tar of model_config.yaml and
model_weights.ckpt).

AudioCodecModel's encode and decode are re-created here as it runs them: the audio zero-padded
to whole frames (`pad_audio`), the encoder, the group FSQ, and back. Random init gives latents
of std ~0.01, all one code: the encoder's last convolution's weight-norm gain is scaled so that
every FSQ level occurs; Snake alphas and biases are randomised."""

from __future__ import annotations

import importlib.util
import io
import os
import sys
import tarfile
import types
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[3]
REFS = Path(os.environ.get("AUDIOTOK_NEMO_REF", ROOT / ".refs" / "nemo"))
NEMO = REFS / "nemo"

# (down_sample_rates, groups, levels, encoder base, decoder base[, residual kernels, dilations])
TINY = ((2, 3, 6, 7, 7), 4, (9, 8, 8, 7), 4, 64)
SHORT = ((2, 3), 4, (9, 8, 8, 7), 4, 16, (3, 7), (1, 3))  # (few layers: quick to export)
TINY_189 = ((2, 2, 4, 8, 8), 8, (8, 7, 6, 6), 4, 64)
FULL = ((2, 3, 6, 7, 7), 4, (9, 8, 8, 7), 24, 864)

_modules = None


def _stub(name: str, **attrs) -> None:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    sys.modules.setdefault(name, module)


def modules():
    """(audio_codec_modules, common utils) of NeMo, imported once; skip when not installed."""
    global _modules
    if _modules is not None:
        return _modules
    if not (NEMO / "collections" / "tts" / "modules" / "audio_codec_modules.py").is_file():
        pytest.skip(f"the NanoCodec oracle is not installed in {REFS} "
                    "(tests/install_references.sh)")
    import logging

    dummy = type("Dummy", (), {"__init__": lambda self, *a, **k: None})
    _stub("nemo.core.classes.common",
          typecheck=lambda *a, **k: (lambda f: f))
    _stub("nemo.core.classes.module", NeuralModule=torch.nn.Module)
    names = ("AudioSignal", "EncodedRepresentation", "Index", "LengthsType", "MelSpectrogramType",
             "TokenIndex", "VoidType", "LogitsType", "LossType", "PredictionsType",
             "LabelsType", "SpectrogramType", "ProbsType")
    _stub("nemo.core.neural_types.elements", **{n: dummy for n in names})
    _stub("nemo.core.neural_types.neural_type", NeuralType=dummy)
    _stub("nemo.utils", logging=logging.getLogger("nemo-reference"))
    _stub("nemo.collections.asr.modules", AudioToMelSpectrogramPreprocessor=dummy)
    _stub("nemo.collections.audio.parts.utils.transforms", MelSpectrogram=dummy,
          Resample=dummy)

    def load(name: str, path: Path):
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module

    utils = load("nemo.collections.common.parts.utils",
                 NEMO / "collections" / "common" / "parts" / "utils.py")
    acm = load("nemo_reference_audio_codec_modules",
               NEMO / "collections" / "tts" / "modules" / "audio_codec_modules.py")
    _modules = acm, utils
    return _modules


def config(spec) -> dict:
    """The .nemo's model_config.yaml of `spec` (the released 0.6 kbps one at FULL)."""
    rates, groups, levels, enc, dec = spec[:5]
    residual = {"resblock_kernel_sizes": list(spec[5]), "resblock_dilation_sizes": list(spec[6])
                } if len(spec) > 5 else {}
    prefix = "nemo.collections.tts.modules.audio_codec_modules."
    cfg = {
        "sample_rate": 22050, "samples_per_frame": int(torch.tensor(rates).prod()),
        "audio_encoder": {"_target_": prefix + "HiFiGANEncoder", "down_sample_rates": list(rates),
                          "encoded_dim": groups * len(levels), "base_channels": enc,
                          "activation": "lrelu", "pad_mode": "replicate"},
        "vector_quantizer": {"_target_": prefix + "GroupFiniteScalarQuantizer",
                             "num_groups": groups, "num_levels_per_group": list(levels)},
        "audio_decoder": {"_target_": prefix + "CausalHiFiGANDecoder",
                          "up_sample_rates": list(rates[::-1]),
                          "input_dim": groups * len(levels), "base_channels": dec,
                          "activation": "half_snake", "output_activation": "clamp",
                          "pad_mode": "zeros", "n_groups_equal_to_out_channels": True},
        "optim": {"name": "adamw", "lr": 2e-4},  # (training keys, ignored)
    }
    cfg["audio_encoder"].update(residual)
    cfg["audio_decoder"].update(residual)
    return cfg


class Codec(torch.nn.Module):
    """NeMo's three modules under AudioCodecModel's attribute names (its state dict's keys)."""

    def __init__(self, spec, seed: int = 0):
        super().__init__()
        acm, _ = modules()
        cfg = config(spec)
        torch.manual_seed(seed)
        build = {k: getattr(acm, v.pop("_target_").rsplit(".", 1)[1])
                 for k, v in ((k, dict(cfg[k])) for k in
                              ("audio_encoder", "vector_quantizer", "audio_decoder"))}
        for k, cls in build.items():
            kwargs = {a: v for a, v in cfg[k].items() if a != "_target_"}
            setattr(self, k, cls(**kwargs))
        self.samples_per_frame = cfg["samples_per_frame"]
        self.eval()
        g = torch.Generator().manual_seed(seed + 1)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("alpha"):
                    p.copy_(0.25 + 1.5 * torch.rand(p.shape, generator=g))
                elif name.endswith("bias"):
                    p.add_(0.02 * torch.randn(p.shape, generator=g))
                elif name.endswith("original0"):  # weight-norm gains
                    p.mul_(0.5 + torch.rand(p.shape, generator=g))
            self._spread_latents(g)

    def _spread_latents(self, g: torch.Generator) -> None:
        """Scale the encoder's last convolution and centre its output (random weights give
        latents of a fixed offset per channel and a tiny spread over time: one code) so that a
        second of noise spreads each latent channel over about +-1.5."""
        conv = self.audio_encoder.post_conv.conv
        x = 0.1 * torch.randn(1, 22050, generator=g)
        n = torch.tensor([22050])
        latents, _ = self.audio_encoder(audio=x, audio_len=n)
        conv.parametrizations.weight.original0.mul_(1.5 / latents.std(-1).mean())
        latents, _ = self.audio_encoder(audio=x, audio_len=n)
        conv.bias.sub_(latents.mean(-1)[0])

    def encode(self, audio: torch.Tensor) -> torch.Tensor:
        """Tokens [B, G, T] of audio [B, N] (every item N samples), as AudioCodecModel.encode."""
        with torch.inference_mode():
            n = torch.full((audio.shape[0],), audio.shape[1])
            spf = self.samples_per_frame
            frames = -(-audio.shape[1] // spf)
            audio = torch.nn.functional.pad(audio, (0, frames * spf - audio.shape[1]))
            encoded, encoded_len = self.audio_encoder(audio=audio, audio_len=n * 0 + frames * spf)
            tokens = self.vector_quantizer.encode(inputs=encoded, input_len=encoded_len)
            return tokens.transpose(0, 1).long()

    def encode_batch(self, audio: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Tokens [B, G, T] of a zero-padded batch with each item's length (NeMo's masks)."""
        with torch.inference_mode():
            spf = self.samples_per_frame
            padded = -(-lengths // spf) * spf
            audio = torch.nn.functional.pad(audio, (0, int(padded.max()) - audio.shape[1]))
            encoded, encoded_len = self.audio_encoder(audio=audio, audio_len=padded)
            tokens = self.vector_quantizer.encode(inputs=encoded, input_len=encoded_len)
            return tokens.transpose(0, 1).long()

    def decode(self, tokens: torch.Tensor) -> torch.Tensor:
        """Audio [B, T x spf] of tokens [B, G, T], as AudioCodecModel.decode."""
        with torch.inference_mode():
            n = torch.full((tokens.shape[0],), tokens.shape[-1])
            latents = self.vector_quantizer.decode(indices=tokens.transpose(0, 1).int(),
                                                   input_len=n)
            audio, _ = self.audio_decoder(inputs=latents, input_len=n)
            return audio


def save_nemo(model: Codec, spec, path: Path, gzip: bool = False) -> Path:
    """A .nemo file: model_config.yaml and model_weights.ckpt (with a training-only tensor)."""
    import yaml

    path.parent.mkdir(parents=True, exist_ok=True)
    weights = io.BytesIO()
    torch.save({**model.state_dict(), "discriminator.conv.weight": torch.zeros(3)}, weights)
    members = {"./model_config.yaml": yaml.safe_dump(config(spec)).encode(),
               "./model_weights.ckpt": weights.getvalue()}
    with tarfile.open(path, "w:gz" if gzip else "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path
