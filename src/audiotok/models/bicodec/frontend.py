"""BiCodec's tokenizer front end, as Spark-TTS runs it (numpy, no torch: the ONNX runtime runs
it too): the volume normalisation, the 6 s reference clip the global tokens come from, and
wav2vec2's input normalisation."""

from __future__ import annotations

import numpy as np


def volume_normalize(audio: np.ndarray, coeff: float = 0.2) -> np.ndarray:
    """Spark's audio_volume_normalize, in float64: audio quieter than 0.1 at its peak is raised
    to 0.1; then (from the magnitudes before that, as Spark computes them) the mean of the
    90th-99th percentile of those above 0.01 is brought to `coeff` (a gain clipped to
    0.1..10), and a peak above 1 scaled back to 1. Ten such magnitudes or fewer: unchanged
    past the first step."""
    audio = np.asarray(audio, dtype=np.float64)
    mags = np.sort(np.abs(audio))
    if mags[-1] < 0.1:
        audio = audio / max(mags[-1], 1e-3) * 0.1
    mags = mags[mags > 0.01]
    n = mags.shape[0]
    if n <= 10:
        return audio
    volume = np.mean(mags[int(0.9 * n) : int(0.99 * n)])
    audio = audio * np.clip(coeff / volume, a_min=0.1, a_max=10)
    peak = np.max(np.abs(audio))
    return audio / peak if peak > 1 else audio


def reference_clip(audio: np.ndarray, length: int) -> np.ndarray:
    """The first `length` samples, the audio repeated end to end where it is shorter (float32)."""
    if len(audio) < length:
        audio = np.tile(audio, length // len(audio) + 1)
    return audio[:length].astype(np.float32)


def wav2vec2_input(audio: np.ndarray) -> np.ndarray:
    """Zero mean, unit variance in float32 (transformers' Wav2Vec2FeatureExtractor)."""
    x = np.asarray(audio).astype(np.float32)
    return (x - x.mean()) / np.sqrt(x.var() + 1e-7)


def encode_inputs(samples: np.ndarray, ref_samples: int, normalize_volume: bool
                  ) -> dict[str, np.ndarray]:
    """One item's model inputs from its 16 kHz samples [N] (Spark's tokenizer works on them in
    float64): "audio" (wav2vec2's input, float32 [N]) and "ref_clip" (float32 [ref_samples])."""
    wave = np.asarray(samples).reshape(-1).astype(np.float64)
    if normalize_volume:
        wave = volume_normalize(wave)
    return {"audio": wav2vec2_input(wave), "ref_clip": reference_clip(wave, ref_samples)}
