#!/usr/bin/env bash
# The reference packages the parity tests compare against, into the active environment (run
# after `pip install -e '.[test]'`). Each goes in without its dependencies: their metadata pins
# old torch versions or torchaudio, which the tests stand in for (tests/models/dac/stand_ins).
set -euo pipefail
cd "$(dirname "$0")/.."
pip install -q --no-deps moshi==0.2.13  # the Mimi oracle; its metadata pins torch<2.10
pip install -q --no-deps descript-audio-codec==1.0.0  # DAC's (needs torchaudio, audiotools)
pip install -q --no-deps encodec==0.1.1  # EnCodec's (imports torchaudio)
pip install -q --no-deps s3tokenizer==0.3.0  # the S3 tokenizer's (declares torchaudio)
# OuteTTS 1.0's DAC.speech pipeline (outetts/dac/interface.py, loaded by path: `import outetts`
# needs llama-cpp-python, polars, whisper ...), in a folder of its own
pip install -q --no-deps --target .refs/outetts outetts==0.4.4
# the Qwen3-TTS tokenizer's oracle: qwen-tts with the transformers it pins (4.57.3), in a folder
# of its own that only its reference runs put on their path (the suite's transformers is newer)
pip install -q --no-deps --target .refs/qwen-tts qwen-tts==0.1.1 transformers==4.57.3 \
    huggingface_hub==0.36.0 tokenizers==0.22.1
# the NeuCodec oracle: neucodec with the packages it imports (torchtune imports omegaconf,
# tiktoken and frozendict), in a folder the NeuCodec tests append to their path
pip install -q --no-deps --target .refs/neucodec neucodec==0.0.6 vector-quantize-pytorch==1.17.8 \
    local-attention==1.11.2 torchtune==0.6.1 torchao==0.14.1 einx==0.4.3 \
    hyper-connections==0.4.11 omegaconf==2.4.0 tiktoken==0.14.0 frozendict==2.5.1
# the S3 token-to-audio oracles: Chatterbox's S3Gen (chatterbox-tts) and CosyVoice 2's flow and
# HiFT (cosyvoice-minicpmo ships CosyVoice's code) with what they import, in a folder their
# tests import from (tests/models/s3/t2w_reference.py); torchaudio's wheel is a CUDA build whose
# native library does not load here: without it, torchaudio runs in pure Python (its Kaldi
# filterbank, CAMPPlus's front end in Chatterbox)
pip install -q --no-deps --target .refs/s3gen chatterbox-tts==0.1.7 cosyvoice-minicpmo==0.1.0 \
    torchaudio==2.11.0 conformer==0.3.2 diffusers==0.29.0 omegaconf==2.4.0 \
    antlr4-python3-runtime==4.9.3
rm -f .refs/s3gen/torchaudio/lib/*.so
# the Higgs Audio v2 tokenizer's oracle: Boson's code (boson-multimodal pins transformers<4.47;
# its tokenizer module runs with ours), in a folder its tests import from; the FSQ and training
# modules it imports are stood in for (tests/models/xcodec/reference.py)
pip install -q --no-deps --target .refs/higgs boson-multimodal==0.1.1
# NanoCodec's oracle: NeMo's codec modules (nemo_toolkit; `import nemo` needs lightning, hydra
# and the ASR stack: tests/models/nanocodec/reference.py loads the two module files by path
# with stand-ins for what they import), in a folder of its own
pip install -q --no-deps --target .refs/nemo nemo_toolkit==3.0.0
# Kani-TTS's token handling (kani_tts/core.py, loaded by path with stand-ins for NeMo and its
# model: tests/models/nanocodec/test_llm.py)
pip install -q --no-deps --target .refs/kani kani-tts==1.0.1
# BiCodec's oracle: Spark-TTS's code as spark-tts-lib ships it, with what its codec modules
# import (einx, omegaconf, retrying; torchaudio pure Python as above), in a folder of its own
# (tests/models/bicodec/reference.py imports its modules without the package's __init__)
pip install -q --no-deps --target .refs/spark spark-tts-lib==0.2.1 einx==0.4.3 \
    frozendict==2.5.1 omegaconf==2.4.0 antlr4-python3-runtime==4.9.3 retrying==1.4.2 \
    torchaudio==2.11.0
rm -f .refs/spark/torchaudio/lib/*.so
