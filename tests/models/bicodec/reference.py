"""BiCodec's reference for parity tests: Spark-TTS's code as spark-tts-lib 0.2.1 ships it (in
.refs/spark: tests/install_references.sh), on random weights, saved as Spark's model folder
(BiCodec/model.safetensors + config.yaml, config.yaml, wav2vec2-large-xlsr-53/), with its
tokenizer (BiCodecTokenizer) around a small wav2vec2 of XLSR-53's layout.

The package's __init__ imports its TTS pipeline and the hub downloader: its modules are
imported without it. They import torchaudio: the real one (pure Python, from .refs/spark)
while they import and build, the suite's stand-in otherwise.

Random weights are filled so that no path is trivial: biases, Snake alphas, the AdaLayerNorms'
scales and shifts and the codebook random; the ECAPA's batch norms take their statistics from
a calibration clip (with the default 0/1 statistics the 32 global tokens ignore the input); the
speaker FSQ's input projection is widened so that its codes vary.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[3]
REFS = Path(os.environ.get("AUDIOTOK_SPARK_REF", ROOT / ".refs" / "spark"))

MEL = dict(sample_rate=16000, n_fft=1024, win_length=640, hop_length=320, mel_fmin=10,
           mel_fmax=None, num_mels=128)
FULL = dict(
    encoder=dict(input_channels=1024, vocos_dim=384, vocos_intermediate_dim=2048,
                 vocos_num_layers=12, out_channels=1024, sample_ratios=[1, 1]),
    quantizer=dict(input_dim=1024, codebook_size=8192, codebook_dim=8, commitment=0.25,
                   codebook_loss_weight=2.0, use_l2_normlize=True, threshold_ema_dead_code=0.2),
    speaker_encoder=dict(input_dim=128, out_dim=1024, latent_dim=128, token_num=32,
                         fsq_levels=[4, 4, 4, 4, 4, 4], fsq_num_quantizers=1),
    prenet=dict(input_channels=1024, vocos_dim=384, vocos_intermediate_dim=2048,
                vocos_num_layers=12, out_channels=1024, condition_dim=1024,
                sample_ratios=[1, 1], use_tanh_at_final=False),
    postnet=dict(input_channels=1024, vocos_dim=384, vocos_intermediate_dim=2048,
                 vocos_num_layers=6, out_channels=1024, use_tanh_at_final=False),
    decoder=dict(input_channel=1024, channels=1536, rates=[8, 5, 4, 2],
                 kernel_sizes=[16, 11, 8, 4]),
    wav2vec2=dict(hidden_size=1024, num_attention_heads=16, intermediate_size=256,
                  conv_dim=(32,) * 7),
)
TINY = dict(
    encoder=dict(input_channels=64, vocos_dim=32, vocos_intermediate_dim=64,
                 vocos_num_layers=2, out_channels=48, sample_ratios=[1, 1]),
    quantizer=dict(FULL["quantizer"], input_dim=48),
    speaker_encoder=dict(input_dim=128, out_dim=48, latent_dim=16, token_num=32,
                         fsq_levels=[4, 4, 4, 4, 4, 4], fsq_num_quantizers=1),
    prenet=dict(input_channels=48, vocos_dim=32, vocos_intermediate_dim=64, vocos_num_layers=2,
                out_channels=48, condition_dim=48, sample_ratios=[1, 1]),
    postnet=dict(input_channels=48, vocos_dim=32, vocos_intermediate_dim=64,
                 vocos_num_layers=1, out_channels=48),
    decoder=dict(input_channel=48, channels=64, rates=[8, 5, 4, 2], kernel_sizes=[16, 11, 8, 4]),
    wav2vec2=dict(hidden_size=64, num_attention_heads=4, intermediate_size=128,
                  conv_dim=(16,) * 7),
)
# the released sizes with XLSR-53's own (24 layers, 315 M parameters: the benchmarks')
RELEASED = dict(FULL, wav2vec2=dict(hidden_size=1024, num_attention_heads=16,
                                    intermediate_size=4096, conv_dim=(512,) * 7, layers=24))
TOP = {"sample_rate": 16000, "ref_segment_duration": 6, "latent_hop_length": 320,
       "volume_normalize": True, "highpass_cutoff_freq": 40}

_spark: dict | None = None


@contextlib.contextmanager
def real_torchaudio():
    """The real torchaudio (from .refs/spark) as `torchaudio` while inside; the suite's
    stand-in (if any) back after."""
    saved = {k: v for k, v in sys.modules.items() if k.split(".")[0] == "torchaudio"}
    for k in saved:
        del sys.modules[k]
    sys.path.insert(0, str(REFS))
    try:
        import torchaudio  # noqa: F401
        yield
    finally:
        sys.path.remove(str(REFS))
        for k in [k for k in sys.modules if k.split(".")[0] == "torchaudio"]:
            del sys.modules[k]
        sys.modules.update(saved)


def spark() -> dict:
    """Spark's modules (imported once): BiCodec and its parts, the tokenizer; skip when the
    oracle is not installed."""
    global _spark
    if _spark is not None:
        return _spark
    if not (REFS / "spark_tts_lib").is_dir() or not (REFS / "torchaudio").is_dir():
        pytest.skip(f"the BiCodec oracle is not installed in {REFS} (tests/install_references.sh)")
    package = types.ModuleType("spark_tts_lib")  # (its __init__ imports the TTS pipeline)
    package.__path__ = [str(REFS / "spark_tts_lib")]
    sys.modules["spark_tts_lib"] = package
    with real_torchaudio():
        sys.path.append(str(REFS))  # (einx, omegaconf, retrying: after the suite's own)
        names = {"bicodec": "spark_tts_lib.models.bicodec",
                 "tokenizer": "spark_tts_lib.models.audio_tokenizer",
                 "encoder": "spark_tts_lib.modules.encoder_decoder.feat_encoder",
                 "decoder": "spark_tts_lib.modules.encoder_decoder.feat_decoder",
                 "wave": "spark_tts_lib.modules.encoder_decoder.wave_generator",
                 "speaker": "spark_tts_lib.modules.speaker.speaker_encoder",
                 "vq": "spark_tts_lib.modules.vq.factorized_vector_quantize",
                 "audio": "spark_tts_lib.utils.audio",
                 "parser": "spark_tts_lib.utils.token_parser"}
        _spark = {k: importlib.import_module(v) for k, v in names.items()}
    return _spark


def build(spec: dict, seed: int = 0):
    """Spark's BiCodec of `spec` (FULL or TINY) on random weights (see the module docstring),
    eval mode."""
    s = spark()
    torch.manual_seed(seed)
    with real_torchaudio():
        model = s["bicodec"].BiCodec(
            MEL, s["encoder"].Encoder(**spec["encoder"]),
            s["wave"].WaveGenerator(**spec["decoder"]),
            s["vq"].FactorizedVectorQuantize(**spec["quantizer"]),
            s["speaker"].SpeakerEncoder(**spec["speaker_encoder"]),
            s["decoder"].Decoder(**spec["prenet"]), s["decoder"].Decoder(**spec["postnet"]))
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".alpha"):
                p.copy_(0.5 + torch.rand(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.05 * torch.randn(p.shape, generator=g))
            elif ".scale.weight" in name or ".shift.weight" in name:
                p.add_(0.05 * torch.randn(p.shape, generator=g))
            elif name.endswith("codebook.weight"):
                p.copy_(torch.randn(p.shape, generator=g))
        model.speaker_encoder.quantizer.project_in.weight.mul_(8)
    calibrate(model, torch.Generator().manual_seed(seed + 2))
    return model.eval()


def calibrate(model, g: torch.Generator) -> None:
    """The ECAPA's batch-norm statistics from the mel of a calibration clip (noise)."""
    ecapa = model.speaker_encoder.speaker_encoder
    bns = [m for m in ecapa.modules() if isinstance(m, torch.nn.BatchNorm1d)]
    clip = 0.3 * torch.randn(2, 96000, generator=g)
    for bn in bns:
        bn.momentum = 1.0
    ecapa.train()
    with torch.no_grad():
        ecapa(model.mel_transformer(clip).transpose(1, 2), True)
    ecapa.eval()
    for bn in bns:
        bn.momentum = 0.1


