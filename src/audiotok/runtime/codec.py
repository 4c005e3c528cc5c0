"""OnnxCodec: an audiotok ONNX export folder run with onnxruntime and numpy (see runtime/)."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import numpy as np

from .._version import __version__
from ..audio import to_items
from ..chunking import (
    FeatureWindows,
    FrameMath,
    context_windows,
    frame_segments,
    segment_rule,
    segments_span,
)
from ..codes import Codes, as_numpy
from ..errors import AudiotokError, CheckpointError, CodesError
from ..models.family import licence_notice
from ..tokencheck import (
    BATCH_PLACE,
    CLAMP_HINT,
    check_batch,
    check_utterance,
    rank_error,
    within_codebooks,
)
from . import segments

MANIFEST = "audiotok_onnx.json"
FORMAT_VERSION = 2  # the newest manifest this runtime reads (export/onnx.py writes it)
_ANNOUNCED: set[str] = set()


def _omp_threads() -> int | None:
    """OMP_NUM_THREADS, the thread count torch also follows, if it is set to a number."""
    value = os.environ.get("OMP_NUM_THREADS", "")
    return int(value) if value.isdigit() and int(value) > 0 else None


class OnnxCodec(FrameMath):
    """A codec exported to ONNX, run by onnxruntime (CPU unless `providers` say otherwise) on
    `threads` threads (default: OMP_NUM_THREADS if set, else onnxruntime's choice)."""

    def __init__(self, folder: str | os.PathLike, *, threads: int | None = None,
                 providers: list[str] | None = None):
        try:
            import onnxruntime as ort
        except ImportError:
            raise CheckpointError("running an ONNX export needs onnxruntime "
                                  "(pip install 'audiotok[onnx]')") from None
        self.folder = Path(folder)
        try:
            facts = json.loads((self.folder / MANIFEST).read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise CheckpointError(f"{self.folder}: unreadable {MANIFEST} ({e})") from None
        if facts.get("format") != "audiotok-onnx":
            raise CheckpointError(f"{self.folder}: not an audiotok ONNX export")
        if not isinstance(facts.get("format_version"), int) or \
                facts["format_version"] > FORMAT_VERSION:
            raise CheckpointError(f"{self.folder}: export format version "
                                  f"{facts.get('format_version')!r}, newer than this audiotok "
                                  f"reads ({FORMAT_VERSION}); upgrade audiotok")
        self.facts = facts
        self.name, self.title, self.licence = facts["codec"], facts["model"], facts["licence"]
        self.step_graphs = bool(facts["causal"])  # a causal codec's export: step graphs
        self.sample_rate = int(facts["sample_rate"])
        # the rate encode takes, when it is not the decoded audio's (NeuCodec: 16 kHz in)
        self.input_rate = int(facts.get("input_sample_rate", self.sample_rate))
        # whole frames of audio the encode graphs take beyond the frames of codes they give
        self.audio_extra_frames = int(facts.get("audio_extra_frames", 0))
        self.samples_per_frame = int(facts["samples_per_frame"])
        self.num_codebooks = int(facts["num_codebooks"])
        self.codebook_sizes = tuple(int(s) for s in facts["codebook_sizes"])
        self.max_push_frames = int(facts.get("max_push_frames", 0))
        # samples the decoder graph gives short of T whole frames (DAC at 24/16 kHz: 8)
        self.decode_trim = int(facts.get("decode_trim", 0))
        # format 1 manifests (audiotok 0.1) did not say these; their graphs tell
        old_features = "features" in facts["graphs"]
        self.frame_rule = facts.get("frame_rule", "plus_one" if old_features else "ceil")
        self.encode_graphs = facts.get("encode_graphs",
                                       ["features", "encoder"] if old_features else ["encoder"])
        self.frame_axes = facts.get("frame_axes", {"features": 1} if old_features else {})
        self.channels = int(facts.get("channels", 1))
        # the encoder graphs take an item's samples as they are (their convolutions or their
        # reflection complete a last partial frame); else whole frames, zero-padded here
        self.raw_samples = facts.get("encode_input", "frames") == "samples"
        # the encoder sees at most a window of feature frames (every `hop:H` samples); longer
        # inputs: the features of the whole input, then windows of them (chunking.FeatureWindows)
        windows = facts.get("feature_windows")
        self.feature_windows = None if windows is None else FeatureWindows(**windows)
        self.min_samples = int(facts.get("min_samples", 0))  # fewer samples are refused
        # an encode-only codec's export: what decode() raises (what turns its codes into audio)
        self.decode_refusal = facts.get("decode_refusal")
        # "segments:L:S": each segment encoded alone, with its scale (runtime/segments.py)
        self.segments = segment_rule(self.frame_rule) \
            if self.frame_rule.startswith("segments:") else None
        # codes with utterance tokens (Codes.globals): how many an item has, their codebook
        self.global_tokens = int(facts.get("global_tokens", 0))
        self.global_codebook_size = int(facts.get("global_codebook_size", 0))
        # the family's numpy front end ("module:function" in its package, no torch): one
        # item's samples -> its graphs' inputs by name ("audio", the utterance graph's)
        self.frontend = None
        if facts.get("frontend"):
            fn = self._family_function("frontend")
            settings = facts.get("frontend_settings", {})
            self.frontend = lambda x: fn(x, **settings)
        # the family's numpy decode around its graphs (S3 token to audio: the Euler steps):
        # (runtime, tokens [B, T], lengths, num_samples, **conditioning) -> audio
        self.decoder_runtime = self._family_function("decoder_runtime") \
            if facts.get("decoder_runtime") else None
        options = ort.SessionOptions()
        threads = threads or _omp_threads()
        if threads:
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
        providers = providers or ["CPUExecutionProvider"]
        self.sessions = {}
        for name, file in facts["graphs"].items():
            path = self.folder / file
            if not path.is_file():
                raise CheckpointError(f"{path}: missing (the export folder is incomplete)")
            self.sessions[name] = ort.InferenceSession(str(path), options, providers=providers)
        if self.name not in _ANNOUNCED:  # as audiotok.load does for the torch codecs
            _ANNOUNCED.add(self.name)
            print(licence_notice(self.title, self.licence), file=sys.stderr)

    def _family_function(self, key: str):
        """The manifest's `key`: a function of the family's own modules (".module:function",
        no other package's), which run without torch."""
        from ..models.registry import family

        ref = str(self.facts[key])
        if not re.fullmatch(r"(\.[a-z_0-9]+)+:[a-z_]+", ref):
            raise CheckpointError(f"{self.folder}: {key} {ref!r} is not a function of the "
                                  f"{self.name} family (\".module:function\")")
        return family(self.name).resolve(ref)

    def info(self) -> dict:
        return {"codec": self.name, "model": self.title, "runtime": "onnxruntime",
                **self.rate_facts(), "samples_per_frame": self.samples_per_frame,
                "frame_rate": self.frame_rate, "num_codebooks": self.num_codebooks,
                "codebook_sizes": list(self.codebook_sizes), "channels": self.channels,
                "global_tokens": self.global_tokens, "licence": self.licence,
                "folder": str(self.folder)}

    # -- encode --------------------------------------------------------------------------------
    def encode(self, x, sample_rate: int | None = None) -> Codes:
        """Tokens of one item or a batch: the inputs `Codec.encode` takes (paths, bytes, numpy
        arrays, lists of items of any lengths and channel counts), resampled and downmixed."""
        items = to_items(x, sample_rate, self.input_rate, arrays=True, channels=self.channels)
        for it in items:
            self.check_whole_frame(it.samples.shape[-1])
        if self.segments is not None:
            return self._encode_segments(items)
        if self.frontend is not None:
            return self._encode_prepared(items)
        frames = [self.num_frames(it.samples.size) for it in items]
        tokens = np.zeros((len(items), self.num_codebooks, max(frames)), np.int64)
        # raw samples: items of one length run as a batch, fed as they are
        raw = self.raw_samples
        lengths = [it.samples.size for it in items] if raw else frames
        for group in self._groups(frames, lengths, raw):
            if raw:
                audio = np.stack([items[i].samples for i in group])[:, None].astype(np.float32)
            else:
                audio = self._padded([items[i].samples for i in group], frames[group[0]])
            if self.feature_windows is not None:
                out = self._encode_feature_windows(audio)
            elif self._is_long(frames[group[0]]):
                out = self._encode_windowed(audio)
            elif self.encode_graphs[-1] not in self.sessions:  # a causal export's: the step
                out = self._encode_steps(audio)               # graph, as a stream
            else:
                out = self._encode_batch(audio)
            for j, i in enumerate(group):
                tokens[i, :, : frames[i]] = out[j, :, : frames[i]]
        return self._codes(items, tokens, frames)

    def _codes(self, items, tokens: np.ndarray, frames: list[int],
               scales: np.ndarray | None = None, utterance: np.ndarray | None = None) -> Codes:
        return Codes(tokens, np.asarray(frames, np.int64), self.name, self.sample_rate,
                     self.samples_per_frame,
                     np.asarray([self.output_samples(it.samples.shape[-1]) for it in items],
                                np.int64),
                     {"codec_version": __version__, "model": self.title, "runtime": "onnxruntime",
                      "source_sample_rate": [it.source_rate for it in items],
                      "source_num_samples": [it.source_samples for it in items]},
                     scales=scales, globals=utterance)

    def _encode_prepared(self, items) -> Codes:
        """Through the manifest's front end: each item's "audio" input through the encode
        graphs (items of one length as a batch), and for codes with utterance tokens the
        utterance graph over every item's other inputs (one batch: they have one shape)."""
        inputs = [self.frontend(it.samples.reshape(-1)) for it in items]
        frames = [self.num_frames(it.samples.shape[-1]) for it in items]
        tokens = np.zeros((len(items), self.num_codebooks, max(frames)), np.int64)
        for group in self._groups(frames, [x["audio"].size for x in inputs], raw=True):
            audio = np.stack([inputs[i]["audio"] for i in group])[:, None].astype(np.float32)
            out = self._encode_batch(audio)
            for j, i in enumerate(group):
                tokens[i, :, : frames[i]] = out[j, :, : frames[i]]
        utterance = None
        if self.global_tokens:
            session = self.sessions[self.facts["utterance_graph"]]
            feed = {i.name: np.stack([x[i.name] for x in inputs]) for i in session.get_inputs()}
            utterance = session.run(None, feed)[0].astype(np.int64)
        return self._codes(items, tokens, frames, utterance=utterance)

    def _encode_segments(self, items) -> Codes:
        """Items of one length as a batch, segment by segment (runtime/segments.py)."""
        lengths = [it.samples.shape[-1] for it in items]
        frames = [self.num_frames(n) for n in lengths]
        count = max(len(range(0, n, self.segments[1])) for n in lengths)
        tokens = np.zeros((len(items), self.num_codebooks, max(frames)), np.int64)
        scales = np.zeros((len(items), count), np.float32)
        for group in self._groups(frames, lengths):
            audio = np.stack([items[i].samples for i in group]).astype(np.float32)
            codes, factors = segments.encode(self.sessions["encoder"], audio, *self.segments)
            for j, i in enumerate(group):
                tokens[i, :, : frames[i]] = codes[j]
                scales[i, : factors.shape[1]] = factors[j]
        return self._codes(items, tokens, frames, scales)

    def _groups(self, frames: list[int], lengths: list[int] | None = None,
                raw: bool = False) -> list[list[int]]:
        """Items run as one batch: all of them for a causal codec fed whole frames (padding
        never reaches an item's frames; its encoder streams: an encoder_step graph), else those
        of equal length (`lengths`, default frames; a long one alone: it is windowed)."""
        if self.step_graphs and not raw and "encoder_step" in self.facts["graphs"]:
            return [list(range(len(frames)))]
        groups: dict[int, list[int]] = {}
        for i, (n, key) in enumerate(zip(frames, lengths or frames, strict=True)):
            groups.setdefault(-1 - i if self._is_long(n) else key, []).append(i)
        return list(groups.values())

    def _is_long(self, frames: int) -> bool:
        window = self.facts.get("window_frames")
        return window is not None and frames > window

    def _windows(self, frames: int):
        return context_windows(frames, self.facts["window_frames"], self.facts["context_frames"])

    def _padded(self, samples: list[np.ndarray], frames: int) -> np.ndarray:
        """Zero-padded audio [B, 1, (frames + audio_extra_frames) * input_samples_per_frame]
        (frames: at least each item's)."""
        frames = max(frames, *(self.num_frames(x.size) for x in samples))
        length = (frames + self.audio_extra_frames) * self.input_samples_per_frame
        audio = np.zeros((len(samples), 1, length), np.float32)
        for i, x in enumerate(samples):
            audio[i, 0, : x.size] = x
        return audio

    def _run_graphs(self, graphs: list[str], arrays: dict[str, np.ndarray]) -> dict:
        """Run `graphs` in order, each fed by input name from `arrays`, which gains its outputs."""
        for graph in graphs:
            session = self.sessions[graph]
            feed = {i.name: arrays[i.name] for i in session.get_inputs()}
            outputs = session.run(None, feed)
            arrays = {**arrays, **{o.name: y for o, y in zip(session.get_outputs(), outputs,
                                                                strict=True)}}
        return arrays

    def _encode_batch(self, audio: np.ndarray) -> np.ndarray:
        """The manifest's encode graphs in order (e.g. a features graph, then the encoder)."""
        return self._run_graphs(self.encode_graphs, {"audio": audio})["codes"]

    def _encode_steps(self, audio: np.ndarray) -> np.ndarray:
        """Audio [B, 1, n] through the encoder step graph (a causal export without the
        whole-input encoder): the tokens a stream of that audio gives."""
        from .streams import OnnxStreamEncoder

        with OnnxStreamEncoder(self, audio.shape[0]) as enc:
            return np.concatenate([enc.push(audio[:, 0]), enc.flush()], -1)

    def _encode_windowed(self, audio: np.ndarray) -> np.ndarray:
        """One long item in windows, as the torch codec does: the graphs before the encoder run
        on the whole signal, and each window takes its frames of their outputs."""
        hop, extra = self.input_samples_per_frame, self.audio_extra_frames
        whole = self._run_graphs(self.encode_graphs[:-1], {"audio": audio})
        pieces = []
        for a, b, keep in self._windows(audio.shape[-1] // hop - extra):
            window = {name: np.take(x, range(a, b), axis=self.frame_axes[name])
                      for name, x in whole.items() if name != "audio"}
            window["audio"] = audio[..., a * hop: (b + extra) * hop]
            codes = self._run_graphs(self.encode_graphs[-1:], window)["codes"]
            pieces.append(codes[..., keep])
        return np.concatenate(pieces, -1)

    def _encode_feature_windows(self, audio: np.ndarray) -> np.ndarray:
        """Items of one length [B, 1, N] under `feature_windows`: the graphs before the encoder
        on the whole input, each window of their frames through the encoder, the windows'
        tokens merged."""
        whole = self._run_graphs(self.encode_graphs[:-1], {"audio": audio})
        features = {name: x for name, x in whole.items() if name in self.frame_axes}
        name, x = next(iter(features.items()))
        plan, frames = self.feature_windows, x.shape[self.frame_axes[name]]
        pieces = []
        for (a, b), (first, end) in zip(plan.spans(frames), plan.pieces(frames), strict=True):
            window = {k: v[(slice(None),) * self.frame_axes[k] + (slice(a, b),)]
                      for k, v in features.items()}
            codes = self._run_graphs(self.encode_graphs[-1:], window)["codes"]
            pieces.append(codes[..., first:end])
        return np.concatenate(pieces, -1)

    # -- decode --------------------------------------------------------------------------------
    def decode(self, codes, *, clamp: bool = False, globals=None, **conditioning) -> np.ndarray:
        """Audio float32 [B, 1, N] for Codes (numpy or torch arrays) or integer tokens
        [B, K, T] / [K, T]; each item trimmed to its length and zero beyond it, as
        Codec.decode (globals: the utterance tokens, for codes that carry them; conditioning:
        what the family's decode takes, e.g. S3's voice=, seed=, steps=)."""
        if self.decode_refusal is not None:
            raise AudiotokError(self.decode_refusal)
        if self.decoder_runtime is not None:
            tokens, lengths, num_samples = self.check_codes(codes, clamp)
            return self.decoder_runtime(self, tokens[:, 0], lengths, num_samples,
                                        **conditioning)
        if conditioning:
            raise AudiotokError(f"{self.title} decodes without {', '.join(conditioning)}")
        scales = getattr(codes, "scales", None)
        if scales is not None and self.segments is None:
            raise CodesError(f"these codes carry segment scales, which {self.title} does not "
                             "use")
        tokens, lengths, num_samples = self.check_codes(codes, clamp)
        utterance = check_utterance(getattr(codes, "globals", None) if globals is None
                                    else globals, tokens.shape[0], self.global_tokens,
                                    self.global_codebook_size, self.title, clamp)
        if self.segments is not None:
            return self._decode_segments(tokens, lengths, num_samples,
                                         None if scales is None else as_numpy(scales))
        spf = self.samples_per_frame
        audio = np.zeros((tokens.shape[0], 1, tokens.shape[-1] * spf), np.float32)
        for group in self._groups(lengths.tolist()):
            n = int(lengths[group].max())
            if "decoder" not in self.sessions:  # a causal export's: the step graph, as a stream
                audio[group, :, : n * spf] = self._decode_steps(tokens[group, :, :n])
                continue
            run = self.sessions["decoder"].run

            def also(rows):  # the utterance tokens of these rows, for codes that carry them
                return {} if utterance is None else {"globals": utterance[rows]}

            if not self._is_long(n):
                audio[group, :, : n * spf - self.decode_trim] = \
                    run(None, {"codes": tokens[group, :, :n], **also(group)})[0]
                continue
            i = group[0]
            for a, b, keep in self._windows(n):
                piece = run(None, {"codes": tokens[i: i + 1, :, a:b], **also([i])})[0]
                audio[i, :, (a + keep.start) * spf: (a + keep.stop) * spf] = \
                    piece[0, :, keep.start * spf: keep.stop * spf]
        whole = lengths * spf - self.decode_trim
        out_len = whole if num_samples is None else np.minimum(num_samples, whole)
        audio = audio[..., : int(out_len.max())]
        for i, n in enumerate(out_len.tolist()):
            audio[i, :, n:] = 0
        return audio

    def _decode_steps(self, tokens: np.ndarray) -> np.ndarray:
        """Tokens [B, K, n] through the decoder step graph: the audio a stream of them gives."""
        from .streams import OnnxStreamDecoder

        with OnnxStreamDecoder(self, tokens.shape[0]) as dec:
            return dec.push(tokens)

    def _decode_segments(self, tokens: np.ndarray, lengths: np.ndarray, num_samples,
                         scales: np.ndarray | None) -> np.ndarray:
        """Audio [B, C, N]: items of one length as a batch, their segments decoded, scaled and
        overlap-added (runtime/segments.py), each trimmed to its length."""
        length, stride = self.segments
        hop = self.samples_per_frame
        spans = [segments_span(frame_segments(n, length, stride, hop), stride, hop)
                 for n in lengths.tolist()]
        out_len = np.asarray(spans) if num_samples is None else np.minimum(num_samples, spans)
        audio = np.zeros((tokens.shape[0], self.channels, int(out_len.max())), np.float32)
        for group in self._groups(lengths.tolist()):
            n = int(lengths[group[0]])
            got = segments.decode(self.sessions["decoder"], tokens[group, :, :n],
                                  None if scales is None else scales[group], length, stride, hop)
            for j, i in enumerate(group):
                audio[i, :, : out_len[i]] = got[j, :, : out_len[i]]
        return audio

    def check_codes(self, codes, clamp: bool = False):
        """(tokens int64 [B, K, T] in range, lengths [B], num_samples [B] or None)."""
        num_samples = None
        if isinstance(codes, Codes):
            codes.require_codec(self.name)
            tokens, lengths = as_numpy(codes.tokens), as_numpy(codes.lengths).astype(np.int64)
            num_samples = None if codes.num_samples is None else as_numpy(codes.num_samples)
        else:
            tokens = as_numpy(codes)
            if tokens.ndim == 2:
                tokens = tokens[None]
            if tokens.ndim != 3:
                raise rank_error(tokens.shape)
            lengths = np.full(tokens.shape[0], tokens.shape[2], np.int64)
        if tokens.dtype.kind not in "iu":
            raise CodesError(f"tokens must be integers, got dtype {tokens.dtype}")
        check_batch(tokens.shape, lengths.tolist(), self.name, self.num_codebooks)
        t = tokens.shape[-1]
        tokens = tokens.astype(np.int64)
        tokens = np.where(np.arange(t)[None, None, :] < lengths[:, None, None], tokens, 0)
        tokens = within_codebooks(tokens, self.codebook_sizes, clamp, BATCH_PLACE, CLAMP_HINT)
        return tokens, lengths, num_samples

    # -- streaming -----------------------------------------------------------------------------
    def stream_decoder(self, batch_size: int = 1, *, clamp: bool = False):
        """Incremental decoder through the step graph, as Codec.stream_decoder."""
        if self.decode_refusal is not None:
            raise AudiotokError(self.decode_refusal)
        from .streams import OnnxStreamDecoder

        return OnnxStreamDecoder(self, batch_size, clamp)

    def stream_encoder(self, batch_size: int = 1):
        """Incremental encoder through the step graph, as Codec.stream_encoder."""
        from .streams import OnnxStreamEncoder

        return OnnxStreamEncoder(self, batch_size)

    def _step_session(self, graph: str):
        if not self.step_graphs:  # as the torch codec says it
            raise AudiotokError(f"{self.title} is not causal (it attends to the whole signal), "
                                "so it cannot stream exactly; use encode()/decode(), which "
                                "process long inputs in overlapping windows")
        if graph not in self.sessions:
            why = self.facts.get("no_step_graph", {}).get(graph)
            raise AudiotokError(f"{self.folder} has no {graph} graph: {self.title} does not "
                                "stream exactly here" + (f" ({why})" if why else ""))
        return self.sessions[graph]
