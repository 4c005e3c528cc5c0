"""The X-Codec family's references for parity tests: Boson's HiggsAudioTokenizer
(boson-multimodal 0.1.1, in .refs/higgs: tests/install_references.sh) and transformers'
HiggsAudioV2TokenizerModel holding the same weights, on random weights; saved as Boson's hub
folder (config.json + model.pth) and as transformers' (config.json + model.safetensors).

Boson's module imports what its tokenizer never runs (vector_quantize_pytorch's FSQ, its
training utilities): stubs stand in for those while it imports. It resamples with torchaudio:
the real one from .refs/s3gen (pure Python there), as transformers' does, while the suite's
torchaudio stand-in stays what every other import gets.

Small models keep Boson's fixed semantic width (768: HuBERT with one layer) and narrow its
fixed acoustic widths (encoder 8, decoder 64 where the release has 64 and 1024) by wrapping
its DAC constructors. Default init leaves Snake alphas at 1, biases at 0, weight-norm gains at
their directions' norms and the codebooks at 0 (`inited` 0: Boson would run k-means on the
first call); all are randomised, and each codebook's rows are the residuals it sees (of noise)
plus noise, so that the search picks among many rows."""

from __future__ import annotations

import importlib
import json
import os
import sys
import types
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[3]
REFS = Path(os.environ.get("AUDIOTOK_HIGGS_REF", ROOT / ".refs" / "higgs"))
TORCHAUDIO = ROOT / ".refs" / "s3gen"  # (the real torchaudio, pure Python)
MODULE = "boson_multimodal.audio_processing.higgs_audio_tokenizer"

# (encoder width, decoder width, D, HuBERT layers, HuBERT conv width, HuBERT intermediate)
TINY = (8, 64, 16, 1, 32, 64)
FULL = (64, 1024, 256, 12, 512, 3072)

_boson = None


def _torchaudio_real():
    """Import the real torchaudio (from .refs/s3gen) without replacing the suite's stand-in."""
    stand_in = {k: v for k, v in sys.modules.items() if k.split(".")[0] == "torchaudio"}
    for k in stand_in:
        del sys.modules[k]
    sys.path.insert(0, str(TORCHAUDIO))
    try:
        import torchaudio
        import torchaudio.functional  # noqa: F401
        return torchaudio
    finally:
        sys.path.remove(str(TORCHAUDIO))
        for k in [k for k in sys.modules if k.split(".")[0] == "torchaudio"]:
            del sys.modules[k]
        sys.modules.update(stand_in)


def boson():
    """Boson's higgs_audio_tokenizer module (imported once); skip when not installed."""
    global _boson
    if _boson is not None:
        return _boson
    if not (REFS / "boson_multimodal").is_dir() or not (TORCHAUDIO / "torchaudio").is_dir():
        pytest.skip(f"the Higgs Audio tokenizer oracle is not installed in {REFS} "
                    "(tests/install_references.sh)")
    from tests.models.dac.reference import import_dac

    import_dac()  # (Boson's DAC copy imports the dac package's layers)
    real = _torchaudio_real()
    stubs = {"vector_quantize_pytorch": {"ResidualFSQ": None},
             "boson_multimodal.audio_processing.quantization.ddp_utils": {"SyncFunction": None}}
    saved = {k: sys.modules.get(k) for k in (*stubs, "torchaudio")}
    for name, attrs in stubs.items():
        module = types.ModuleType(name)
        module.__dict__.update(attrs)
        sys.modules[name] = module
    stand_in = sys.modules.get("torchaudio")
    sys.modules["torchaudio"] = real
    sys.path.insert(0, str(REFS))
    try:
        _boson = importlib.import_module(MODULE)
    finally:
        sys.path.remove(str(REFS))
        sys.path.append(str(REFS))  # (after the suite's own packages)
        for k, v in saved.items():
            if k == "torchaudio":
                continue
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
        if stand_in is not None:
            sys.modules["torchaudio"] = stand_in
        else:
            sys.modules.pop("torchaudio", None)
    return _boson


