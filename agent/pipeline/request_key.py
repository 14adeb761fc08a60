"""The phrase cache's exact-request key: a request as it came, looked up before any text work
(lexicon, normalizer, espeak-ng), so a repeated phrase plays without being phonemized again.

It covers the request (its document, voice, volume, speed and parameters), each chime by the
sha256 of its samples, and the generation of every voice it uses (:func:`generation`): the
model and config, the chunking, the frontend's text key (normalizer, lexicon, symbols), the
espeak-ng build and a digest of the text path's code. A change to any of them is another key,
so an entry recorded before it can no longer be reached. A hit found this way is faster than
one found by phonemizing (``bench/phrase_cache.py``). Design: docs/internals.md#the-phrase-cache.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from dataclasses import astuple
from pathlib import Path
from typing import Any, Generic, TypeVar

from agent import __version__
from agent.audio.format import AudioChunk
from agent.pipeline.jobs import SpeakRequest
from agent.text.document import Document, Sound, Speech
from agent.voice.voice import Voice

__all__ = ["Once", "generation", "request_key", "text_code_digest"]

KEY_VERSION = "exact/1"
"""Changes when what goes into the key does."""
_TEXT_PACKAGE = Path(__file__).resolve().parent.parent / "text"
T = TypeVar("T")


class Once(Generic[T]):
    """A voice or chime source of one rendering, each name looked up once: the exact key and
    the plan see the same objects, and a voice that fails to load fails once (its error is
    raised again to whoever asks for that name after)."""

    def __init__(self, look: Callable[[Any], T]) -> None:
        self._look = look
        self._seen: dict[Any, T | Exception] = {}

    def get(self, name: Any = None) -> T:
        if name not in self._seen:
            try:
                self._seen[name] = self._look(name)
            except Exception as exc:
                self._seen[name] = exc
        found = self._seen[name]
        if isinstance(found, Exception):
            raise found
        return found


def request_key(document: Document, main: Voice, voices: Once[Voice],
                chimes: Once[AudioChunk] | None, request: SpeakRequest) -> str | None:
    """The exact-request key of ``document`` said for ``request`` (``main``: its voice), or
    None when a voice or chime it names cannot be had (the full path then says why)."""
    found = {main.name: main}
    sounds: list[str] = []
    try:
        for part in document:
            if isinstance(part, Speech) and part.voice is not None:
                voice = voices.get(part.voice)
                found.setdefault(voice.name, voice)
            elif isinstance(part, Sound):
                if chimes is None:
                    return None
                sounds.append(_digest(chimes.get(part.name).audio))
        material = [KEY_VERSION, __version__, text_code_digest(), repr(document), main.name,
                    request.volume, request.speed, list(astuple(request.params)),
                    [generation(v) for v in found.values()], sounds]
        text = json.dumps(material, ensure_ascii=False)
    except Exception:  # a voice or chime the full path reports; never a wrong key
        return None
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def generation(voice: Voice) -> list[Any]:
    """What of ``voice`` shapes its audio of a text, besides the request: its name, version
    and variant, the sha256 of its model and config, its sample rate, sentence silence,
    chunking (clause splitting, stream windows) and text limit, and its frontend's text key
    and espeak-ng build."""
    bundle, frontend = voice.bundle, voice.frontend
    return [voice.name, voice.version, voice.variant, voice.sha256,
            bundle.sha256.get(bundle.config_path.name, ""), voice.sample_rate,
            voice.sentence_silence_s, list(voice.chunking), frontend.max_chars,
            frontend.text_key, frontend.phonemizer_key]


_code: list[str] = []
_code_lock = threading.Lock()


def text_code_digest() -> str:
    """A digest of the text path's source files (``agent/text``: cleaning, the lexicon, the
    normalizer, espeak-ng's wrapper, sentences and ids), so that code that phonemizes otherwise
    is another key even at the same version. Computed once per process, on first use."""
    with _code_lock:
        if not _code:
            digest = hashlib.sha256()
            for path in sorted(_TEXT_PACKAGE.rglob("*.py")):
                digest.update(path.relative_to(_TEXT_PACKAGE).as_posix().encode() + b"\0")
                digest.update(path.read_bytes() + b"\0")
            _code.append(digest.hexdigest()[:16])
    return _code[0]


_digests: dict[int, tuple[bytes, str]] = {}
"""sha256 of the chimes' samples by the bytes object's id (the entry holds the object, so its
id is not reused while the entry lives); a few only."""
_MAX_DIGESTS = 32


def _digest(audio: bytes) -> str:
    known = _digests.get(id(audio))
    if known is not None and known[0] is audio:
        return known[1]
    value = hashlib.sha256(audio).hexdigest()
    if len(_digests) >= _MAX_DIGESTS:
        _digests.clear()
    _digests[id(audio)] = (audio, value)
    return value
