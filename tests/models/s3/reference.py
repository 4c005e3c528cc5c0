"""The S3 tokenizer's reference for parity tests: s3tokenizer 0.3.0 (PyPI, installed without
its dependencies: see tests/install_references.sh), with the torchaudio stand-in on the path
(its utils import torchaudio for load_audio only). Models on random weights: v1's codebook is
all zeros by default (every code 0), so it gets random unit-norm rows; every other tensor is
the package's own initialisation, which is random."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

STAND_INS = Path(__file__).resolve().parents[1] / "dac" / "stand_ins"
NAMES = {"v1": "speech_tokenizer_v1", "v1_25hz": "speech_tokenizer_v1_25hz",
         "v2_25hz": "speech_tokenizer_v2_25hz", "v3_25hz": "speech_tokenizer_v3_25hz"}


def import_s3tokenizer():
    if str(STAND_INS) not in sys.path:
        sys.path.insert(0, str(STAND_INS))
    import s3tokenizer

    return s3tokenizer


def reference_model(variant: str, small: bool, seed: int = 0, layers: int = 2):
    """s3tokenizer's model of `variant` (full size, or the spec's small configuration with
    `layers` blocks), random weights from `seed`."""
    import_s3tokenizer()
    from s3tokenizer.model import ModelConfig, S3Tokenizer
    from s3tokenizer.model_v2 import S3TokenizerV2
    from s3tokenizer.model_v3 import ModelConfigV3, S3TokenizerV3

    torch.manual_seed(seed)
    name = NAMES[variant]
    if variant.startswith("v1"):
        cfg = ModelConfig(n_audio_state=64, n_audio_head=1, n_audio_layer=layers) if small \
            else ModelConfig()
        model = S3Tokenizer(name, cfg)
        with torch.no_grad():
            e = torch.randn_like(model.quantizer._codebook.embed)
            model.quantizer._codebook.embed.copy_(e / e.norm(dim=1, keepdim=True))
    elif variant == "v2_25hz":
        model = S3TokenizerV2(name, ModelConfig(n_audio_state=128, n_audio_head=2,
                                                n_audio_layer=layers) if small else ModelConfig())
    else:
        cfg = ModelConfigV3(n_audio_state=128, n_audio_head=2, n_audio_layer=layers) if small \
            else ModelConfigV3()
        model = S3TokenizerV3(name, cfg)
    return model.eval()


def save_pt(model, path: Path) -> Path:
    """The state dict as s3tokenizer's init_from_pt reads it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), path)
    return path


def reference_codes(model, waves: list[torch.Tensor]) -> list[torch.Tensor]:
    """Each wave's codes as the package computes them: its log-mel, padding, quantize."""
    s3 = import_s3tokenizer()
    mels = [s3.log_mel_spectrogram(w) for w in waves]
    mel, lengths = s3.padding(mels)
    codes, n = model.quantize(mel, lengths)
    return [codes[i, : int(n[i])].long() for i in range(len(waves))]


# A token whose two best choices the reference's own float64-recomputed quantizer input separates
# by less than this is a tie at float32 rounding: a distance of size 1-4 (v1) or a tanh near the
# 0.5 boundary (v2, v3) computed by two kernels that sum in another order moves by a few float32
# ulps (1.2e-7 at 1), so which side wins depends on the CPU's kernels, the reference's too.
TIE = 1e-6


@torch.inference_mode()
def margins(model, waves: list[torch.Tensor]) -> list[torch.Tensor]:
    """Each wave's [T] token margins as the reference decides them, from its own quantizer input
    (recomputed in float64): v1 the gap between the two nearest codebook rows' distances;
    v2/v3 the least distance of a digit's 0.999 tanh(h) from a rounding boundary (|z| = 0.5)."""
    s3 = import_s3tokenizer()
    vq, held = model.quantizer, []

    def rows(x):  # each token's row index in place of its code, through the windows' merge
        held.append(x.reshape(-1, x.shape[-1]).double())
        return torch.arange(x.shape[0] * x.shape[1]).reshape(x.shape[:2])

    vq.encode = rows
    try:
        mel, lengths = s3.padding([s3.log_mel_spectrogram(w) for w in waves])
        ids, n = model.quantize(mel, lengths)
    finally:
        del vq.encode
    (x,) = held
    cb = vq._codebook
    if hasattr(cb, "project_down"):
        z = (x @ cb.project_down.weight.double().t() + cb.project_down.bias.double()).tanh()
        margin = ((z * 0.9990000128746033).abs() - 0.5).abs().amin(-1)
    else:
        x, e = torch.nn.functional.normalize(x, dim=-1), cb.embed.double()
        d = -(x.pow(2).sum(1, keepdim=True) - 2 * x @ e.t() + e.pow(2).sum(1)[None])
        best = d.topk(2, dim=-1).values
        margin = best[:, 0] - best[:, 1]
    return [margin[ids[i, : int(n[i])].long()] for i in range(len(waves))]


def assert_codes_equal(model, wave: torch.Tensor, got: torch.Tensor, want: torch.Tensor) -> None:
    """`got` [T] equals the reference's `want` [T] but at ties (TIE), at most 1 token in 1000."""
    assert got.shape == want.shape
    differ = (got != want).nonzero().flatten()
    if differ.numel():
        at = margins(model, [wave])[0][differ]
        assert differ.numel() <= max(1, want.numel() // 1000) and at.max() <= TIE, \
            (differ.tolist(), at.tolist())


def speech_like(n: int, seed: int = 0) -> torch.Tensor:
    """n samples of a sine sweep with noise, 16 kHz."""
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(n) / 16000
    return (0.3 * torch.sin(2 * torch.pi * (150 + 300 * t) * t) +
            0.05 * torch.randn(n, generator=g)).float()


def load_by_name(tmp_path: Path, repo_id: str, files: dict, name: str, wave: torch.Tensor):
    """`audiotok.load(name)` in a fresh offline process from a hub cache holding `files` as
    `repo_id`: (the loaded variant, the codes of `wave` [N] at 16 kHz, the process's stderr)."""
    import json

    from tests.test_hub import _run, cache_repo

    cache_repo(tmp_path / "cache", repo_id, files)
    torch.save(wave, tmp_path / "wave.pt")
    code = ("import audiotok, json, torch\n"
            f"c = audiotok.load({name!r})\n"
            f"x = torch.load(r'{tmp_path / 'wave.pt'}')[None]\n"
            "print(json.dumps([c.config.variant, c.encode(x, 16000).tokens[0, 0].tolist()]))\n")
    out = _run(code, {"HF_HUB_CACHE": str(tmp_path / "cache"), "HF_HOME": str(tmp_path / "h")})
    assert out.returncode == 0, out.stderr
    variant, codes = json.loads(out.stdout.strip().splitlines()[-1])
    return variant, codes, out.stderr
