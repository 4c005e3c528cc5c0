"""NVIDIA NanoCodec (NeMo): 22.05 kHz mono; 0.6 kbps (4 FSQ codebooks of 4032 at 12.5
frames/s: Kani-TTS's codec), 1.78 kbps (13 of 2016 at 12.5) and 1.89 kbps (8 of 2016 at 21.5);
a non-causal HiFi-GAN encoder and a causal HiFi-GAN decoder.

The family's declaration (models/family.py); the model code is imported on first load."""

from ..family import Checkpoint, Family, Preset

REPOS = {"nanocodec-0.6kbps": "nvidia/nemo-nano-codec-22khz-0.6kbps-12.5fps",
         "nanocodec-1.78kbps": "nvidia/nemo-nano-codec-22khz-1.78kbps-12.5fps",
         "nanocodec-1.89kbps": "nvidia/nemo-nano-codec-22khz-1.89kbps-21.5fps"}


def _detect(checkpoint: Checkpoint) -> bool:
    """A .nemo file (or a folder holding one) whose config names NeMo's HiFi-GAN codec
    modules."""
    path = checkpoint.path
    files = sorted(path.glob("*.nemo")) if path.is_dir() else [path]
    return any(f.suffix == ".nemo" and _is_nanocodec(f) for f in files if f.is_file())


def _is_nanocodec(path) -> bool:
    import tarfile

    try:
        with tarfile.open(path, "r:*") as tar:
            for m in tar.getmembers():
                if m.name.removeprefix("./") == "model_config.yaml":
                    text = tar.extractfile(m).read(1 << 20).decode("utf-8", "replace")
                    return "CausalHiFiGANDecoder" in text and "FiniteScalarQuantizer" in text
    except (tarfile.TarError, OSError, EOFError):
        return False
    return False


FAMILY = Family(
    name="nanocodec",
    title="NVIDIA NanoCodec",
    licence="NVIDIA Open Model License (the nvidia/nemo-nano-codec-22khz-* model cards; "
            "NeMo's code: Apache-2.0)",
    codec=".codec:NanoCodecCodec",
    package=__name__,
    presets=tuple(Preset(name, repo, (repo.split("/")[1] + ".nemo",))
                  for name, repo in REPOS.items()),
    detect=_detect,
    onnx=".onnx:onnx_graphs",
    llm_schemes={"kani-tts": ".llm:KaniIds"},
)
