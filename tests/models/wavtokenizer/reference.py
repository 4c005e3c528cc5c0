"""The WavTokenizer reference for parity tests: the code outetts 0.4.4 vendors
(`outetts/wav_tokenizer/`, the WavTokenizer repository's encoder and decoder; installed in
.refs/outetts by tests/install_references.sh) with random weights, saved as WavTokenizer's
Lightning `.ckpt` and as OuteTTS's interface folder.

The vendored code imports its own `encoder` and `decoder` as top-level packages and imports
torchaudio and loguru, which encode and decode never call: `on_path()` puts its folder on
sys.path with stand-ins for those two while the reference runs, and takes them away after
(names as common as `encoder` must not leak into the rest of the suite).

Default init leaves the AdaLayerNorm scales at 1 and shifts at 0, every bias at 0 and every
weight-norm gain equal to its direction's norm; all are randomised (each conditioning row its
own, so that the row decoding uses matters), and the codebook's rows are the encoder's latent
frames (of noise) plus noise, so that the search picks among many rows."""

from __future__ import annotations

import contextlib
import importlib
import importlib.machinery
import json
import os
import sys
import types
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[3]
REFS = Path(os.environ.get("AUDIOTOK_OUTETTS_REF", ROOT / ".refs" / "outetts"))
FOLDER = REFS / "outetts" / "wav_tokenizer"
# the vendored code's top-level packages, and its own folder as a package (its __init__ would
# put its folders on sys.path for good)
OWN = ("encoder", "decoder", "wt_interface")

# (dowmsamples, vq_bins, backbone dim, intermediate, layers, n_fft)
TINY = ((8, 5, 4, 2), 512, 64, 96, 2, 1280)
TINY_40 = ((6, 5, 5, 4), 256, 64, 128, 1, 2400)
FULL_75 = ((8, 5, 4, 2), 4096, 768, 2304, 12, 1280)
FULL_40 = ((6, 5, 5, 4), 4096, 768, 2304, 12, 2400)

_modules: dict[str, types.ModuleType] = {}


def _stand_ins() -> dict[str, types.ModuleType]:
    ta = types.ModuleType("torchaudio")
    fn = types.ModuleType("torchaudio.functional")
    fnfn = types.ModuleType("torchaudio.functional.functional")
    fnfn._hz_to_mel = fnfn._mel_to_hz = None  # (the IMDCT heads' init only)
    tr = types.ModuleType("torchaudio.transforms")
    ta.functional, fn.functional, ta.transforms = fn, fnfn, tr
    log = types.ModuleType("loguru")
    log.logger = types.SimpleNamespace(info=print, warning=print)
    return {"torchaudio": ta, "torchaudio.functional": fn,
            "torchaudio.functional.functional": fnfn, "torchaudio.transforms": tr,
            "loguru": log}


@contextlib.contextmanager
def on_path():
    """The vendored code importable (its folder on sys.path, its modules and the stand-ins in
    sys.modules) for the duration; everything put back after."""
    if not FOLDER.is_dir():
        import pytest

        pytest.skip(f"the WavTokenizer oracle is not installed (tests/install_references.sh "
                    f"puts outetts 0.4.4 in {REFS})")
    ours = {k: v for k, v in sys.modules.items() if k.split(".")[0] in OWN}
    added = {**_stand_ins(), **_modules}
    saved = {k: sys.modules.get(k) for k in added}
    for k in ours:
        del sys.modules[k]
    sys.modules.update(added)
    if "wt_interface" not in sys.modules:
        package = types.ModuleType("wt_interface")
        package.__path__ = [str(FOLDER)]
        package.__spec__ = importlib.machinery.ModuleSpec("wt_interface", None, is_package=True)
        sys.modules["wt_interface"] = package
    paths = [str(FOLDER), str(FOLDER / "decoder"), str(FOLDER / "encoder")]
    sys.path[:0] = paths
    try:
        yield
    finally:
        for p in paths:
            sys.path.remove(p)
        for k, v in list(sys.modules.items()):
            if k.split(".")[0] in OWN:
                _modules[k] = v
                del sys.modules[k]
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
        sys.modules.update(ours)


def load(name: str):
    """A module of the vendored code (call inside on_path())."""
    return importlib.import_module(name)


