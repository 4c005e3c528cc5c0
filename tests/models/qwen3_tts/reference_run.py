"""The Qwen3-TTS 12 Hz tokenizer of qwen-tts 0.1.1 (its transformers 4.57.3 beside the suite's
newer one: run with PYTHONPATH=<.refs/qwen-tts>), random weights, saved as the hub lays it out
(config.json + model.safetensors), with its codes and audio for the inputs given.

    python reference_run.py OUT small|full SEED INPUTS.npz
    python reference_run.py serve MODEL THREADS INPUTS.npz OUT.npz   (see serve())

INPUTS.npz: `audio_<n>` items (float32 [n]) encoded one by one (their codes, and their encoder
latents before quantisation), `batch_<i>` encoded as one
right-padded batch; `codes_<name>` ([T, 16] int64) decoded as they are, one by one, through the
model's own decode (chunked_decode, chunk 300, left context 25); `onepass_<name>` through one
decoder pass. Writes OUT/model/ and OUT/results.npz.

Random weights follow specs/neucodec_qwen3.md B7: default init leaves every encoder code 0 and
layer scales and ConvNeXt gammas make the signal path tiny, so the scales are raised, SnakeBeta
parameters, biases and codebooks randomised (codebooks at the scale of the projected latent).
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

import numpy as np
import torch


def _import_tokenizer():
    """The 12 Hz tokenizer's modules alone (qwen_tts/__init__ imports the TTS model and the
    25 Hz tokenizer, which need sox and more)."""
    import transformers

    assert transformers.__version__ == "4.57.3", transformers.__version__
    root = next(Path(p) / "qwen_tts" for p in sys.path if (Path(p) / "qwen_tts").is_dir())
    for name, path in (("qwen_tts", root), ("qwen_tts.core", root / "core")):
        module = types.ModuleType(name)
        module.__path__ = [str(path)]
        sys.modules[name] = module
    from qwen_tts.core.tokenizer_12hz import configuration_qwen3_tts_tokenizer_v2 as c
    from qwen_tts.core.tokenizer_12hz import modeling_qwen3_tts_tokenizer_v2 as m

    return c.Qwen3TTSTokenizerV2Config, m.Qwen3TTSTokenizerV2Model


SMALL_ENCODER = {"num_filters": 8, "hidden_size": 32, "num_hidden_layers": 1,
                 "num_attention_heads": 2, "num_key_value_heads": 2, "head_dim": 16,
                 "intermediate_size": 64, "codebook_dim": 16,
                 "vector_quantization_hidden_dimension": 16, "upsample_groups": 32}
SMALL_DECODER = {"hidden_size": 32, "latent_dim": 64, "decoder_dim": 96, "codebook_dim": 32,
                 "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2,
                 "head_dim": 16, "intermediate_size": 64}
# the released speech_tokenizer/config.json's decoder (specs/neucodec_qwen3.md B1)
FULL_DECODER = {"codebook_size": 2048, "codebook_dim": 512, "latent_dim": 1024,
                "hidden_size": 512, "num_attention_heads": 16, "num_key_value_heads": 16,
                "head_dim": 64, "intermediate_size": 1024, "hidden_act": "silu",
                "num_hidden_layers": 8, "rms_norm_eps": 1e-5, "layer_scale_initial_scale": 0.01,
                "rope_theta": 10000.0, "max_position_embeddings": 8000, "sliding_window": 72,
                "num_quantizers": 16, "decoder_dim": 1536, "upsample_rates": [8, 5, 4, 3],
                "upsampling_ratios": [2, 2], "attention_bias": False}


def build(size: str, seed: int):
    Config, Model = _import_tokenizer()
    decoder = dict(FULL_DECODER)
    encoder = {}
    if size == "small":
        encoder, decoder = SMALL_ENCODER, {**decoder, **SMALL_DECODER}
    config = Config(encoder_config=encoder, decoder_config=decoder)
    config.encoder_config._attn_implementation = "sdpa"
    config.decoder_config._attn_implementation = "sdpa"
    torch.manual_seed(seed)
    model = Model(config).eval()
    randomise(model, seed)
    return model


@torch.no_grad()
def randomise(model, seed: int) -> None:
    g = torch.Generator().manual_seed(seed + 1)

    def rand(shape, lo, hi):
        return lo + (hi - lo) * torch.rand(shape, generator=g)

    for name, p in model.named_parameters():
        if name.endswith("layer_scale.scale"):
            p.copy_(rand(p.shape, 0.3, 0.5))
        elif name.endswith(".gamma"):  # ConvNeXt
            p.copy_(rand(p.shape, 0.3, 0.5))
        elif name.endswith((".alpha", ".beta")):  # SnakeBeta, log scale
            p.copy_(rand(p.shape, -0.5, 0.5))
        elif name.endswith(".bias"):
            p.copy_(0.05 * torch.randn(p.shape, generator=g))
        elif "embedding_sum" in name:
            p.copy_(torch.randn(p.shape, generator=g))
        elif "cluster_usage" in name:
            p.copy_(rand(p.shape, 0.5, 1.5))
    mimi = model.encoder
    latent = encoder_latent(mimi, torch.randn(1, 1, 1920 * 8, generator=g) * 0.1)
    q = mimi.quantizer
    for rvq in (q.semantic_residual_vector_quantizer, q.acoustic_residual_vector_quantizer):
        scale = rvq.input_proj(latent).std().item() if rvq.input_proj is not None else \
            latent.std().item()
        for layer in rvq.layers:
            cb = layer.codebook
            cb.initialized.fill_(1)
            cb.cluster_usage.copy_(rand(cb.cluster_usage.shape, 0.5, 1.5))
            cb.embed_sum.copy_(scale * torch.randn(cb.embed_sum.shape, generator=g)
                               * cb.cluster_usage[:, None])
            cb._embed = None  # (the folded codebook, cached on first use)


def encoder_latent(mimi, audio: torch.Tensor) -> torch.Tensor:
    """The unquantised 12.5 Hz latent of transformers' MimiModel (its _encode_frame's path)."""
    hidden = mimi.encoder_transformer(mimi.encoder(audio).transpose(1, 2))[0]
    return mimi.downsample(hidden.transpose(1, 2))


def main(out: str, size: str, seed: str, inputs: str) -> None:
    out = Path(out)
    model = build(size, int(seed))
    model.save_pretrained(out / "model")
    d = dict(np.load(inputs))
    r = {}
    with torch.no_grad():
        for key, x in d.items():
            if key.startswith("audio_"):
                audio = torch.from_numpy(x)[None]
                codes = model.encode(audio, torch.ones_like(audio, dtype=torch.long)).audio_codes
                r["codes_" + key[6:]] = codes[0].numpy()
                r["latent_" + key[6:]] = encoder_latent(model.encoder, audio[None])[0].numpy()
        batch = [torch.from_numpy(d[k]) for k in sorted(d) if k.startswith("batch_")]
        if batch:
            n = max(x.numel() for x in batch)
            audio = torch.stack([torch.nn.functional.pad(x, (0, n - x.numel())) for x in batch])
            mask = torch.stack([(torch.arange(n) < x.numel()).long() for x in batch])
            for i, c in enumerate(model.encode(audio, mask).audio_codes):
                r[f"batch_codes_{i}"] = c.numpy()
        for key, c in d.items():
            if key.startswith("codes_"):
                r["audio_" + key[6:]] = model.decode(torch.from_numpy(c)[None]).audio_values[0] \
                    .numpy()
            elif key.startswith("onepass_"):
                codes = torch.from_numpy(c)[None].transpose(1, 2)
                r["onepass_" + key[8:]] = model.decoder(codes)[0, 0].numpy()
    np.savez(out / "results.npz", **r)


def serve(folder: str, threads: str, inputs: str, out: str) -> None:
    """The saved model, timed on request (benchmarks/codecs/compare.py --codec qwen3-tts): each
    stdin line "encode NAME" or "decode NAME" runs it on `audio_NAME` (decode: the codes of its
    last encode) and answers a JSON line of seconds and extra peak resident MB; "quit" writes `out`
    (each input's codes, the audio of decode() and of one decoder pass) and exits."""
    import json
    import time

    from audiotok.bench import peak_rss_mb, reset_peak_rss

    torch.set_num_threads(int(threads))
    _, Model = _import_tokenizer()
    model = Model.from_pretrained(folder, attn_implementation="sdpa").eval()
    d = dict(np.load(inputs))
    r = {}
    for line in sys.stdin:
        op, _, name = line.strip().partition(" ")
        if op == "quit":
            break
        reset_peak_rss()
        base = peak_rss_mb()
        t = time.perf_counter()
        with torch.inference_mode():
            if op == "encode":
                audio = torch.from_numpy(d["audio_" + name])[None]
                codes = model.encode(audio, torch.ones_like(audio, dtype=torch.long))
                r["codes_" + name] = codes.audio_codes[0].numpy()
            else:
                audio = model.decode(torch.from_numpy(r["codes_" + name])[None])
                r["audio_" + name] = audio.audio_values[0].numpy()
        seconds = time.perf_counter() - t
        print(json.dumps({"seconds": seconds, "mb": max(0.0, peak_rss_mb() - base)}),
              flush=True)
    with torch.inference_mode():
        for key in [k for k in r if k.startswith("codes_")]:
            codes = torch.from_numpy(r[key])[None].transpose(1, 2)
            r["onepass_" + key[6:]] = model.decoder(codes)[0, 0].numpy()
    np.savez(out, **r)


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(*sys.argv[2:])
    else:
        main(*sys.argv[1:])
