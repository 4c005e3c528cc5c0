"""The S3 token-to-audio oracles: Chatterbox's S3Gen (chatterbox-tts 0.1.7) and CosyVoice 2's
flow and HiFT (cosyvoice-minicpmo 0.1.0, CosyVoice's own code), from .refs/s3gen (see
tests/install_references.sh), imported without their packages' heavy imports: module stubs
for chatterbox's and cosyvoice's top packages, onnxruntime, cosyvoice's LLM module and
matcha's logger (what the spec's parity recipe lists).

Models on random weights, small (the encoder keeps its 512 channels; heads 64 wide) or at the
released sizes. Biases, norms and position biases get random offsets so that no path is
trivial; random weights give F0 ~ 0 Hz (everything unvoiced), so `f0_bias` sets the F0
classifier's bias (150: all voiced; 9.955: frames either side of the 10 Hz threshold)."""

from __future__ import annotations

import importlib
import importlib.machinery
import logging
import os
import sys
import types
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[3]
REFS = Path(os.environ.get("AUDIOTOK_S3GEN_REF", ROOT / ".refs" / "s3gen"))


def _stub(name: str, path: Path | None = None, **attrs):
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None)
    if path is not None:
        module.__path__ = [str(path)]
    for k, v in attrs.items():
        setattr(module, k, v)
    sys.modules[name] = module


MODULES = ("chatterbox.models.s3gen", "cosyvoice.flow.flow", "cosyvoice.flow.flow_matching",
           "cosyvoice.flow.decoder", "cosyvoice.transformer.upsample_encoder",
           "cosyvoice.hifigan.generator", "cosyvoice.hifigan.f0_predictor",
           "cosyvoice.cli.frontend")


def load_references():
    """Import the oracles (once); skip when they are not installed. Chatterbox's modules import
    torchaudio: the real one from .refs/s3gen (its Kaldi filterbank is CAMPPlus's front end),
    while the suite's torchaudio stand-in (tests/models/dac/stand_ins) stays what every other
    import gets."""
    if not (REFS / "chatterbox").is_dir() or not (REFS / "cosyvoice").is_dir():
        pytest.skip(f"the S3 token-to-audio oracles are not installed in {REFS} "
                    "(tests/install_references.sh)")
    if "chatterbox.models.s3gen.xvector" in sys.modules:
        return
    _stub("chatterbox", REFS / "chatterbox")
    _stub("chatterbox.models", REFS / "chatterbox" / "models")
    if "onnxruntime" not in sys.modules:  # (cosyvoice imports it; only its TRT paths use it)
        try:
            import onnxruntime  # noqa: F401
        except ImportError:
            _stub("onnxruntime")
    _stub("cosyvoice.llm.llm", **{n: type(n, (), {}) for n in
                                  ("TransformerLM", "Qwen2LM", "CosyVoice3LM")})
    for name in ("whisper", "inflect"):  # (the front end's text side, not used here)
        if name not in sys.modules:
            _stub(name)
    _stub("matcha.utils", REFS / "matcha" / "utils")
    _stub("matcha.utils.pylogger", get_pylogger=lambda name=__name__: logging.getLogger(name))
    stand_in = {k: v for k, v in sys.modules.items() if k.split(".")[0] == "torchaudio"}
    for k in stand_in:
        del sys.modules[k]
    sys.path.insert(0, str(REFS))
    try:
        for name in MODULES:
            importlib.import_module(name)
    finally:
        sys.path.remove(str(REFS))
        sys.path.append(str(REFS))  # (after the suite's own packages)
        for k in [k for k in sys.modules if k.split(".")[0] == "torchaudio"]:
            del sys.modules[k]
        sys.modules.update(stand_in)