def hubert_config(spec):
    from transformers import HubertConfig

    _, _, _, layers, conv, hidden = spec
    return HubertConfig(hidden_size=768, num_hidden_layers=layers, num_attention_heads=12,
                        intermediate_size=hidden, conv_dim=(conv,) * 7, mask_time_prob=0.0)


# Boson's class at X-Codec v1's settings is X-Codec's SoundStream (16 kHz, no resampling, 160
# zeros on the pad path, full-width codebooks); YuE's xcodec_mini_infer has 12 codebooks
HIGGS = dict(codebook_dim=64, target_bandwidths=[0.5, 1, 1.5, 2, 4], ratios=[8, 5, 4, 2, 3],
             sample_rate=24000, n_q=8, semantic_techer="hubert_base_general")
YUE = dict(codebook_dim=None, target_bandwidths=[1, 1.5, 2, 4, 6], ratios=[8, 5, 4, 2],
           sample_rate=16000, n_q=12, semantic_techer="hubert_base")


def build(spec, seed: int = 0, kind: dict = HIGGS):
    """Boson's HiggsAudioTokenizer of `spec` (TINY or FULL) on random weights, eval mode; `kind`
    HIGGS (Higgs Audio v2) or YUE (X-Codec as YuE's xcodec_mini_infer)."""
    from transformers import HubertModel

    hat = boson()
    enc, dec, d, *_ = spec
    real = hat.dac2
    hat.AutoModel = types.SimpleNamespace(
        from_pretrained=lambda *a, **k: HubertModel(hubert_config(spec)))
    hat.dac2 = types.SimpleNamespace(
        Encoder=lambda _d, ratios, latent: real.Encoder(enc, ratios, latent),
        Decoder=lambda latent, _c, ratios: real.Decoder(latent, dec, ratios))
    torch.manual_seed(seed)
    try:
        model = hat.HiggsAudioTokenizer(n_filters=32, D=d, bins=1024, device="cpu", **kind)
    finally:
        hat.dac2 = real
    model.eval()
    g = torch.Generator().manual_seed(seed + 1)
    randomise(model, g)
    with torch.no_grad():
        _fill_codebooks(model, g)
    return model


