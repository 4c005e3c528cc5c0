"""Reference implementations to compare against, loaded with the same weights as ours.

fish-speech (S2): the PyPI package `fish-speech==0.1.0` holds the reference modded DAC, which
imports pieces of descript-audio-codec and descript-audiotools; audiotools imports torchaudio,
which does not load with every torch. Install the two code packages without dependencies:

    pip install --no-deps fish-speech==0.1.0 descript-audio-codec==1.0.0 && pip install einops

and this module puts stand-ins for the unused imports (audiotools, argbind, librosa, hydra,
omegaconf) into sys.modules before importing them. Only benchmarks and parity checks use this;
the library never imports it.

transformers (X-Codec2): `Xcodec2Model` (the `test` extra).
"""

from __future__ import annotations

import functools
import sys
import types

import torch
from torch import nn


class _Anything:
    """Stands for any class, decorator or value a stub module is asked for."""

    INTERN: list = []
    EXTERN: list = []

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]  # used as a decorator
        return _Anything()

    def __getattr__(self, name):
        return _Anything()


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = _BaseModel if name == "BaseModel" else _Anything
        setattr(self, name, value)
        return value


class _BaseModel(nn.Module):
    INTERN: list = []
    EXTERN: list = []


def _install_stubs() -> None:
    for name in ("audiotools", "audiotools.ml", "argbind", "librosa", "hydra", "omegaconf"):
        if name not in sys.modules:
            sys.modules[name] = _StubModule(name)
    sys.modules["audiotools"].ml = sys.modules["audiotools.ml"]


def fish_speech_s2(config, state_dict: dict[str, torch.Tensor]) -> nn.Module:
    """fish-speech's DAC built as its modded_dac_vq.yaml builds it, for `config` (an S2Config),
    with the weights of `state_dict` (our canonical dict) loaded in the released layout."""
    _install_stubs()
    from dac.model.base import CodecMixin
    from fish_speech.models.dac import modded_dac, rvq

    from audiotok.models.s2.weights import to_fish_speech

    CodecMixin.get_delay = lambda self: 0  # inference only; the original walks the layers
    r = config.rvq_transformer
    general = functools.partial(
        modded_dac.ModelArgs, block_size=16384, n_local_heads=-1,
        head_dim=config.transformer_head_dim, rope_base=config.rope_base,
        norm_eps=config.norm_eps, dropout_rate=0.1, attn_dropout_rate=0.1, channels_first=True)

    def rvq_transformer():
        return modded_dac.WindowLimitedTransformer(
            causal=True, window_size=r.window_size, input_dim=r.dim,
            config=modded_dac.ModelArgs(
                block_size=4096, n_layer=r.n_layer, n_head=r.n_head, dim=r.dim,
                intermediate_size=r.intermediate_size, n_local_heads=r.n_local_heads,
                head_dim=r.head_dim, rope_base=r.rope_base, norm_eps=r.norm_eps,
                dropout_rate=0.1, attn_dropout_rate=0.1, channels_first=True))

    quantizer = rvq.DownsampleResidualVectorQuantize(
        input_dim=config.quantizer_input_dim, n_codebooks=config.residual_codebooks,
        codebook_size=config.residual_codebook_size, codebook_dim=config.codebook_dim,
        quantizer_dropout=0.5, downsample_factor=list(config.quantizer_downsample_factor),
        semantic_codebook_size=config.semantic_codebook_size,
        pre_module=rvq_transformer(), post_module=rvq_transformer())
    model = modded_dac.DAC(
        encoder_dim=config.encoder_dim, encoder_rates=list(config.encoder_rates),
        latent_dim=config.latent_dim, decoder_dim=config.decoder_dim,
        decoder_rates=list(config.decoder_rates), quantizer=quantizer,
        sample_rate=config.sample_rate, causal=True,
        encoder_transformer_layers=list(config.encoder_transformer_layers),
        decoder_transformer_layers=[0] * len(config.decoder_rates),
        transformer_general_config=general)
    missing, unexpected = model.load_state_dict(to_fish_speech(state_dict), strict=False)
    missing = [k for k in missing if not k.endswith(("freqs_cis", "causal_mask"))]
    if missing or unexpected:
        raise RuntimeError(f"reference model does not fit: missing {missing[:3]}, unexpected "
                           f"{unexpected[:3]}")
    return model.eval()


def transformers_xcodec2(directory) -> nn.Module:
    from transformers import Xcodec2Model

    return Xcodec2Model.from_pretrained(directory).eval()


def seamless_features(waves, hop: int = 320):
    """The original X-Codec2 feature pipeline (numpy SeamlessM4T extractor) for 1-D waves."""
    import numpy as np
    from transformers import SeamlessM4TFeatureExtractor

    fe = SeamlessM4TFeatureExtractor(feature_size=80, num_mel_bins=80, padding_value=1.0,
                                     stride=2)
    padded = [np.pad(w, (hop // 2, hop - w.size % hop + hop // 2)) for w in waves]
    return fe(padded, sampling_rate=16000, return_tensors="pt")["input_features"]
