"""espeak-ng through ctypes: the training build where installed, else ``libespeak-ng1``.

:mod:`agent.text.espeak_build` chooses the build (``TTS_AGENT_ESPEAK_LIBRARY`` and
``TTS_AGENT_ESPEAK_DATA``, or :class:`EspeakPhonemizer`'s ``library`` and ``data_path``, choose
another); one process loads one build. espeak-ng is not thread-safe, so every call goes through
one lock; builds without ``espeak_TextToPhonemesWithTerminator`` (Debian 12's 1.51) get each
clause's terminator from the text (:func:`terminator_of`).
Why: docs/text.md#which-espeak-ng-and-why.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from agent.text.espeak_build import DATA_ENV, LIBRARY_ENV, Choice, choose

__all__ = [
    "CLAUSE_TERMINATORS",
    "DATA_ENV",
    "LIBRARY_ENV",
    "SENTENCE_TERMINATORS",
    "Clause",
    "EspeakError",
    "EspeakPhonemizer",
    "describe",
    "identity",
    "terminator_of",
]

_AUDIO_OUTPUT_SYNCHRONOUS = 2
_INITIALIZE_DONT_EXIT = 0x8000
_CHARS_UTF8 = 1
_PHONEMES_IPA = 0x02
_EE_OK = 0

# espeak-ng's clause codes (readclause.h), as espeak_TextToPhonemesWithTerminator reports them.
_CLAUSE_TYPE_SENTENCE = 0x00080000
_CLAUSE_PUNCTUATION_MASK = 0x000FFFFF
_CLAUSE_CODES = {
    40 | 0x0000 | _CLAUSE_TYPE_SENTENCE: ".",
    20 | 0x1000 | 0x00040000: ",",
    40 | 0x2000 | _CLAUSE_TYPE_SENTENCE: "?",
    45 | 0x3000 | _CLAUSE_TYPE_SENTENCE: "!",
    30 | 0x0000 | 0x00040000: ":",
    30 | 0x1000 | 0x00040000: ";",
}

SENTENCE_TERMINATORS = frozenset(".?!")
CLAUSE_TERMINATORS = frozenset(",:;") | SENTENCE_TERMINATORS
# The marks espeak-ng ends a clause on (punct_chars in its readclause.c, the ones English text
# meets), as (terminator, end of sentence) the way espeak_TextToPhonemesWithTerminator reports
# them through Piper's mask: the full-width marks and the ellipsis keep a flag bit that makes
# them match no terminator.
_CLAUSE_ENDS: dict[str, tuple[str, bool]] = {
    ".": (".", True), "?": ("?", True), "!": ("!", True),
    ",": (",", False), ":": (":", False), ";": (";", False),
    "\u2013": (";", False), "\u2014": (";", False),  # en dash, em dash
    "\u2026": ("", False),  # ellipsis
    "\uff0e": ("", True), "\uff1f": ("", True), "\uff01": ("", True), "\u3002": ("", True),
    "\uff0c": ("", False), "\uff1a": ("", False), "\uff1b": ("", False), "\u3001": ("", False),
}
# What may stand between a clause's punctuation and the end of what it consumed.
_CLOSERS = "\"')]}\u00bb\u201d\u2019 \t\n"


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


@dataclass(frozen=True, slots=True)
class _Library:
    cdll: ctypes.CDLL
    name: str
    data_path: str | None
    version: str
    has_terminator_api: bool
    choice: Choice


def _candidates(library: str | None) -> list[str]:
    if library:
        return [library]
    return [name for name in (ctypes.util.find_library("espeak-ng"), "libespeak-ng.so.1",
                              "libespeak-ng.so") if name]


def _check_data_path(data_path: str) -> None:
    # espeak-ng silently falls back to its built-in path when the one it is given is not an
    # espeak-ng-data directory (or one holding it), which would pair a library with the wrong
    # data: refuse instead.
    base = Path(data_path)
    if not ((base / "phontab").is_file() or (base / "espeak-ng-data" / "phontab").is_file()):
        raise EspeakError(f"{data_path} is not an espeak-ng-data directory (no phontab)")


def _open(choice: Choice) -> _Library:
    library, data_path = choice.library, choice.data_path
    if data_path:
        _check_data_path(data_path)
    errors = []
    for name in _candidates(library):
        try:
            cdll = ctypes.CDLL(name)
        except OSError as exc:
            errors.append(str(exc))
            continue
        return _initialize(cdll, name, choice)
    hint = f"{library} could not be loaded" if library else (
        "libespeak-ng not found; install the libespeak-ng1 package (./build.sh does)")
    raise EspeakError(hint + (f" ({'; '.join(errors)})" if errors else ""))


def _initialize(cdll: ctypes.CDLL, name: str, choice: Choice) -> _Library:
    data_path = choice.data_path
    cdll.espeak_Initialize.restype = ctypes.c_int
    cdll.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
    cdll.espeak_SetVoiceByName.restype = ctypes.c_int
    cdll.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
    cdll.espeak_TextToPhonemes.restype = ctypes.c_char_p
    cdll.espeak_TextToPhonemes.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int,
                                           ctypes.c_int]
    cdll.espeak_Info.restype = ctypes.c_char_p
    cdll.espeak_Info.argtypes = [ctypes.c_void_p]
    has_terminator_api = hasattr(cdll, "espeak_TextToPhonemesWithTerminator")
    if has_terminator_api:
        function = cdll.espeak_TextToPhonemesWithTerminator
        function.restype = ctypes.c_char_p
        function.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_int,
                             ctypes.POINTER(ctypes.c_int)]
    rate = cdll.espeak_Initialize(_AUDIO_OUTPUT_SYNCHRONOUS, 0,
                                  data_path.encode() if data_path else None,
                                  _INITIALIZE_DONT_EXIT)
    if rate <= 0:
        raise EspeakError(f"espeak_Initialize failed for {name} (data: {data_path or 'default'};"
                          " is espeak-ng-data installed and of the same version?)")
    version = (cdll.espeak_Info(None) or b"").decode("ascii", "replace")
    return _Library(cdll, name, data_path, version, has_terminator_api, choice)


class EspeakPhonemizer:
    """Text to IPA clauses with espeak-ng. One instance per process is enough.

    ``library``/``data_path`` choose the espeak-ng build (default: ``TTS_AGENT_ESPEAK_LIBRARY``
    and ``TTS_AGENT_ESPEAK_DATA``, else :func:`~agent.text.espeak_build.choose`'s default);
    without them, a process that has loaded a build keeps it. ``terminator_api=False`` makes the
    phonemizer recover terminators from the text even where the library could report them (the
    benchmark measures that path against the reference). Any thread may call :meth:`clauses`.
    """

    _lock = threading.Lock()
    _library: _Library | None = None

    def __init__(self, voice: str, *, library: str | None = None, data_path: str | None = None,
                 terminator_api: bool = True) -> None:
        self.voice = voice
        library = library or os.environ.get(LIBRARY_ENV) or None
        data_path = data_path or os.environ.get(DATA_ENV) or None
        with self._lock:
            loaded = EspeakPhonemizer._library
            if loaded is None:
                loaded = EspeakPhonemizer._library = _open(choose(library, data_path))
            elif library or data_path:
                _check_same(loaded, choose(library, data_path))
            self._select_voice()
        self.terminator_api = terminator_api and loaded.has_terminator_api

    @property
    def version(self) -> str:
        """The loaded espeak-ng's version, e.g. ``1.51``."""
        return _loaded().version

    @property
    def library(self) -> str:
        """The shared library espeak-ng was loaded from (as given to the dynamic loader)."""
        return _loaded().name

    @property
    def build(self) -> str:
        """Which build that is: ``training``, ``system`` or ``custom``."""
        return _loaded().choice.kind

    def _select_voice(self) -> None:
        if _loaded().cdll.espeak_SetVoiceByName(self.voice.encode()) != _EE_OK:
            raise EspeakError(f"espeak-ng has no voice {self.voice!r}")

    def clauses(self, text: str) -> list[Clause]:
        """Phonemize ``text`` (already normalised) clause by clause."""
        encoded = text.encode("utf-8")
        buffer = ctypes.create_string_buffer(encoded)
        base = ctypes.addressof(buffer)
        pointer = ctypes.c_void_p(base)
        code = ctypes.c_int(0)
        out: list[Clause] = []
        with self._lock:
            cdll = _loaded().cdll
            self._select_voice()
            start = 0
            while pointer.value is not None:
                if self.terminator_api:
                    raw = cdll.espeak_TextToPhonemesWithTerminator(
                        ctypes.byref(pointer), _CHARS_UTF8, _PHONEMES_IPA, ctypes.byref(code))
                else:
                    raw = cdll.espeak_TextToPhonemes(ctypes.byref(pointer), _CHARS_UTF8,
                                                     _PHONEMES_IPA)
                end = _absorb_closers(encoded, start, _consumed_end(
                    encoded, start, None if pointer.value is None else pointer.value - base))
                consumed = encoded[start:end].decode("utf-8", errors="replace")
                start = end
                phonemes = _strip_language_flags((raw or b"").decode("utf-8", "replace")).strip()
                if self.terminator_api:
                    term = _CLAUSE_CODES.get(code.value & _CLAUSE_PUNCTUATION_MASK, "")
                    end_of_sentence = bool(code.value & _CLAUSE_TYPE_SENTENCE)
                else:
                    term, end_of_sentence = terminator_of(consumed, pointer.value is None)
                if not phonemes and not term:
                    continue
                out.append(Clause(consumed.strip(), phonemes, term, end_of_sentence))
        return out


def _check_same(loaded: _Library, wanted: Choice) -> None:
    same_library = (wanted.library in (loaded.choice.library, loaded.name) if wanted.library
                    else loaded.choice.library is None)
    if same_library and wanted.data_path in (None, loaded.data_path):
        return
    raise EspeakError(f"espeak-ng is already loaded from {loaded.name} (data:"
                      f" {loaded.data_path or 'default'}); one process cannot also load"
                      f" {wanted.library or 'the system library'} (data:"
                      f" {wanted.data_path or 'default'})")


def describe() -> str:
    """The loaded build in words, for check-config and health: version, kind, source, path."""
    library = EspeakPhonemizer._library
    if library is None:
        return "espeak-ng not loaded yet"
    source = f" from {library.choice.source}" if library.choice.source else ""
    return f"espeak-ng {library.version}, {library.choice.kind} build{source}: {library.name}"


def _loaded() -> _Library:
    library = EspeakPhonemizer._library
    if library is None:  # only reachable if someone bypasses __init__
        raise EspeakError("espeak-ng is not loaded")
    return library


_identity: list[str] = []
""":func:`identity`, once computed."""


def identity() -> str:
    """The loaded espeak-ng as it shapes phonemes, for keys looked up before phonemizing (the
    phrase cache's exact-request index): its version, and the digest of its library file and of
    the files of its data directory (dictionaries, phoneme tables) by name, size and mtime, so
    an upgrade or another build is another identity. Computed once per process, on first use."""
    if not _identity:
        library = _loaded()
        path = ctypes.c_char_p()
        with EspeakPhonemizer._lock:
            library.cdll.espeak_Info(ctypes.byref(path))
        data = (path.value or b"").decode("utf-8", "replace") or library.data_path or ""
        digest = hashlib.sha256(f"{library.version}\0{library.name}\0{data}".encode())
        for file in [*_mapped(library.name), *_files(data)]:
            try:
                info = os.stat(file)
            except OSError:
                continue
            digest.update(f"\0{file}\0{info.st_size}\0{info.st_mtime_ns}".encode())
        _identity.append(f"espeak-ng/{library.version}/{digest.hexdigest()[:16]}")
    return _identity[0]


def _mapped(name: str) -> list[str]:
    """The files of this process's memory maps whose name holds the library's (Linux)."""
    stem = Path(name).name.split(".so")[0]
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            return sorted({line.split(maxsplit=5)[-1].strip() for line in maps
                           if stem in line and "/" in line})
    except OSError:
        return [name]


def _files(directory: str) -> list[str]:
    try:
        return sorted(entry.path for entry in os.scandir(directory) if entry.is_file())
    except OSError:
        return []


def _consumed_end(encoded: bytes, start: int, pointer_offset: int | None) -> int:
    """Where the clause that started at ``start`` ends, given where espeak left the pointer.

    espeak-ng reads one character of the next clause ahead before it returns; give it back.
    """
    if pointer_offset is None:
        return len(encoded)
    end = max(start, min(pointer_offset, len(encoded)))
    pos = end - 1
    while pos > start and (encoded[pos] & 0xC0) == 0x80:
        pos -= 1
    return max(pos, start)


_CLOSING_MARKS = tuple(mark.encode() for mark in "\"')]}\u00bb\u201d\u2019")


def _absorb_closers(encoded: bytes, start: int, end: int) -> int:
    """Move quotes and brackets that close a clause's last word from the next clause into it.

    espeak-ng leaves them to the next clause; for the clause texts (what callers show and log),
    ``He said "Hi." "Bye."`` reads better as ``He said "Hi."`` and ``"Bye."``.
    """
    tail = encoded[start:end].rstrip()
    if len(tail) != end - start or not tail:
        return end  # whitespace before the mark: it opens the next clause
    moved = True
    while moved and end < len(encoded):
        moved = False
        for mark in _CLOSING_MARKS:
            if encoded.startswith(mark, end):
                end += len(mark)
                moved = True
    return end


def terminator_of(consumed: str, last: bool = False) -> tuple[str, bool]:
    """The terminator and sentence-end flag of a clause, recovered from the text it consumed.

    espeak-ng has already decided where the clause ends; this names the punctuation it ended
    on the way the reference runtime reports it: a run of ``?``/``!`` counts as its first mark,
    dashes are semicolons, an ellipsis and the full-width marks carry no terminator (the latter
    still end a sentence), and punctuation in a clause without a letter or digit ends nothing.
    The ``last`` clause of a text, ended by no mark, ends a sentence (as the call reports it).
    """
    if not any(ch.isalnum() for ch in consumed):
        return "", False
    tail = consumed.rstrip(_CLOSERS)
    if tail.endswith("..."):
        return "", False
    run = len(tail) - len(tail.rstrip("?!"))
    mark = tail[-run] if run else tail[-1:]
    return _CLAUSE_ENDS.get(mark, ("", last))


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
