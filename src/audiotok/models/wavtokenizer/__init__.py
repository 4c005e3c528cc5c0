"""WavTokenizer: 24 kHz mono, one codebook of 4096 at 75 frames/s (hop 320) or 40 frames/s
(hop 600); a SEANet encoder and a Vocos decoder with attention over the whole input; not
causal. The codec of OuteTTS 0.2/0.3 and llama.cpp's TTS example.

The family's declaration (models/family.py); the model code is imported on first load."""

from pathlib import Path

from ..family import Checkpoint, Family, Preset

CODEBOOK = "feature_extractor.encodec.quantizer.vq.layers.0._codebook.embed"
INTERFACE = ("encoder/encoder_model.pt", "decoder/decoder_model.pt")


def reference_names(names) -> bool:
    """Whether tensor names are the reference's (a .ckpt's state_dict: its codebook and the
    decoder's pos net)."""
    names = set(names)
    return CODEBOOK in names and any(n.startswith("backbone.pos_net.") for n in names)


def _detect(checkpoint: Checkpoint) -> bool:
    """The reference's Lightning .ckpt (by its tensor names; or a folder holding one), OuteTTS's
    interface folder (encoder/encoder_model.pt + decoder/decoder_model.pt) or its encoder
    file inside one."""
    path = checkpoint.path
    if path.is_dir():
        if all((path / f).is_file() for f in INTERFACE):
            return True
        return any(reference_names(Checkpoint(f).tensor_names)
                   for f in sorted(path.glob("*.ckpt")) if f.is_file())
    if path.name == Path(INTERFACE[0]).name:
        return (path.parent.parent / INTERFACE[1]).is_file() and \
            CODEBOOK in checkpoint.tensor_names
    return checkpoint.suffix == ".ckpt" and reference_names(checkpoint.tensor_names)


FAMILY = Family(
    name="wavtokenizer",
    title="WavTokenizer",
    licence="MIT licence (https://github.com/jishengpeng/WavTokenizer, the novateur/"
            "WavTokenizer model cards)",
    codec=".codec:WavTokenizerCodec",
    package=__name__,
    presets=(
        Preset("wavtokenizer-large-75", "novateur/WavTokenizer-large-speech-75token",
               ("wavtokenizer_large_speech_320_24k.ckpt",)),
        Preset("wavtokenizer-large-40", "novateur/WavTokenizer-large-unify-40token",
               ("wavtokenizer_large_unify_600_24k.ckpt",)),
        Preset("wavtokenizer-small-75", "novateur/WavTokenizer",
               ("WavTokenizer_small_320_24k_4096.ckpt",)),
        Preset("wavtokenizer-small-40", "novateur/WavTokenizer",
               ("WavTokenizer_small_600_24k_4096.ckpt",)),
        Preset("wavtokenizer-outetts", "OuteAI/wavtokenizer-large-75token-interface",
               INTERFACE),
    ),
    detect=_detect,
    onnx=".onnx:onnx_graphs",
    llm_schemes={"outetts-v2": ".llm:OuteTtsV2Ids"},
)
