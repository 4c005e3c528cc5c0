"""The X-Codec family: Higgs Audio v2's tokenizer (24 kHz mono, 8 codebooks of 1024 at 25
frames/s; Higgs Audio v2, OmniVoice) and X-Codec v1 (16 kHz, 8 of 1024 at 50 frames/s; YuE);
a DAC encoder and a HuBERT semantic branch, a Euclidean residual VQ, a DAC decoder; not causal.

The family's declaration (models/family.py); the model code is imported on first load."""

from ..family import Checkpoint, Family, LoadOption, Preset

HF_TYPES = ("higgs_audio_v2_tokenizer", "xcodec")


def _detect(checkpoint: Checkpoint) -> bool:
    """transformers' config (model_type higgs_audio_v2_tokenizer or xcodec); Boson's folder
    (config.json naming its `semantic_techer`, model.pth) or its model.pth."""
    config = checkpoint.config
    if config.get("model_type") in HF_TYPES:
        return True
    if "semantic_techer" not in config:
        return False
    if checkpoint.path.is_dir():
        return (checkpoint.path / "model.pth").is_file()
    return checkpoint.path.suffix == ".pth"


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
    ),
    detect=_detect,
    onnx=".onnx:onnx_graphs",
    llm_schemes={"higgs-audio-v2": ".llm:HiggsIds"},
    options={"codebooks": LoadOption("codebooks encode gives (1..8; default all: Higgs 2 kbps, "
                                     "X-Codec 4 kbps)", int),
             "padding": LoadOption("how lengths whose two branches differ are encoded: boson "
                                   "(160 x 2 zeros each side, the longer branch cut: Boson's "
                                   "code, Higgs Audio v2's training; the default) or "
                                   "transformers (hop / 2 zeros each side: transformers' "
                                   "HiggsAudioV2TokenizerModel); the same for X-Codec")},
)
