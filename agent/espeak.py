"""espeak-ng through ctypes: the system ``libespeak-ng1`` (Debian/Ubuntu/Raspberry Pi OS).

Why the system library: it is packaged for x86_64 and aarch64 alike, security-updated by
the distribution, and needs no compiler. Wheels that carry their own espeak-ng exist only for
x86_64 (espeakng-loader) or are GPL runtimes we must not depend on (piper-tts). How close its
phonemes come to the ones the voice was trained on is measured by ``bench/phoneme_parity.py``.

espeak-ng keeps global state and is not thread-safe, so every call goes through one lock.
``espeak_TextToPhonemes`` phonemizes one clause per call and advances the text pointer; the
clause's terminating punctuation is recovered from the text it consumed (the system library
has no ``TextToPhonemesWithTerminator``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
from dataclasses import dataclass

__all__ = ["Clause", "EspeakError", "EspeakPhonemizer"]

_AUDIO_OUTPUT_SYNCHRONOUS = 2
_INITIALIZE_DONT_EXIT = 0x8000
_CHARS_UTF8 = 1
_PHONEMES_IPA = 0x02
_EE_OK = 0

SENTENCE_TERMINATORS = frozenset(".?!")
CLAUSE_TERMINATORS = frozenset(",:;") | SENTENCE_TERMINATORS
_CLOSERS = "\"')]}»”’ \t\n"


class EspeakError(RuntimeError):
    """espeak-ng could not be loaded or refused a request."""


@dataclass(frozen=True, slots=True)
class Clause:
    """One clause as espeak-ng segmented it."""

    text: str
    """The source text of the clause (stripped)."""
    phonemes: str
    """IPA phonemes, words separated by spaces, language-switch flags removed."""
    terminator: str
    """The punctuation that ended the clause (one of ``.?!,:;``) or ``""``."""
    end_of_sentence: bool
    """True when the clause ends a sentence."""


def _load_library() -> ctypes.CDLL:
    names = [ctypes.util.find_library("espeak-ng"), "libespeak-ng.so.1", "libespeak-ng.so"]
    errors = []
    for name in names:
        if not name:
            continue
        try:
            return ctypes.CDLL(name)
        except OSError as exc:
            errors.append(str(exc))
    raise EspeakError(
        "libespeak-ng not found; install the libespeak-ng1 package (./build.sh does)"
        + (f" ({'; '.join(errors)})" if errors else "")
    )


def _terminator(consumed: str) -> str:
    tail = consumed.rstrip(_CLOSERS)
    if tail.endswith(("...", "…")):
        return ""
    return tail[-1] if tail and tail[-1] in CLAUSE_TERMINATORS else ""


class EspeakPhonemizer:
    """Text to IPA clauses with espeak-ng. One instance per process is enough."""

    _lock = threading.Lock()
    _lib: ctypes.CDLL | None = None

    def __init__(self, voice: str) -> None:
        self.voice = voice
        with self._lock:
            if EspeakPhonemizer._lib is None:
                lib = _load_library()
                lib.espeak_Initialize.restype = ctypes.c_int
                lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p,
                                                  ctypes.c_int]
                lib.espeak_SetVoiceByName.restype = ctypes.c_int
                lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
                lib.espeak_TextToPhonemes.restype = ctypes.c_char_p
                lib.espeak_TextToPhonemes.argtypes = [ctypes.POINTER(ctypes.c_void_p),
                                                      ctypes.c_int, ctypes.c_int]
                rate = lib.espeak_Initialize(_AUDIO_OUTPUT_SYNCHRONOUS, 0, None,
                                             _INITIALIZE_DONT_EXIT)
                if rate <= 0:
                    raise EspeakError("espeak_Initialize failed (is espeak-ng-data installed?)")
                EspeakPhonemizer._lib = lib
            self._select_voice()

    def _select_voice(self) -> None:
        assert self._lib is not None
        if self._lib.espeak_SetVoiceByName(self.voice.encode()) != _EE_OK:
            raise EspeakError(f"espeak-ng has no voice {self.voice!r}")

    def clauses(self, text: str) -> list[Clause]:
        """Phonemize ``text`` (already normalised) clause by clause."""
        encoded = text.encode("utf-8")
        buffer = ctypes.create_string_buffer(encoded)
        base = ctypes.addressof(buffer)
        pointer = ctypes.c_void_p(base)
        out: list[Clause] = []
        with self._lock:
            assert self._lib is not None
            self._select_voice()
            start = 0
            while pointer.value is not None:
                raw = self._lib.espeak_TextToPhonemes(ctypes.byref(pointer), _CHARS_UTF8,
                                                      _PHONEMES_IPA)
                if pointer.value is None:
                    end = len(encoded)
                else:
                    # espeak reads one character of the next clause ahead: give it back.
                    end = _back_one_char(encoded, max(start, min(pointer.value - base,
                                                                 len(encoded))), start)
                consumed = encoded[start:end].decode("utf-8", errors="replace")
                start = end
                phonemes = _strip_language_flags((raw or b"").decode("utf-8", "replace")).strip()
                term = _terminator(consumed)
                if not phonemes and not term:
                    continue
                out.append(Clause(consumed.strip(), phonemes, term, term in SENTENCE_TERMINATORS))
        return out


def _back_one_char(encoded: bytes, end: int, start: int) -> int:
    """The offset of the last UTF-8 character before ``end`` (not before ``start``)."""
    pos = end - 1
    while pos > start and (encoded[pos] & 0xC0) == 0x80:
        pos -= 1
    return max(pos, start)


def _strip_language_flags(phonemes: str) -> str:
    """Drop espeak's ``(en)``/``(fr)`` language-switch markers around foreign words."""
    out = []
    depth = 0
    for char in phonemes:
        if char == "(":
            depth += 1
        elif char == ")" and depth:
            depth -= 1
        elif not depth:
            out.append(char)
    return "".join(out)