def _offsets(model: torch.nn.Module, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "bias" in name or "norm" in name or "pos_bias" in name:
                p.add_(0.1 * torch.randn(p.shape, generator=g))


def _sizes(small: bool) -> dict:
    return dict(heads=2 if small else 8, units=256 if small else 2048, blocks=1 if small else 6,
                channels=64 if small else 256, n_blocks=1 if small else 4,
                mid=2 if small else 12, unet_heads=2 if small else 8)


def _encoder(cls, small: bool, **extra):
    s = _sizes(small)
    return cls(output_size=512, attention_heads=s["heads"], linear_units=s["units"],
               num_blocks=s["blocks"], dropout_rate=0.1, positional_dropout_rate=0.1,
               attention_dropout_rate=0.1, normalize_before=True, input_layer="linear",
               pos_enc_layer_type="rel_pos_espnet", selfattention_layer_type="rel_selfattn",
               input_size=512, use_cnn_module=False, macaron_style=False, **extra)


def chatterbox_flow(small: bool = True, seed: int = 0):
    load_references()
    from chatterbox.models.s3gen.configs import CFM_PARAMS
    from chatterbox.models.s3gen.decoder import ConditionalDecoder
    from chatterbox.models.s3gen.flow import CausalMaskedDiffWithXvec
    from chatterbox.models.s3gen.flow_matching import CausalConditionalCFM
    from chatterbox.models.s3gen.transformer.upsample_encoder import UpsampleConformerEncoder

    s = _sizes(small)
    torch.manual_seed(seed)
    estimator = ConditionalDecoder(in_channels=320, out_channels=80, causal=True,
                                   channels=[s["channels"]], dropout=0.0, attention_head_dim=64,
                                   n_blocks=s["n_blocks"], num_mid_blocks=s["mid"],
                                   num_heads=s["unet_heads"], act_fn="gelu")
    flow = CausalMaskedDiffWithXvec(
        encoder=_encoder(UpsampleConformerEncoder, small),
        decoder=CausalConditionalCFM(spk_emb_dim=80, cfm_params=CFM_PARAMS, estimator=estimator))
    _offsets(flow, seed + 1)
    return flow.eval()


def cosyvoice_flow(small: bool = True, seed: int = 0):
    load_references()
    from cosyvoice.flow.decoder import CausalConditionalDecoder
    from cosyvoice.flow.flow import CausalMaskedDiffWithXvec
    from cosyvoice.flow.flow_matching import CausalConditionalCFM
    from cosyvoice.transformer.upsample_encoder import UpsampleConformerEncoder
    from omegaconf import DictConfig

    s = _sizes(small)
    torch.manual_seed(seed)
    estimator = CausalConditionalDecoder(
        in_channels=320, out_channels=80, channels=[s["channels"]], dropout=0.0,
        attention_head_dim=64, n_blocks=s["n_blocks"], num_mid_blocks=s["mid"],
        num_heads=s["unet_heads"], act_fn="gelu", static_chunk_size=50,
        num_decoding_left_chunks=-1)
    cfm = CausalConditionalCFM(  # (its constructor seeds every generator with 0)
        in_channels=240, n_spks=1, spk_emb_dim=80, estimator=estimator,
        cfm_params=DictConfig({"sigma_min": 1e-06, "solver": "euler", "t_scheduler": "cosine",
                               "training_cfg_rate": 0.2, "inference_cfg_rate": 0.7,
                               "reg_loss_type": "l1"}))
    torch.manual_seed(seed)
    flow = CausalMaskedDiffWithXvec(
        input_size=512, output_size=80, spk_embed_dim=192, output_type="mel", vocab_size=6561,
        input_frame_rate=25, only_mask_loss=True, token_mel_ratio=2, pre_lookahead_len=3,
        encoder=_encoder(UpsampleConformerEncoder, small, static_chunk_size=25), decoder=cfm)
    _offsets(flow, seed + 1)
    return flow.eval()


def _hift(generator_cls, predictor_cls, small: bool, f0_bias: float | None, seed: int):
    torch.manual_seed(seed)
    c = 64 if small else 512
    hift = generator_cls(sampling_rate=24000, base_channels=c, upsample_rates=[8, 5, 3],
                         upsample_kernel_sizes=[16, 11, 7],
                         source_resblock_kernel_sizes=[7, 7, 11],
                         source_resblock_dilation_sizes=[[1, 3, 5]] * 3,
                         f0_predictor=predictor_cls(cond_channels=c))
    _offsets(hift, seed + 1)
    if f0_bias is not None:
        with torch.no_grad():
            hift.f0_predictor.classifier.bias.fill_(f0_bias)
    return hift.eval()


def chatterbox_hift(small: bool = True, f0_bias: float | None = 150.0, seed: int = 0):
    """Chatterbox's HiFT (SineGen)."""
    load_references()
    from chatterbox.models.s3gen.f0_predictor import ConvRNNF0Predictor
    from chatterbox.models.s3gen.hifigan import HiFTGenerator

    return _hift(HiFTGenerator, ConvRNNF0Predictor, small, f0_bias, seed)


def cosyvoice_hift(small: bool = True, f0_bias: float | None = 150.0, seed: int = 0):
    """CosyVoice 2's HiFT (SineGen2 at 24 kHz)."""
    load_references()
    from cosyvoice.hifigan.f0_predictor import ConvRNNF0Predictor
    from cosyvoice.hifigan.generator import HiFTGenerator

    return _hift(HiFTGenerator, ConvRNNF0Predictor, small, f0_bias, seed)


def campplus(seed: int = 0):
    """Chatterbox's CAMPPlus with random weights and BatchNorm statistics."""
    load_references()
    from chatterbox.models.s3gen.xvector import CAMPPlus

    torch.manual_seed(seed)
    model = CAMPPlus(memory_efficient=False)
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, b in model.named_buffers():
            if name.endswith("running_mean"):
                b.copy_(0.1 * torch.randn(b.shape, generator=g))
            elif name.endswith("running_var"):
                b.copy_(0.5 + torch.rand(b.shape, generator=g))
    _offsets(model, seed + 2)
    return model.eval()


def campplus_onnx(path: Path, seed: int = 0):
    """campplus(seed) saved at `path` as 3D-Speaker exports CAMPPlus, the graph CosyVoice 2
    ships as campplus.onnx (the TorchScript exporter, opset 11, constants folded: BatchNorms
    after a convolution folded into it, the others kept; features [batch, frames, 80] in);
    the torch model."""
    import warnings

    model = campplus(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.randn(1, 345, 80),), str(path), export_params=True,
                          opset_version=11, do_constant_folding=True, input_names=["feature"],
                          output_names=["embedding"], dynamo=False,
                          dynamic_axes={"feature": {0: "batch_size", 1: "frame_num"},
                                        "embedding": {0: "batch_size"}})
    return model


