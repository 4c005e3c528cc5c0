"""Voices the server keeps, for models that decode in one (a codec's decode_conditioning: S3
tokens' token-to-audio). A voice is made once from uploaded prompt speech (POST /v1/voices) and
named by an id that decode requests pass (`voice=ID`); at most `max_voices` are kept, each from
at most `max_voice_seconds` of speech, in memory only (gone on restart)."""

from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass

from .errors import EngineBusy, EngineError, HTTPError


@dataclass(frozen=True)
class StoredVoice:
    id: str
    model: str
    voice: object  # what the model's codec.make_voice made
    seconds: float  # of prompt speech

    def facts(self) -> dict:
        return {"voice": self.id, "model": self.model, "seconds": round(self.seconds, 3),
                "prompt_tokens": int(self.voice.prompt_tokens)}


class Voices:
    def __init__(self, max_voices: int, max_seconds: float):
        self.max_voices, self.max_seconds = max_voices, max_seconds
        self._voices: dict[str, StoredVoice] = {}
        self._lock = threading.Lock()

    def add(self, model: str, codec, audio, rate: int) -> StoredVoice:
        """Make a voice of `model` from prompt speech [n] at `rate` and keep it."""
        if "voice" not in codec.decode_conditioning:
            raise EngineError(f"model {model!r} ({codec.title}) decodes without a voice")
        seconds = audio.shape[-1] / rate
        if seconds > self.max_seconds:
            raise HTTPError(413, f"a voice prompt of {seconds:.2f} s is over the limit of "
                                 f"{self.max_seconds:g} s")
        with self._lock:
            self._check_room()
        voice = codec.make_voice(audio, rate)  # (outside the lock: it runs the models)
        stored = StoredVoice(secrets.token_hex(8), model, voice, seconds)
        with self._lock:
            self._check_room()
            self._voices[stored.id] = stored
        return stored

    def _check_room(self) -> None:
        if len(self._voices) >= self.max_voices:
            raise EngineBusy(f"the server keeps {len(self._voices)} voices (max_voices "
                             f"{self.max_voices}); delete one first (DELETE /v1/voices/ID)")

    def get(self, voice_id: str) -> StoredVoice:
        with self._lock:
            stored = self._voices.get(voice_id)
        if stored is None:
            raise HTTPError(404, f"unknown voice {voice_id!r}")
        return stored

    def remove(self, voice_id: str) -> StoredVoice:
        with self._lock:
            stored = self._voices.pop(voice_id, None)
        if stored is None:
            raise HTTPError(404, f"unknown voice {voice_id!r}")
        return stored

    def list(self) -> list[dict]:
        with self._lock:
            return [v.facts() for v in self._voices.values()]

    def conditioning(self, model: str, codec, voice_id: str | None) -> dict:
        """decode()'s keywords for a request to `model` that names `voice_id` (or none)."""
        if "voice" not in codec.decode_conditioning:
            if voice_id is not None:
                raise EngineError(f"model {model!r} ({codec.title}) decodes without a voice")
            return {}
        if voice_id is None:
            raise EngineError(f"model {model!r} ({codec.title}) decodes in a voice: upload "
                              "prompt speech to /v1/voices?model=... and pass voice=ID")
        stored = self.get(voice_id)
        if stored.model != model:
            raise EngineError(f"voice {voice_id!r} belongs to model {stored.model!r}, not "
                              f"{model!r}")
        return {"voice": stored.voice}
