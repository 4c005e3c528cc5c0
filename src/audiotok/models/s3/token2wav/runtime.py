"""S3 token to audio in the torch-free runtime: the exported graphs (onnx.py) and, in numpy,
the Euler steps with classifier-free guidance around the estimator, as the torch codec's
decode runs them (flow.py), in a voice read from its .voice file. No torch here.

Noise: the flow starts from the export's copy of CosyVoice 2's fixed buffer, the torch
codec's. The excitation's noise comes from numpy's generator seeded with the item's seed
(`draws`): the distribution of the torch codec's draws, not its samples, so for a seed the
audio is not the torch codec's sample for sample (given the same noise it is: the tests pass
`draws`' array to the torch model)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ....errors import AudiotokError

VOICE_FORMAT = "audiotok-voice"  # voice.py's FORMAT


def read_voice(voice) -> dict[str, np.ndarray]:
    """A .voice file (safetensors, voice.py) -> {"tokens" [P], "mel" [F, 80], "embedding"
    [192]}."""
    from safetensors import SafetensorError, safe_open

    path = Path(voice)
    if not path.is_file():
        raise AudiotokError(f"{path}: no such voice file")
    try:
        with safe_open(str(path), "np") as f:
            if (f.metadata() or {}).get("format") != VOICE_FORMAT:
                raise AudiotokError(f"{path}: not an audiotok voice file")
            return {k: f.get_tensor(k) for k in ("tokens", "mel", "embedding")}
    except (SafetensorError, OSError, KeyError) as e:
        raise AudiotokError(f"{path}: unreadable voice file ({e})") from None


def draws(settings: dict, mel_frames: int, seed: int) -> np.ndarray:
    """One item's excitation noise [1, N, H] (N = upsample x `mel_frames`), standard normal
    from numpy's generator seeded with `seed`."""
    n = settings["upsample"] * mel_frames
    return np.random.default_rng(seed).standard_normal((1, n, settings["harmonics"]),
                                                       np.float32)


def cosine_schedule(steps: int) -> np.ndarray:
    """[steps + 1] float32 times 1 - cos(pi/2 s), s = 0, 1/steps, ..., 1 (flow.py's)."""
    s = np.linspace(0, 1, steps + 1, dtype=np.float32)
    return np.float32(1) - np.cos(s * np.float32(0.5 * math.pi))


def decode(runtime, tokens: np.ndarray, lengths: np.ndarray, num_samples, *, voice=None,
           seed=0, steps: int | None = None) -> np.ndarray:
    """Tokens [B, T] (checked) -> audio float32 [B, 1, N] in `voice` (a .voice file), item b
    drawing from seed[b] (or every item from one int), with `steps` Euler steps; each item
    trimmed to its length and zero beyond, as the torch codec's decode."""
    settings = runtime.facts["token2wav"]
    if voice is None:
        raise AudiotokError("decoding S3 tokens needs a voice: pass voice= a .voice file "
                            "(`audiotok voice PROMPT -o NAME.voice`)")
    v = read_voice(voice)
    steps = settings["steps"] if steps is None else steps
    if not isinstance(steps, int) or steps < 1:
        raise AudiotokError(f"steps must be a positive integer, got {steps!r}")
    b = tokens.shape[0]
    seeds = [seed] * b if isinstance(seed, int) else [int(s) for s in seed]
    if len(seeds) != b:
        raise AudiotokError(f"seed: one int, or one per item ({b}), got {len(seeds)}")
    ratio, upsample = settings["token_mel_ratio"], settings["upsample"]
    prompt, prompt_mel = v["tokens"].astype(np.int64), v["mel"].astype(np.float32)
    p, f = prompt.shape[0], prompt_mel.shape[0]
    out = (lengths * ratio + ratio * p - f) * upsample
    if num_samples is not None:
        out = np.minimum(out, num_samples)
    audio = np.zeros((b, 1, int(out.max())), np.float32)
    flow_noise = np.load(runtime.folder / settings["flow_noise"], mmap_mode="r")
    for i in range(b):  # (each item alone: its audio is the one it gives alone)
        n = int(lengths[i])
        got = _item(runtime, settings, tokens[i, :n], prompt, prompt_mel, v["embedding"],
                    flow_noise, seeds[i], steps)
        m = min(got.shape[-1], int(out[i]))
        audio[i, :, :m] = got[:, :m]
    return audio


def _item(runtime, settings, tokens, prompt, prompt_mel, embedding, flow_noise, seed,
          steps) -> np.ndarray:
    """One item's audio [1, N] (flow_noise: the fixed buffer [80, F])."""
    run = {name: s.run for name, s in runtime.sessions.items()}
    seq = np.concatenate([prompt, tokens.astype(np.int64)])[None]
    mu, spks = run["flow_encoder"](None, {
        "tokens": seq, "lengths": np.array([seq.shape[1]], np.int64),
        "embedding": embedding.astype(np.float32)[None]})
    frames = mu.shape[-1]
    f = prompt_mel.shape[0]
    x = np.array(flow_noise[None, :, :frames], np.float32)
    cond = np.zeros_like(mu)
    cond[0, :, :f] = prompt_mel.T
    zero = np.zeros_like
    inputs = {"mask": np.ones((2, 1, frames), np.float32),
              "mu": np.concatenate([mu, zero(mu)]),
              "speaker": np.concatenate([spks, zero(spks)]),
              "cond": np.concatenate([cond, zero(cond)])}
    rate = settings["cfg_rate"]
    times = cosine_schedule(steps)
    for t, r in zip(times[:-1], times[1:], strict=True):
        v = run["estimator"](None, {**inputs, "x": np.concatenate([x, x]),
                                    "t": np.full(2, t, np.float32)})[0]
        v = np.float32(1.0 + rate) * v[:1] - np.float32(rate) * v[1:]
        x = x + (r - t) * v
    mel = np.ascontiguousarray(x[:, :, f:])
    noise = draws(settings, mel.shape[-1], seed)
    return run["vocoder"](None, {"mel": mel, "noise": noise})[0][0]