def cosyvoice_speaker_embedding(campplus_path: Path, speech: torch.Tensor) -> torch.Tensor:
    """CosyVoice 2's front end's speaker embedding [1, 192] of 16 kHz speech [1, N]
    (CosyVoiceFrontEnd._extract_spk_embedding, its sessions opened by its constructor; the
    tokenizer's session, unused here, on the same graph)."""
    load_references()
    from cosyvoice.cli.frontend import CosyVoiceFrontEnd

    frontend = CosyVoiceFrontEnd(lambda: None, None, str(campplus_path), str(campplus_path))
    return frontend._extract_spk_embedding(speech)


def chatterbox_s3gen(small: bool = True, f0_bias: float | None = 150.0):
    """Chatterbox's S3Token2Wav with the modules above (its own inference path: flow, HiFT,
    the 40 ms fade-in); its tokenizer is left out (the S3 tests cover it)."""
    load_references()
    from chatterbox.models.s3gen.s3gen import S3Token2Wav

    model = S3Token2Wav.__new__(S3Token2Wav)  # (its constructor builds the released sizes)
    torch.nn.Module.__init__(model)
    model.flow = chatterbox_flow(small)
    model.mel2wav = chatterbox_hift(small, f0_bias)
    model.speaker_encoder = campplus()
    model.meanflow = False
    model.tokenizer = torch.nn.Linear(1, 1)  # (S3Token2Wav reads its device from it)
    half = 24000 // 50
    fade = torch.zeros(2 * half)
    fade[half:] = (torch.cos(torch.linspace(torch.pi, 0, half)) + 1) / 2
    model.register_buffer("trim_fade", fade, persistent=False)
    return model.eval()


def audiotok_token2wav(flow, hift):
    """audiotok's Token2Wav holding CosyVoice 2's flow and HiFT weights (their own names, as
    flow.pt and hift.pt hold them), eval mode."""
    from audiotok.models.s3.token2wav.config import COSYVOICE2
    from audiotok.models.s3.token2wav.model import Token2Wav
    from audiotok.models.s3.token2wav.weights import combine

    sd, cfg = combine(flow.state_dict(), hift.state_dict(), None, COSYVOICE2, "reference")
    model = Token2Wav(cfg).eval()
    model.load_state_dict({k.removeprefix("token2wav."): v for k, v in sd.items()}, strict=True)
    return model
