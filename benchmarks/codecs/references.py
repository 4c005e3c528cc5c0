"""The reference implementations compare.py runs audiotok against: one entry per codec.

An entry builds the full-size model with random weights once (written under --workdir), loads
audiotok on the same weights and names each reference's encode and decode. Adding a codec to
the comparison is one function here and one line in REFERENCES.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from common import Measured, speech  # noqa: E402
from models import random_weights  # noqa: E402

import audiotok  # noqa: E402


@dataclass
class Impl:
    """One implementation: encode(x [1, C, n] float32) -> codes, decode(codes) -> audio (None
    for an encode-only codec)."""

    encode: Callable
    decode: Callable | None


@dataclass
class Side:
    """A codec set up for comparison: the checkpoint audiotok loads and the references that run
    the same weights, each built on demand from audiotok's loaded codec."""

    path: Path
    references: dict[str, Callable[[object], Impl]]
    load: dict = field(default_factory=dict)  # audiotok.load keywords
    align: int = 1  # inputs are cut to whole multiples of this many samples
    prepare: Callable = lambda x: x  # [1, 1, n] speech -> the input every implementation gets
    ours: Callable | None = None  # codec -> Impl, when audiotok's is not encode(x[0]).tokens
    same: Callable | None = None  # codes by name -> True | "how many differ" (default: equal)
    after: Callable | None = None  # (seconds, impls by name, codes by name) -> extra row
    finish: Callable | None = None  # () -> extra rows, once at the end
    setup: Callable | None = None  # codec -> None: adjusts audiotok's codec after loading
    signals: dict | None = None  # the precision study's inputs (compare.py --isolated)


def ours_impl(codec) -> Impl:
    return Impl(lambda x: codec.encode(x[0], codec.input_rate).tokens,
                codec.decode if codec.decode_refusal is None else None)


def all_equal(codes: dict) -> bool:
    first = codes["audiotok"]
    return all(torch.equal(torch.as_tensor(first), torch.as_tensor(c)) for c in codes.values())


def s2(args, variant: str | None) -> Side:
    def fish_speech(ours) -> Impl:
        from peers import fish_speech_s2

        model = fish_speech_s2(ours.config, ours.model.state_dict())
        return Impl(lambda x: model.encode(x)[0],
                    lambda c: model.decode(c, torch.tensor([c.shape[-1]]))[0])

    return Side(random_weights("s2", args.workdir), {"fish-speech": fish_speech},
                signals=_golden("s2_tiny/expected_pth.npz", ["audio_132377", "audio_352805"]))


def xcodec2(args, variant: str | None) -> Side:
    def hf(ours) -> Impl:
        from peers import seamless_features, transformers_xcodec2

        model = transformers_xcodec2(random_weights("xcodec2", args.workdir))

        def encode(x):
            w = x[0, 0].numpy()
            values = torch.from_numpy(np.pad(w, (0, 320 - w.size % 320)))[None, None]
            return model.encode(values, seamless_features([w])).audio_codes

        return Impl(encode, lambda c: model.decode(c).audio_values)

    return Side(random_weights("xcodec2", args.workdir), {"transformers": hf},
                signals=_golden("xcodec2_tiny/cases.npz", ["n49120_waveform", "n144000_waveform"]))


def dac(args, variant: str | None) -> Side:
    from tests.models.dac import reference

    kwargs = {"44khz": reference.FULL_44, "24khz": reference.FULL_24,
              "speech": reference.SPEECH}[variant or "44khz"]
    ref = reference.dac_model(kwargs)
    path = reference.save_pth(ref, kwargs, args.workdir / f"dac_{variant or '44khz'}_full")

    def hf(ours) -> Impl:
        model = reference.hf_model(ref, kwargs)
        return Impl(lambda x: model.encode(x).audio_codes,
                    lambda c: model.decode(audio_codes=c).audio_values)

    return Side(path, {"dac 1.0.0": lambda ours: Impl(
        lambda x: ref.encode(x)[1], lambda c: ref.decode(ref.quantizer.from_codes(c)[0])),
        "transformers": hf}, align=ref.hop_length)