def wav2vec2(spec: dict, seed: int = 0):
    """A Wav2Vec2Model of XLSR-53's layout (by default 17 layers: the features read layers 11,
    14, 16) on random weights."""
    from transformers import Wav2Vec2Config, Wav2Vec2Model

    w = spec["wav2vec2"]
    pos = (128, 16) if w["hidden_size"] >= 1024 else (16, 4)
    cfg = Wav2Vec2Config(hidden_size=w["hidden_size"], num_attention_heads=w["num_attention_heads"],
                         intermediate_size=w["intermediate_size"], conv_dim=w["conv_dim"],
                         num_hidden_layers=w.get("layers", 17), do_stable_layer_norm=True,
                         feat_extract_norm="layer", conv_bias=True,
                         num_conv_pos_embeddings=pos[0], num_conv_pos_embedding_groups=pos[1],
                         mask_time_prob=0.0)
    torch.manual_seed(seed + 3)
    model = Wav2Vec2Model(cfg).eval()
    g = torch.Generator().manual_seed(seed + 4)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") or "layer_norm.weight" in name:
                p.add_(0.1 * torch.randn(p.shape, generator=g))
    model.config.output_hidden_states = True
    return model


def save_folder(model, w2v, spec: dict, folder: Path, old_weight_norm: bool = True) -> Path:
    """Spark's model folder; old_weight_norm: the weight norms as weight_g / weight_v (the
    released file's spelling), else as spark-tts-lib's parametrizations."""
    import yaml
    from safetensors.torch import save_file

    from tests.helpers import respell_weight_norm

    (folder / "BiCodec").mkdir(parents=True, exist_ok=True)
    sd = {k: v.contiguous() for k, v in model.state_dict().items()}
    if old_weight_norm:
        sd = respell_weight_norm(sd, "legacy")
    save_file(sd, str(folder / "BiCodec" / "model.safetensors"))
    codec = {k: v for k, v in spec.items() if k != "wav2vec2"}
    (folder / "BiCodec" / "config.yaml").write_text(
        yaml.safe_dump({"audio_tokenizer": {"mel_params": MEL, **codec}}))
    (folder / "config.yaml").write_text(yaml.safe_dump(TOP))
    w2v.save_pretrained(folder / "wav2vec2-large-xlsr-53")
    return folder


