"""CosyVoice's S3 ("supervised semantic speech") tokenizer: 16 kHz speech -> one stream of
semantic tokens. v1 (50 Hz, 4096, CosyVoice 1), v1_25hz (25 Hz, 4096, CosyVoice-300M-25Hz,
Step-Audio), v2 (25 Hz, 6561 FSQ: CosyVoice 2, Chatterbox, Step-Audio 2, MiniCPM-o) and v3
(25 Hz, 6561, 12 layers: Fun-CosyVoice 3). Encode only: S3 tokens turn back into audio through
a flow-matching token-to-audio model conditioned on a voice, not through this tokenizer.

The family's declaration (models/family.py); the model code is imported on first load."""

from ..family import Checkpoint, Family, LoadOption, Preset


def _detect(checkpoint: Checkpoint) -> bool:
    """The official ONNX files (a lone .onnx file: audiotok's own exports are folders with a
    manifest), a folder holding one (CosyVoice 2's, with flow.pt and hift.pt beside it) or
    Chatterbox's s3gen file, s3tokenizer state dicts (.pt) and Chatterbox's s3gen safetensors
    (by tensor names)."""
    if checkpoint.path.is_dir() and not checkpoint.weights.is_file():
        return checkpoint.has("speech_tokenizer_v*.onnx", "s3gen*.safetensors")
    if checkpoint.suffix == ".onnx":
        return checkpoint.path.is_file() and not checkpoint.has("manifest.json")
    names = set(checkpoint.tensor_names)
    return "encoder.conv1.weight" in names and any(
        n.startswith("quantizer._codebook.") for n in names) or \
        "tokenizer.encoder.conv1.weight" in names


FAMILY = Family(
    name="s3",
    title="CosyVoice S3 tokenizer",
    licence="as each repository states: Fun-CosyVoice3-0.5B-2512 Apache-2.0 (its model card "
            "adds an academic-use disclaimer); ResembleAI/chatterbox MIT; CosyVoice-300M, "
            "-300M-25Hz and CosyVoice2-0.5B state no licence on the hub: ask FunAudioLLM "
            "before commercial use",
    codec=".codec:S3Codec",
    package=__name__,
    presets=(
        Preset("s3-v1", "FunAudioLLM/CosyVoice-300M", ("speech_tokenizer_v1.onnx",)),
        Preset("s3-v1-25hz", "FunAudioLLM/CosyVoice-300M-25Hz", ("speech_tokenizer_v1.onnx",)),
        Preset("s3-v2", "FunAudioLLM/CosyVoice2-0.5B", ("speech_tokenizer_v2.onnx",)),
        # the tokenizer with CosyVoice 2's token-to-audio decoder (flow and HiFT vocoder) and
        # its speaker encoder, which makes voices
        Preset("s3-v2-token2wav", "FunAudioLLM/CosyVoice2-0.5B",
               ("speech_tokenizer_v2.onnx", "flow.pt", "hift.pt", "campplus.onnx")),
        Preset("s3-v3", "FunAudioLLM/Fun-CosyVoice3-0.5B-2512", ("speech_tokenizer_v3.onnx",)),
        Preset("s3-step-audio", "stepfun-ai/Step-Audio-Tokenizer", ("speech_tokenizer_v1.onnx",)),
        Preset("s3-chatterbox", "ResembleAI/chatterbox", ("s3gen.safetensors",)),
    ),
    detect=_detect,
    onnx=".onnx:onnx_graphs",
    llm_schemes={"cosyvoice": ".llm:CosyVoiceIds", "cosyvoice2": ".llm:CosyVoice2Ids",
                 "cosyvoice3": ".llm:CosyVoice3Ids", "chatterbox": ".llm:ChatterboxIds",
                 "step-audio2": ".llm:StepAudio2Ids"},
    options={"variant": LoadOption("the S3 variant of weights that do not say it: v1 (50 Hz), "
                                   "v1_25hz, v2_25hz, v3_25hz"),
             "merge": LoadOption("how inputs over 30 s merge their 30 s windows (every 26 s): "
                                 "s3tokenizer (as s3tokenizer merges them, the default; an input "
                                 "whose last window lies in the previous one's overlap loses up "
                                 "to 2 s of tokens) or lossless (every token kept)")},
)