def dac_outetts(args, variant: str | None) -> Side:
    """DAC.speech through OuteTTS 1.0's pipeline: audiotok's pipeline="outetts" against
    outetts 0.4.4's DacInterface on the same weights."""
    from tests.models.dac import outetts_reference, reference

    ref = reference.dac_model(reference.SPEECH)
    path = reference.save_pth(ref, reference.SPEECH, args.workdir / "dac_speech_full",
                              "weights_24khz_1.5kbps_v1.0.pth")

    def outetts(ours) -> Impl:
        iface = outetts_reference.dac_interface(path)
        return Impl(iface.encode, iface.decode)

    return Side(path, {"outetts 0.4.4": outetts}, load={"pipeline": "outetts"},
                align=ref.hop_length)


def snac(args, variant: str | None) -> Side:
    from audiotok.models.snac.model import levels_to_rows, rows_to_levels
    from tests.models.snac import reference

    config = {"24khz": reference.FULL_24, "32khz": reference.FULL_32}[variant or "24khz"]
    ref = reference.snac_model(config)
    folder = reference.save(ref, config, args.workdir / f"snac_{variant or '24khz'}_full")
    ours = audiotok.load(folder)
    align = ours.samples_per_frame * ours.streaming.window.align
    return Side(folder, {"snac 1.2.1": lambda ours: Impl(
        lambda x: levels_to_rows(ref.encode(x), ours.config),
        lambda c: ref.decode(rows_to_levels(c, ours.config)))}, align=align)


def mimi(args, variant: str | None) -> Side:
    os.environ.setdefault("NO_TORCH_COMPILE", "1")
    from tests.models.mimi import reference

    args.workdir.mkdir(parents=True, exist_ok=True)
    moshi = reference.moshi_model(small=False)
    moshi_file, hf_dir = reference.save_both(moshi, args.workdir / "mimi_full", small=False)

    def hf(ours) -> Impl:
        model = reference.hf_model(hf_dir)
        return Impl(lambda x: model.encode(x).audio_codes, lambda c: model.decode(c).audio_values)

    def same(codes: dict) -> bool | str:
        # a float32 tie between two distances can go either way under other rounding
        # (docs/codecs/mimi.md): count the codes that differ from any reference's
        differ = max(int((codes["audiotok"] != c).sum()) for c in codes.values())
        return True if differ == 0 else f"{differ} of {codes['audiotok'].numel()} differ"

    return Side(moshi_file, {"moshi 0.2.13": lambda ours: Impl(moshi.encode, moshi.decode),
                             "transformers": hf}, align=1920, same=same)


def encodec(args, variant: str | None) -> Side:
    from tests.models.encodec import reference

    variant = variant or "24khz"
    bandwidth = args.bandwidth or {"32khz": 2.2}.get(variant, 24.0)
    ref = reference.encodec_model(variant=variant)
    ref.set_target_bandwidth(bandwidth)
    path = reference.save_th(ref, args.workdir / f"encodec_{variant}_full",
                             f"encodec_{variant}-test.th")
    hop = int(np.prod(ref.encoder.ratios))

    load = {"bandwidth": str(bandwidth)}

    def hf(ours) -> Impl:
        model = reference.hf_model(ref, {"32khz": reference.HF_32KHZ,
                                         "48khz": reference.HF_48KHZ}.get(variant))
        if variant == "48khz":
            return stereo.transformers(model, bandwidth)
        return Impl(lambda x: model.encode(x, bandwidth=bandwidth).audio_codes[0],
                    lambda c: model.decode(c[None], [None]).audio_values)

    if variant != "48khz":
        package = Impl(lambda x: ref.encode(x)[0][0], lambda c: ref.decode([(c, None)]))
        return Side(path, {"encodec 0.1.1": lambda ours: package, "transformers": hf},
                    load=load, align=hop)
    from encodec_stereo import Stereo  # (stereo in segments: codes and scales as one tensor)

    stereo = Stereo(audiotok.load(path, **load).config)
    return Side(path, {"encodec 0.1.1": lambda ours: stereo.package(ref), "transformers": hf},
                load=load, align=hop, prepare=stereo.prepare, ours=stereo.ours)