def build(spec=TINY, seed: int = 0):
    """The reference model (decoder.pretrained.WavTokenizer: feature_extractor, backbone,
    head) on random weights, in eval mode."""
    ratios, bins, dim, hidden, layers, n_fft = spec
    with on_path():
        fe = load("decoder.feature_extractors")
        models, heads, pretrained = (load("decoder.models"), load("decoder.heads"),
                                     load("decoder.pretrained"))
        torch.manual_seed(seed)
        with contextlib.redirect_stdout(None):  # ("making attention of type 'vanilla'")
            model = pretrained.WavTokenizer(
                fe.EncodecFeatures(bandwidths=[6.6] * 4, train_codebooks=True, num_quantizers=1,
                                   dowmsamples=list(ratios), vq_bins=bins, vq_kmeans=200),
                models.VocosBackbone(input_channels=512, dim=dim, intermediate_dim=hidden,
                                     num_layers=layers, adanorm_num_embeddings=4),
                heads.ISTFTHead(dim=dim, n_fft=n_fft, hop_length=n_fft // 4, padding="same"))
    model.eval()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("weight_g"):
                p.mul_(0.5 + torch.rand(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.02 * torch.randn(p.shape, generator=g))
            elif name.endswith(("scale.weight", "gamma")) or \
                    (name.endswith("weight") and p.dim() == 1):  # norms' gains
                p.copy_(0.5 + torch.rand(p.shape, generator=g))
            elif name.endswith("shift.weight"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
        frames = model.feature_extractor.encodec.encoder(
            0.1 * torch.randn(1, 1, 48000, generator=g))[0].T  # [T, D]
        book = model.feature_extractor.encodec.quantizer.vq.layers[0]._codebook
        pick = torch.randint(0, frames.shape[0], (book.embed.shape[0],), generator=g)
        noise = torch.randn(book.embed.shape, generator=g) * frames.std(0)
        book.embed.copy_(frames[pick] + 0.5 * noise)
        book.inited.fill_(1)  # (else the first forward k-means-initialises it from its input)
    return model


def codes(model, audio: torch.Tensor) -> torch.Tensor:
    """The reference's codes [B, 1, T] of audio [B, N] (encode_infer, bandwidth id 0)."""
    with on_path(), torch.inference_mode():
        _, c = model.encode_infer(audio, bandwidth_id=torch.tensor([0]))
    return c.transpose(0, 1)


def decode(model, codes: torch.Tensor) -> torch.Tensor:
    """The reference's audio [B, N] of codes [B, 1, T] (codes_to_features, decode)."""
    with on_path(), torch.inference_mode():
        features = model.codes_to_features(codes.transpose(0, 1))
        return model.decode(features, bandwidth_id=torch.tensor([0]))


def save_ckpt(model, path: Path) -> Path:
    """As the reference's training saves it: a Lightning checkpoint whose state_dict also holds
    training-only tensors (a discriminator's, the unused SEANet decoder's are already in)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sd = dict(model.state_dict())
    sd["multiperioddisc.discriminators.0.convs.0.weight"] = torch.randn(4, 1, 5, 1)
    sd["melspec_loss.mel_spec.mel_scale.fb"] = torch.randn(3, 4)
    torch.save({"epoch": 7, "global_step": 1000, "pytorch-lightning_version": "1.8.6",
                "state_dict": sd, "hparams_name": "kwargs",
                "hyper_parameters": {"sample_rate": 24000, "initial_learning_rate": 2e-4,
                                     "resume_config": "configs/x.yaml"}}, path)
    return path


def save_interface(model, folder: Path, spec=TINY) -> Path:
    """As OuteTTS's interface repository (wav_tokenizer/model.py's save_pretrained; its
    config.json files name the released sizes, so they are rewritten with `spec`'s)."""
    ratios, bins, dim, hidden, layers, n_fft = spec
    with on_path():
        own = load("wt_interface.model")
        book = torch.cat([vq.codebook for vq in
                          model.feature_extractor.encodec.quantizer.vq.layers], 0)
        own.WavEncoder(model.feature_extractor).save_pretrained(str(folder / "encoder"))
        own.WavDecoder(model.backbone, model.head, book).save_pretrained(str(folder / "decoder"))
    enc, dec = (folder / "encoder" / "config.json"), (folder / "decoder" / "config.json")
    config = json.loads(enc.read_text())
    config["feature_extractor_config"].update(dowmsamples=list(ratios), vq_bins=bins)
    enc.write_text(json.dumps(config))
    config = json.loads(dec.read_text())
    config["backbone_config"].update(dim=dim, intermediate_dim=hidden, num_layers=layers)
    config["head_config"].update(dim=dim, n_fft=n_fft, hop_length=n_fft // 4)
    dec.write_text(json.dumps(config))
    return folder


def interface_codec(folder: Path):
    """OuteTTS's own AudioCodec over an interface folder (its encode and decode)."""
    with on_path():
        codec = load("wt_interface.audio_codec").AudioCodec(device="cpu", model_path=str(folder))
    return codec


def prompt_processor(tokenizer_folder: Path):
    """OuteTTS 0.2/0.3's PromptProcessor (outetts/version/v2/prompt_processor.py) over a
    tokenizer folder; what its text processing imports (MeCab, inflect, uroman, loguru), which
    reading audio ids never calls, stood in for while it loads."""
    name = "outetts.version.v2.prompt_processor"
    if name not in sys.modules:
        if not FOLDER.is_dir():
            import pytest

            pytest.skip(f"OuteTTS is not installed in {REFS} (tests/install_references.sh)")
        for package, path in (("outetts", REFS / "outetts"),
                              ("outetts.version", REFS / "outetts" / "version"),
                              ("outetts.version.v2", REFS / "outetts" / "version" / "v2")):
            if package not in sys.modules:
                module = types.ModuleType(package)
                module.__spec__ = importlib.machinery.ModuleSpec(package, None, is_package=True)
                module.__path__ = [str(path)]
                sys.modules[package] = module
        mecab, inflect, uroman = (types.ModuleType(n) for n in ("MeCab", "inflect", "uroman"))
        mecab.Tagger = inflect.engine = uroman.Uroman = lambda *a: None  # (made in __init__)
        stand_ins = {"MeCab": mecab, "inflect": inflect, "uroman": uroman,
                     "loguru": _stand_ins()["loguru"]}
        saved = {k: sys.modules.get(k) for k in stand_ins}
        sys.modules.update(stand_ins)
        try:
            importlib.import_module(name)
        finally:
            for k, v in saved.items():
                if v is None:
                    del sys.modules[k]
                else:
                    sys.modules[k] = v
    return sys.modules[name].PromptProcessor(str(tokenizer_folder))