def randomise(model, g: torch.Generator) -> None:
    """Snake alphas U(0.25, 1.75), biases + N(0, 0.02^2), weight-norm gains x U(0.5, 1.5),
    HuBERT's norms + N(0, 0.1^2) (default init leaves them trivial)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("alpha"):
                p.copy_(0.25 + 1.5 * torch.rand(p.shape, generator=g))
            elif name.endswith("bias"):
                p.add_(0.02 * torch.randn(p.shape, generator=g))
            elif name.endswith("weight_g"):
                p.mul_(0.5 + torch.rand(p.shape, generator=g))
            elif "semantic_model" in name and "norm" in name:
                p.add_(0.1 * torch.randn(p.shape, generator=g))


def _fill_codebooks(model, g: torch.Generator) -> None:
    """Each codebook's rows: the residuals it sees for 2 s of noise (projected in), plus
    noise; `inited` set (else Boson runs k-means on the first call)."""
    x = 0.1 * torch.randn(1, 1, 2 * model.sample_rate, generator=g)
    semantic = model.encoder_semantic(model.get_regress_target(x).transpose(1, 2))
    acoustic = model.encoder(x)
    t = min(semantic.shape[-1], acoustic.shape[-1])
    e = model.fc_prior(torch.cat([acoustic[..., :t], semantic[..., :t]], 1).transpose(1, 2))
    residual = e.transpose(1, 2)  # [1, D, T]
    for layer in model.quantizer.vq.layers:
        z = layer.project_in(residual.transpose(1, 2))[0]  # [T, 64]
        book = layer._codebook
        rows = z[torch.randint(0, z.shape[0], (book.embed.shape[0],), generator=g)]
        book.embed.copy_(rows + 0.3 * rows.std() * torch.randn(rows.shape, generator=g))
        book.inited.fill_(1)
        residual = residual - layer.decode(layer.encode(residual))


def codes(model, audio: torch.Tensor) -> torch.Tensor:
    """Boson's codes [B, n_q, T] of audio [B, 1, N] (its _xcodec_encode; B = 1 on its pad
    path, which builds a batch of one)."""
    with torch.inference_mode():
        return model._xcodec_encode(audio).audio_codes


def decode(model, codes: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        return torch.from_numpy(model.decode(codes))


def save_yue(model, spec, folder: Path) -> Path:
    """YuE's xcodec_mini_infer layout: final_ckpt/ckpt_00360000.pth ({"codec_model": the state
    dict}) beside config.yaml (X-Codec's `generator: {name: SoundStream, config: ...}`)."""
    import yaml

    folder.mkdir(parents=True, exist_ok=True)
    config = {"generator": {"name": "SoundStream", "config": {
        "n_filters": 32, "D": spec[2], "target_bandwidths": YUE["target_bandwidths"],
        "ratios": YUE["ratios"], "sample_rate": 16000, "bins": 1024}},
        "d_list": ["mfd"], "sample_rate": 16000}
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    torch.save({"codec_model": model.state_dict(), "step": 360000},
               folder / "ckpt_00360000.pth")
    return folder


def save_boson(model, spec, folder: Path) -> Path:
    """Boson's hub layout: config.json (HiggsAudioTokenizer's arguments) and model.pth."""
    folder.mkdir(parents=True, exist_ok=True)
    config = {"n_filters": 32, "D": spec[2], "codebook_dim": 64,
              "target_bandwidths": [0.5, 1, 1.5, 2, 4], "ratios": [8, 5, 4, 2, 3],
              "sample_rate": 24000, "bins": 1024, "n_q": 8,
              "semantic_techer": "hubert_base_general"}
    (folder / "config.json").write_text(json.dumps(config))
    torch.save(model.state_dict(), folder / "model.pth")
    return folder


# -- transformers' HiggsAudioV2TokenizerModel ----------------------------------------------------

def _hf_module():
    """transformers' modeling module, imported while the real torchaudio is importable (it
    defines the model only where torchaudio is installed); it keeps that torchaudio."""
    from transformers.utils import import_utils

    name = "transformers.models.higgs_audio_v2_tokenizer.modeling_higgs_audio_v2_tokenizer"
    if name in sys.modules and hasattr(sys.modules[name], "_reference_ready"):
        return sys.modules[name]
    stand_in = {k: v for k, v in sys.modules.items() if k.split(".")[0] == "torchaudio"}
    for k in stand_in:
        del sys.modules[k]
    sys.modules.pop(name, None)
    sys.path.insert(0, str(TORCHAUDIO))
    import_utils.is_torchaudio_available.cache_clear()
    try:
        hf = importlib.import_module(name)
    finally:
        sys.path.remove(str(TORCHAUDIO))
        import_utils.is_torchaudio_available.cache_clear()
        for k in [k for k in sys.modules if k.split(".")[0] == "torchaudio"]:
            del sys.modules[k]
        sys.modules.update(stand_in)
    hf._reference_ready = True
    return hf


def hf_model(model, spec):
    """transformers' model holding Boson's weights (its converter's renames, weight norm
    folded), eval mode."""
    boson()
    hf = _hf_module()
    from transformers import DacConfig, HiggsAudioV2TokenizerConfig

    enc, dec, d, *_ = spec
    config = HiggsAudioV2TokenizerConfig(
        target_bandwidths=[0.5, 1, 1.5, 2],
        acoustic_model_config=DacConfig(
            encoder_hidden_size=enc, downsampling_ratios=[8, 5, 4, 2, 3],
            decoder_hidden_size=dec, upsampling_ratios=[8, 5, 4, 2, 3], hidden_size=d),
        semantic_model_config=hubert_config(spec))
    out = hf.HiggsAudioV2TokenizerModel(config).eval()
    missing, unexpected = out.load_state_dict(to_hf(model.state_dict(), 5), strict=False)
    assert not unexpected and all(k.startswith("decoder_semantic.") or k == "fc1.weight" or
                                  k == "fc1.bias" for k in missing), (missing, unexpected)
    return out


def to_hf(sd: dict, strides: int) -> dict:
    """Boson's names -> transformers' (its converter's mapping), weight norm folded but
    HuBERT's (both hold a transformers HubertModel)."""
    import re

    from audiotok.checkpoint import fold_weight_norm

    semantic = {k: v for k, v in sd.items() if k.startswith("semantic_model.")}
    sd = {k: v for k, v in {**fold_weight_norm({k: v for k, v in sd.items()
                                                 if k not in semantic}), **semantic}.items()
          if not k.startswith(("decoder_semantic.", "fc_post1."))
          and k != "semantic_model.masked_spec_embed"}
    out = {}
    for k, v in sd.items():
        n = k
        if m := re.match(r"(encoder\.block|decoder_2\.model)\.(\d+)\.(.*)", k):
            n = _dac_to_hf(m[1].startswith("encoder"), int(m[2]), m[3], strides)
        elif k.startswith("quantizer.vq.layers."):
            n = k.replace("quantizer.vq.layers.", "quantizer.quantizers.").replace(
                "._codebook.", ".codebook.")
        elif k.startswith("fc_prior."):
            n = "fc." + k[len("fc_prior."):]
        elif k.startswith("fc_post2."):
            n = "fc2." + k[len("fc_post2."):]
        elif k.startswith("encoder_semantic."):
            n = k.replace(".conv.conv.", ".conv.").replace("conv1.conv.", "conv1.")
        out[n] = v
    return out


def _dac_to_hf(encoder: bool, i: int, rest: str, strides: int) -> str:
    """The dac package's name of layer i of the encoder (`block.i`) or decoder (`model.i`) ->
    transformers' (its converter's mapping)."""
    import re

    unit = {"0": "snake1", "1": "conv1", "2": "snake2", "3": "conv2"}
    root = "acoustic_encoder" if encoder else "acoustic_decoder"
    ends = {0: "conv1", strides + 1: "snake1", strides + 2: "conv2"}
    if i in ends:
        return f"{root}.{ends[i]}.{rest}"
    first = 0 if encoder else 2  # (the decoder's units follow its snake and transposed conv)
    if r := re.match(rf"block\.([{first}-{first + 2}])\.block\.([0-3])\.(.*)", rest):
        return f"{root}.block.{i - 1}.res_unit{int(r[1]) - first + 1}.{unit[r[2]]}.{r[3]}"
    own = {"3": "snake1", "4": "conv1"} if encoder else {"0": "snake1", "1": "conv_t1"}
    r = re.match(r"block\.(\d)\.(.*)", rest)
    return f"{root}.block.{i - 1}.{own[r[1]]}.{r[2]}"


def save_hf(model, spec, folder: Path) -> Path:
    """transformers' layout: its config.json and model.safetensors."""
    from safetensors.torch import save_file

    ours = hf_model(model, spec)
    folder.mkdir(parents=True, exist_ok=True)
    ours.config.to_json_file(str(folder / "config.json"))
    save_file({k: v.contiguous() for k, v in ours.state_dict().items()},
              str(folder / "model.safetensors"))
    return folder


def hf_codes(model, audio: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        return model.encode(audio, return_dict=False)


def hf_decode(model, codes: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        return model.decode(codes, return_dict=False)


def xcodec_v1(semantic_config, g: torch.Generator):
    """transformers' XcodecModel at X-Codec v1's 16 kHz settings, small (acoustic 8 / 64 wide),
    with `semantic_config` (a HubertConfig or WavLMConfig) as its teacher, randomised from `g`
    and its codebooks filled; eval mode."""
    from transformers import XcodecConfig, XcodecModel

    torch.manual_seed(0)
    config = XcodecConfig(
        target_bandwidths=[0.5, 1, 1.5, 2, 4], sample_rate=16000, codebook_size=1024,
        acoustic_model_config=dict(encoder_hidden_size=8, decoder_hidden_size=64,
                                   downsampling_ratios=[8, 5, 4, 2],
                                   upsampling_ratios=[8, 5, 4, 2], sampling_rate=16000,
                                   hidden_size=16),
        semantic_model_config=semantic_config)
    model = XcodecModel(config).eval()
    randomise(model, g)
    with torch.no_grad():
        for name, b in model.named_buffers():
            if name.endswith("codebook.embed"):
                b.copy_(0.3 * torch.randn(b.shape, generator=g))
    return model