def neucodec(args, variant: str | None, distill: bool = False) -> Side:
    from audiotok.models.xcodec2.features import semantic_features
    from tests.models.neucodec import reference

    if distill:
        ref = reference.distill_package_model(reference.DISTILL_FULL)
        path = args.workdir / "distill_neucodec_full" / "pytorch_model.bin"
    else:
        ref = reference.package_model(reference.FULL)
        path = args.workdir / "neucodec_full" / "pytorch_model.bin"
    if not path.exists():
        reference.save_package(ref, path.parent)

    def hf(ours) -> Impl:
        # transformers' feature extractor computes its fbank with torchaudio, which does not run
        # with this torch: its encode runs on audiotok's features (equal to the package's),
        # computed inside the timed call
        model = reference.hf_model(ours)

        def encode(x):
            p = (x.shape[-1] // 320 + 1) * 320
            padded = torch.nn.functional.pad(x[0], (0, p - x.shape[-1]))
            features, _ = semantic_features(padded, torch.tensor([p]), 320, 16000, centre=False)
            return model.encode(padded[:, None], features).audio_codes

        return Impl(encode, lambda c: model.decode(audio_codes=c).audio_values)

    def after(seconds, impls, codes) -> dict:
        ours = impls["audiotok"].decode(codes["audiotok"])
        diff = max(float((ours - impl.decode(codes["audiotok"])).abs().max())
                   for name, impl in impls.items() if name != "audiotok")
        print(f"{seconds:5.1f} s: decoded audio within {diff:.1e} of the references")
        return {"seconds": seconds, "op": "decode difference", "max_abs": diff}

    refs = {"neucodec 0.0.6": lambda ours: Impl(ref.encode_code, ref.decode_code)}
    if not distill:  # transformers has no DistillNeuCodec
        refs["transformers"] = hf
    # --whole: audiotok encodes inputs over 30 s whole, as the references do (by default in
    # windows with 3 s of context, codec.streaming.long_window)
    return Side(path, refs, after=after, setup=_whole if args.whole else None)


def _whole(codec) -> None:
    codec.streaming = dataclasses.replace(codec.streaming, long_window=None)


def distill_neucodec(args, variant: str | None) -> Side:
    return neucodec(args, variant, distill=True)


def qwen3_tts(args, variant: str | None) -> Side:
    """qwen-tts 0.1.1 runs in a child process with the transformers 4.57.3 it pins (from
    .refs/qwen-tts: see .ci/run), timing each call itself; its codes are compared at the end."""
    run = ROOT / "tests" / "models" / "qwen3_tts" / "reference_run.py"
    env = {**os.environ, "PYTHONPATH": str(ROOT / ".refs" / "qwen-tts")}
    work = args.workdir / "qwen3_tts_full"
    if not (work / "model" / "model.safetensors").exists():  # the random weights, once
        work.mkdir(parents=True, exist_ok=True)
        np.savez(work / "none.npz", empty=np.zeros(0))
        subprocess.run([sys.executable, str(run), str(work), "full", "0", str(work / "none.npz")],
                       check=True, env=env)
    inputs = {f"audio_{x.shape[-1]}": x[0, 0].numpy()
              for x in (clip(s, 24000, 1920) for s in args.seconds)}
    np.savez(work / "inputs.npz", **inputs)
    child: dict = {}
    ours_codes: dict = {}

    def remote(ours) -> Impl:
        child["p"] = subprocess.Popen(
            [sys.executable, str(run), "serve", str(work / "model"), str(args.threads),
             str(work / "inputs.npz"), str(work / "out.npz")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)

        def ask(op: str, x) -> Measured:
            child["p"].stdin.write(f"{op} {x}\n")
            child["p"].stdin.flush()
            answer = json.loads(child["p"].stdout.readline())
            return Measured(answer["seconds"], answer["mb"], x)

        return Impl(lambda x: ask("encode", x.shape[-1]), lambda n: ask("decode", n))

    def ours(codec) -> Impl:
        def encode(x):
            ours_codes[x.shape[-1]] = codes = codec.encode(x[0], 24000).tokens
            return codes

        return Impl(encode, codec.decode)

    def finish() -> list[dict]:
        child["p"].stdin.write("quit\n")
        child["p"].stdin.flush()
        child["p"].wait(timeout=600)
        out = dict(np.load(work / "out.npz"))
        codec = audiotok.load(work / "model")
        rows = []
        for n, codes in ours_codes.items():
            same = np.array_equal(codes[0].numpy(), out[f"codes_{n}"].T)
            with torch.inference_mode():
                audio = codec.decode(torch.from_numpy(out[f"codes_{n}"].T))[0, 0].numpy()
            onepass = float(np.abs(audio - out[f"onepass_{n}"]).max())
            chunked = float(np.abs(audio - out[f"audio_{n}"]).max())
            print(f"{n / 24000:5.1f} s: codes equal to qwen-tts: {same}; audiotok's decode "
                  f"against the reference's one decoder pass {onepass:.1e}, against its decode() "
                  f"(300-frame chunks, 25 of left context) {chunked:.1e}")
            rows.append({"seconds": n / 24000, "op": "decode difference", "codes_equal": same,
                         "onepass_max_abs": onepass, "decode_max_abs": chunked})
        return rows

    return Side(work / "model", {"qwen-tts 0.1.1": remote}, align=1920, ours=ours,
                same=lambda codes: "compared at the end", finish=finish)


def clip(seconds: float, rate: int, align: int) -> torch.Tensor:
    """[1, 1, n] float32 speech of `seconds`, cut to whole multiples of `align` samples."""
    n = int(seconds * rate) // align * align
    return torch.from_numpy(speech(seconds, rate)[:n]).float()[None, None]


def s3(args, variant: str | None) -> Side:
    """s3tokenizer 0.3.0 as its users call it: log_mel_spectrogram, padding, quantize."""
    from tests.models.s3 import reference

    variant = variant or "v2_25hz"
    path = args.workdir / f"s3_{variant}_full" / "model.pt"
    ref = reference.reference_model(variant, small=False)  # (seeded: the same weights)
    if not path.exists():
        reference.save_pt(ref, path)

    def package(ours) -> Impl:
        s3tokenizer = reference.import_s3tokenizer()

        def encode(x):
            mel, lengths = s3tokenizer.padding([s3tokenizer.log_mel_spectrogram(x[0, 0])])
            codes, n = ref.quantize(mel, lengths)
            return codes[:, None, : int(n[0])].long()

        return Impl(encode, None)

    return Side(path, {"s3tokenizer 0.3.0": package}, load={"variant": variant})


def wavtokenizer(args, variant: str | None) -> Side:
    """The released size (75 or 40 frames/s) on random weights, against the reference code
    outetts 0.4.4 vendors (WavTokenizer's own: encode_infer, codes_to_features + decode)."""
    from tests.models.wavtokenizer import reference

    spec = {"75": reference.FULL_75, "40": reference.FULL_40}[variant or "75"]
    ref = reference.build(spec)
    path = reference.save_ckpt(ref, args.workdir / f"wavtokenizer_{variant or '75'}_full"
                               / "model.ckpt")
    return Side(path, {"WavTokenizer (outetts 0.4.4)": lambda ours: Impl(
        lambda x: reference.codes(ref, x[:, 0]), lambda c: reference.decode(ref, c))})


def higgs(args, variant: str | None) -> Side:
    """The Higgs Audio v2 tokenizer at the released size on random weights, against Boson's
    code (boson-multimodal 0.1.1) and transformers' HiggsAudioV2TokenizerModel (its padding:
    ours loaded with padding="transformers" for that one's codes)."""
    from tests.models.xcodec import reference

    ref = reference.build(reference.FULL)
    hf = reference.hf_model(ref, reference.FULL)
    path = reference.save_boson(ref, reference.FULL, args.workdir / "higgs_full")
    return Side(path, {
        "Higgs (boson-multimodal 0.1.1)": lambda ours: Impl(
            lambda x: reference.codes(ref, x), lambda c: reference.decode(ref, c)),
        "Higgs (transformers 5.25)": lambda ours: Impl(
            lambda x: reference.hf_codes(hf, x), lambda c: reference.hf_decode(hf, c))})


def nanocodec(args, variant: str | None) -> Side:
    """NanoCodec 0.6 kbps at the released size on random weights, against NeMo's own modules
    (nemo_toolkit 3.0.0, as AudioCodecModel runs them)."""
    from tests.models.nanocodec import reference

    ref = reference.Codec(reference.FULL)
    path = reference.save_nemo(ref, reference.FULL, args.workdir / "nanocodec_full" /
                               "nanocodec.nemo")
    return Side(path, {"NeMo 3.0.0": lambda ours: Impl(
        lambda x: ref.encode(x[:, 0]), lambda c: ref.decode(c))})


def bicodec(args, variant: str | None) -> Side:
    """BiCodec at the released size (with XLSR-53's 24-layer wav2vec2) on random weights,
    against Spark-TTS's code (spark-tts-lib 0.2.1: BiCodecTokenizer's steps on the samples,
    BiCodec.detokenize). Codes: (semantic tokens, global tokens)."""
    from tests.models.bicodec import reference

    ref, w2v = reference.build(reference.RELEASED), reference.wav2vec2(reference.RELEASED)
    path = reference.save_folder(ref, w2v, reference.RELEASED, args.workdir / "bicodec_full")
    tok = reference.tokenizer(ref, w2v)

    def ours(codec) -> Impl:
        return Impl(lambda x: codec.encode(x[0], 16000), codec.decode)

    def spark(_) -> Impl:
        return Impl(lambda x: reference.tokenize_array(tok, x[0, 0].numpy()),
                    lambda c: ref.detokenize(c[1], c[0]))

    def same(codes: dict) -> bool:
        a, (g, s) = codes["audiotok"], codes["Spark-TTS (spark-tts-lib 0.2.1)"]
        return torch.equal(a.tokens[0], s) and torch.equal(a.globals[0], g.reshape(-1))

    return Side(path, {"Spark-TTS (spark-tts-lib 0.2.1)": spark}, ours=ours, same=same)


def _golden(file: str, keys: list[str]) -> dict:
    with np.load(ROOT / "tests" / "data" / file) as z:
        return {k: z[k] for k in keys}


def load(side: Side, dtype: torch.dtype = torch.float32):
    """audiotok's codec on the side's checkpoint."""
    codec = audiotok.load(side.path, dtype=dtype, **side.load)
    if side.setup is not None:
        side.setup(codec)
    return codec


REFERENCES: dict[str, Callable[..., Side]] = {
    "s2": s2, "xcodec2": xcodec2, "dac": dac, "dac-outetts": dac_outetts, "snac": snac,
    "mimi": mimi, "encodec": encodec,
    "neucodec": neucodec, "distill-neucodec": distill_neucodec, "qwen3-tts": qwen3_tts,
    "s3": s3, "wavtokenizer": wavtokenizer, "higgs": higgs, "nanocodec": nanocodec,
    "bicodec": bicodec,
}
# the entries --isolated runs: their references load from the checkpoint, and they name golden
# signals for the precision study
ISOLATED = ("s2", "xcodec2")
VARIANTS = {"dac": ("44khz", "24khz", "speech"), "snac": ("24khz", "32khz"),
            "encodec": ("24khz", "32khz", "48khz"),
            "s3": ("v1", "v1_25hz", "v2_25hz", "v3_25hz"), "wavtokenizer": ("75", "40")}
