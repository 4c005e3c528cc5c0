"""The X-Codec family: Higgs Audio v2's tokenizer (24 kHz mono, 8 codebooks of 1024 at 25
frames/s; Higgs Audio v2, OmniVoice) and X-Codec v1 (16 kHz, 8 of 1024 at 50 frames/s; YuE's
has 12);
a DAC encoder and a HuBERT (or WavLM) semantic branch, a Euclidean residual VQ, a DAC decoder;
not causal.

The family's declaration (models/family.py); the model code is imported on first load."""

from pathlib import Path

from ..family import Checkpoint, Family, LoadOption, Preset

HF_TYPES = ("higgs_audio_v2_tokenizer", "xcodec")


def soundstream_config(folder: Path) -> dict | None:
    """X-Codec's yaml beside its .pth (its training config: `generator: {name: SoundStream,
    config: {...}}`; X-Codec's repository and YuE's xcodec_mini_infer): `config.yaml`, else the
    folder's only yaml; its generator config, or None."""
    files = [folder / "config.yaml"] if (folder / "config.yaml").is_file() else \
        sorted(folder.glob("*.yaml"))
    if len(files) != 1:
        return None
    import yaml

    try:
        d = yaml.safe_load(files[0].read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    generator = d.get("generator") if isinstance(d, dict) else None
    if not isinstance(generator, dict) or generator.get("name") != "SoundStream" or \
            not isinstance(generator.get("config"), dict):
        return None
    return generator["config"]


def _detect(checkpoint: Checkpoint) -> bool:
    """transformers' config (model_type higgs_audio_v2_tokenizer or xcodec); Boson's folder
    (config.json naming its `semantic_techer`, model.pth) or its model.pth; X-Codec's or YuE's
    .pth beside their SoundStream yaml (or a folder of them)."""
    config, path = checkpoint.config, checkpoint.path
    if config.get("model_type") in HF_TYPES:
        return True
    folder = path if path.is_dir() else path.parent
    if not path.is_dir() and path.suffix != ".pth":
        return False
    if "semantic_techer" in config:
        return not path.is_dir() or (path / "model.pth").is_file()
    return soundstream_config(folder) is not None and \
        (not path.is_dir() or any(folder.glob("*.pth")))


FAMILY = Family(
    name="xcodec",
    title="X-Codec (Higgs Audio v2 tokenizer, X-Codec)",
    licence="Higgs Audio v2 tokenizer: Boson Higgs Audio 2 Community License; X-Codec: not "
            "stated (see the codec's notice)",
    codec=".codec:XCodecCodec",
    package=__name__,
    presets=(
        Preset("higgs-audio-v2-tokenizer", "bosonai/higgs-audio-v2-tokenizer",
               ("model.pth", "config.json")),
        Preset("xcodec-hubert-general", "hf-audio/xcodec-hubert-general",
               ("model.safetensors", "config.json")),
        Preset("xcodec-hubert-librispeech", "hf-audio/xcodec-hubert-librispeech",
               ("model.safetensors", "config.json")),
        Preset("xcodec-wavlm-mls", "hf-audio/xcodec-wavlm-mls",
               ("model.safetensors", "config.json")),
        Preset("xcodec-wavlm-more-data", "hf-audio/xcodec-wavlm-more-data",
               ("model.safetensors", "config.json")),
        Preset("xcodec-yue", "m-a-p/xcodec_mini_infer",
               ("final_ckpt/ckpt_00360000.pth", "final_ckpt/config.yaml")),
    ),
    detect=_detect,
    onnx=".onnx:onnx_graphs",
    llm_schemes={"higgs-audio-v2": ".llm:HiggsIds", "yue-stage1": ".llm:YueStage1Ids",
                 "yue-stage2": ".llm:YueStage2Ids"},
    options={"codebooks": LoadOption("codebooks encode gives (1..8, YuE's 1..12; default all: "
                                     "Higgs 2 kbps, X-Codec 4 kbps, YuE 6 kbps)", int),
             "padding": LoadOption("how lengths whose two branches differ are encoded: boson "
                                   "(160 x 2 zeros each side, the longer branch cut: Boson's "
                                   "code, Higgs Audio v2's training; the default) or "
                                   "transformers (hop / 2 zeros each side: transformers' "
                                   "HiggsAudioV2TokenizerModel); the same for X-Codec")},
)
