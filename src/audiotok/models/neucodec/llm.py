"""NeuTTS's token ids for NeuCodec: `<|speech_i|>` tokens of the backbone's tokenizer framed by
`<|SPEECH_GENERATION_START|>` and `<|SPEECH_GENERATION_END|>` (neutts 1.4.1 `neutts.py`: the
prompt ends with the start marker and the reference codes, generation stops at the end
marker, codes are read back with the pattern `<\\|speech_(\\d+)\\|>`). Llasa's layout with other
token names (models/xcodec2/llm.py)."""

from __future__ import annotations

import re

from ..xcodec2.llm import LlasaIds


class NeuTTSIds(LlasaIds):
    """NeuTTS: `<|speech_i|>` ids framed by the speech generation start and end markers."""

    name = "neutts"
    summary = "NeuTTS: <|speech_i|> ids framed by the speech start/end markers"
    TEMPLATE = "<|speech_{}|>"
    PATTERN = re.compile(r"<\|speech_(\d+)\|>")
    WHAT = "a <|speech_i|> token"

    def describe(self) -> dict:
        return {"scheme": self.name, "speech_begin_id": self.begin, "start_id": self.start,
                "end_id": self.stop}