def tokenizer(model, w2v):
    """Spark's BiCodecTokenizer around `model` and `w2v` (what its constructor loads from the
    model folder)."""
    from transformers import Wav2Vec2FeatureExtractor

    tok = spark()["tokenizer"].BiCodecTokenizer.__new__(spark()["tokenizer"].BiCodecTokenizer)
    tok.device, tok.config, tok.model = torch.device("cpu"), dict(TOP), model
    tok.processor = Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=16000,
                                             padding_value=0.0, do_normalize=True,
                                             return_attention_mask=True)
    tok.feature_extractor = w2v
    return tok


def tokenize(tok, path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(global tokens [32], semantic tokens [T]) Spark's tokenizer gives for an audio file."""
    with torch.no_grad():
        global_tokens, semantic = tok.tokenize(str(path))
    return global_tokens.reshape(-1).numpy(), semantic.reshape(-1).numpy()


def tokenize_array(tok, audio: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """(global tokens [1, 1, 32], semantic tokens [1, T]) of 16 kHz audio [N], as
    BiCodecTokenizer.tokenize runs on a file's samples (process_audio without the reading)."""
    wav = np.asarray(audio, dtype=np.float64)
    if tok.config["volume_normalize"]:
        wav = spark()["audio"].audio_volume_normalize(wav)
    ref = torch.from_numpy(tok.get_ref_clip(wav)).unsqueeze(0).float()
    with torch.no_grad():
        feat = tok.extract_wav2vec2_features(wav)
        semantic, global_tokens = tok.model.tokenize({"feat": feat, "ref_wav": ref})
    return global_tokens, semantic


def detokenize(model, global_tokens, semantic) -> np.ndarray:
    """Audio [320 T] of BiCodec.detokenize for one item's tokens."""
    with torch.no_grad():
        audio = model.detokenize(torch.as_tensor(semantic).reshape(1, -1),
                                 torch.as_tensor(global_tokens).reshape(1, 1, -1))
    return audio.reshape(-1).numpy()
