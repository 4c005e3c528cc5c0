"""Frame counts and window plans over frames, shared by the torch codecs and the ONNX runtime (no
torch here)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from .errors import AudioError, CodesError


def context_windows(frames: int, window: int, context: int) -> Iterator[tuple[int, int, slice]]:
    """(start, stop, keep) for each window of `window` frames of a `frames`-long input, widened
    by up to `context` frames on both sides: run the model on frames start..stop and keep the
    slice `keep` of its output (that window's own frames)."""
    for s in range(0, frames, window):
        a, b = max(0, s - context), min(frames, s + window + context)
        yield a, b, slice(s - a, s - a + min(window, frames - s))


def window_start(emitted: int, left: int, align: int = 1) -> int:
    """The first frame a stream's window decoding from frame `emitted` on reads: `left` frames
    of context before it, moved back to a multiple of `align` (e.g. whole attention windows).
    Also the first frame the stream must keep for its next window."""
    first = max(0, emitted - left)
    return first - first % align


# and "ceil:N", "partial:R", "hop:H", "segments:L:S" (below)
FRAME_RULES = ("ceil", "plus_one", "floor")


def frames_for(rule: str, num_samples: int, samples_per_frame: int) -> int:
    """Code frames of `num_samples` samples under a codec's padding rule: "ceil" (padded up to
    whole frames), "ceil:N" (padded up to a multiple of N frames, e.g. a whole attention
    window), "plus_one" (always 1..samples_per_frame zeros appended: N // hop + 1), "floor"
    (a partial last frame is dropped), "partial:R" (the first frame needs R samples, each
    further one samples_per_frame more: for R <= samples_per_frame, a partial last frame
    counts once it has R samples), "hop:H" (features every H samples, a partial hop dropped,
    then a frame per samples_per_frame / H features, the last one partial) or "segments:L:S"
    (segments of L samples every S, each "ceil": segment_frames)."""
    if rule == "ceil":
        return -(-num_samples // samples_per_frame)
    if rule.startswith("ceil:") and rule[5:].isdigit() and int(rule[5:]) > 0:
        block = int(rule[5:]) * samples_per_frame
        return -(-num_samples // block) * int(rule[5:])
    if rule.startswith("hop:"):
        hop = rule_hop(rule)
        if samples_per_frame % hop:
            raise ValueError(f"frame rule {rule}: {samples_per_frame} samples a frame is not a "
                             f"multiple of {hop}")
        return -(-(num_samples // hop) // (samples_per_frame // hop))
    if rule.startswith("segments:"):
        return sum(segment_frames(num_samples, *segment_rule(rule), samples_per_frame))
    if rule.startswith("partial:") and rule[8:].isdigit() and int(rule[8:]) > 0:
        return (num_samples + samples_per_frame - int(rule[8:])) // samples_per_frame
    if rule == "plus_one":
        return num_samples // samples_per_frame + 1
    if rule == "floor":
        return num_samples // samples_per_frame
    raise ValueError(f"unknown frame rule {rule!r}; expected one of {FRAME_RULES}, ceil:N, "
                     "partial:R, hop:H or segments:L:S")


def rule_hop(rule: str) -> int:
    """H of a "hop:H" frame rule (samples per feature frame)."""
    if not (rule.startswith("hop:") and rule[4:].isdigit() and int(rule[4:]) > 0):
        raise ValueError(f"frame rule {rule!r} is not hop:H")
    return int(rule[4:])


class FrameMath:
    """`frame_rate` and `num_frames` from `sample_rate`, `samples_per_frame` and `frame_rule`:
    shared by the torch codecs and the ONNX runtime's codec.

    sample_rate and samples_per_frame are those of the audio a codec decodes to; the audio it
    encodes has the same unless the codec sets `input_rate` (e.g. 16 kHz in and 24 kHz out:
    320 input samples and 480 output samples a frame).

    An encoder that sees at most a window of feature frames (a "hop:H" frame rule) sets
    `feature_windows`: its token count then follows the windows' merge. `min_samples`: fewer
    input samples are refused (e.g. a front end's reflect padding needs more)."""

    title: str
    sample_rate: int
    samples_per_frame: int
    frame_rule: str
    _input_rate: int | None = None
    feature_windows: FeatureWindows | None = None
    min_samples: int = 0

    @property
    def input_rate(self) -> int:
        """Rate of the audio encode() and stream encoders take."""
        return self._input_rate or self.sample_rate

    @input_rate.setter
    def input_rate(self, rate: int) -> None:
        self._input_rate = int(rate)

    @property
    def input_samples_per_frame(self) -> int:
        return self.samples_per_frame * self.input_rate // self.sample_rate

    @property
    def frame_rate(self) -> float:
        return self.sample_rate / self.samples_per_frame

    def rate_facts(self) -> dict:
        """{"sample_rate": ...}, and "input_sample_rate" when encode takes another rate."""
        return {"sample_rate": self.sample_rate,
                **({"input_sample_rate": self.input_rate} if self.input_rate != self.sample_rate
                   else {})}

    def check_whole_frame(self, num_samples: int, hint: str = "pad it to at least one frame"
                          ) -> None:
        """AudioError when `num_samples` input samples are fewer than `min_samples` or give no
        frame (a rule such as "floor")."""
        if num_samples < self.min_samples:
            raise AudioError(f"{num_samples} samples is too short for {self.title}: it needs at "
                             f"least {self.min_samples} samples at {self.input_rate} Hz")
        if self.num_frames(num_samples) < 1:
            raise AudioError(f"{num_samples} samples is less than one {self.title} frame "
                             f"({self.input_samples_per_frame} samples at {self.input_rate} "
                             f"Hz); {hint}")

    def num_frames(self, num_samples: int) -> int:
        """Code frames for `num_samples` input samples (at input_rate; its frame_rule, and its
        feature windows' merge if it has them)."""
        if self.feature_windows is not None:
            return self.feature_windows.tokens(num_samples // rule_hop(self.frame_rule))
        return frames_for(self.frame_rule, num_samples, self.input_samples_per_frame)

    def output_samples(self, num_samples: int) -> int:
        """Samples at sample_rate that `num_samples` input samples last, no more than their
        frames decode to (a frame rule that drops a partial last frame decodes fewer)."""
        at_rate = num_samples if self.input_rate == self.sample_rate else \
            -(-num_samples * self.sample_rate // self.input_rate)
        return min(at_rate, self.num_frames(num_samples) * self.samples_per_frame)

    def segment_count(self, frames: int) -> int:
        """Segments of an item of `frames` frames, for a "segments:L:S" frame rule (codes that
        carry a scale per segment)."""
        length, stride = segment_rule(self.frame_rule)
        return len(frame_segments(frames, length, stride, self.samples_per_frame))


def segment_rule(rule: str) -> tuple[int, int]:
    """(samples a segment, samples between segment starts) of a "segments:L:S" frame rule."""
    parts = rule.split(":")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts[1:]):
        raise ValueError(f"unknown frame rule {rule!r}; expected segments:L:S")
    return int(parts[1]), int(parts[2])


def segment_frames(num_samples: int, length: int, stride: int, hop: int) -> list[int]:
    """Frames of each segment of an input of `num_samples` samples cut into segments of
    `length` samples every `stride` (the last ones shorter), each ceil(samples / hop) frames."""
    return [-(-min(length, num_samples - start) // hop)
            for start in range(0, num_samples, stride)]


def frame_segments(frames: int, length: int, stride: int, hop: int) -> list[int]:
    """Frames of each segment of an input that gives `frames` frames (segment_frames), known
    from the frame count alone: the segments of the shortest input that gives that many (a
    longer one that gives as many has the same, for segments of whole frames); CodesError if no
    input gives that many."""
    lo, hi = 1, frames * hop
    while lo < hi:  # the total grows with the samples: the least with at least `frames`
        mid = (lo + hi) // 2
        if sum(segment_frames(mid, length, stride, hop)) >= frames:
            hi = mid
        else:
            lo = mid + 1
    out = segment_frames(lo, length, stride, hop)
    if sum(out) != frames:
        raise CodesError(f"no input gives {frames} frames of segments of {length} samples")
    return out


def segments_span(layout: list[int], stride: int, hop: int) -> int:
    """Samples the overlap-add of segments of `layout` frames spans."""
    return max(i * stride + n * hop for i, n in enumerate(layout))


MERGES = ("trim", "lossless")


@dataclass(frozen=True)
class FeatureWindows:
    """How an encoder that sees at most `window` feature frames runs a longer input: windows of
    `window` frames starting every `stride` frames while the start is inside the input, each
    giving a token per `per_token` frames (the last one partial), merged at each joint with
    `trim` tokens cut from both sides.

    merge "trim": every window keeps its tokens but `trim` at each inner joint; a last window
    of `trim` tokens or fewer gives none, so an input may lose the end of its tokens. merge
    "lossless": the same joints, every token of the input kept once
    (ceil(frames / per_token) tokens)."""

    window: int
    stride: int
    per_token: int
    trim: int
    merge: str = "trim"

    def __post_init__(self):
        if self.merge not in MERGES:
            raise ValueError(f"merge must be one of {', '.join(MERGES)}, got {self.merge!r}")

    def spans(self, frames: int) -> list[tuple[int, int]]:
        """(start, end) feature frames of each window (the whole input if it fits one)."""
        if frames <= self.window:
            return [(0, frames)]
        return [(s, min(s + self.window, frames)) for s in range(0, frames, self.stride)]

    def pieces(self, frames: int) -> list[tuple[int, int]]:
        """(first, end) token each window keeps, in the window's own token numbering."""
        spans = self.spans(frames)
        sizes = [-(-(e - s) // self.per_token) for s, e in spans]
        if len(spans) == 1:
            return [(0, sizes[0])]
        h, last = self.trim, len(spans) - 1
        if self.merge == "trim":
            return [(0 if i == 0 else min(h, n), n if i == last else max(0, n - h))
                    for i, n in enumerate(sizes)]
        total = -(-frames // self.per_token)
        offsets = [s // self.per_token for s, _ in spans]
        starts = [0] + [o + h for o in offsets[1:]]
        ends = [*starts[1:], total]
        return [(lo - o, max(lo, min(hi, total)) - o)
                for lo, hi, o in zip(starts, ends, offsets, strict=True)]

    def tokens(self, frames: int) -> int:
        """Tokens an input of `frames` feature frames gives."""
        return sum(b - a for a, b in self.pieces(frames))

    def to_dict(self) -> dict:
        return {"window": self.window, "stride": self.stride, "per_token": self.per_token,
                "trim": self.trim, "merge": self.merge}
