"""The device lexicon's file: reading it without trusting it, and checking every entry.

:func:`read_lexicon_file` reads a regular file only, at most :data:`MAX_FILE_BYTES`;
:func:`parse_lexicon` checks everything before a lexicon is used and says, one line per problem,
which entry (and line) is wrong. The format: docs/text.md#the-device-lexicon; the checks:
docs/internals.md#the-lexicon-file.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import stat
import tomllib
import unicodedata
from collections.abc import Collection
from pathlib import Path
from typing import Any

from agent import jsonbound
from agent.text.lexicon import FORMAT_VERSION, Entry, Lexicon, LexiconError, count_words

__all__ = ["MAX_ENTRIES", "MAX_FILE_BYTES", "MAX_KEY_CHARS", "MAX_KEY_WORDS", "MAX_VALUE_CHARS",
           "load_lexicon", "parse_lexicon", "read_lexicon_file"]

MAX_FILE_BYTES = 1 << 20
MAX_ENTRIES = 10_000
MAX_KEY_CHARS = 100
"""Longest word or phrase (characters, after whitespace is collapsed)."""
MAX_KEY_WORDS = 12
"""Most words in a phrase (:func:`agent.text.lexicon.count_words`: a punctuation mark is one)."""
MAX_VALUE_CHARS = 200
"""Longest respelling or IPA string (characters)."""
_RESERVED_IPA = frozenset("^$_")
"""Piper's sentence start, end and pad symbols: in every id map, never in given phonemes."""
_MAX_LISTED = 10
_WHITESPACE = re.compile(r"\s+")

def read_lexicon_file(path: Path) -> bytes:
    """The bytes of the regular file ``path`` (not a link, FIFO or device; never waited on),
    at most :data:`MAX_FILE_BYTES`. Raises :class:`LexiconError` with the reason."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LexiconError(str(path), ["a symbolic link (the lexicon must be a regular "
                                           "file)"]) from None
        raise LexiconError(str(path), [exc.strerror or str(exc)]) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
                    else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket")
            raise LexiconError(str(path), [f"{kind}, not a regular file"])
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:  # EIO, EISDIR on odd file systems...
        raise LexiconError(str(path), [f"cannot be read: {exc.strerror or exc}"]) from None
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:
        raise LexiconError(str(path), [f"larger than {MAX_FILE_BYTES} bytes"])
    return data


def load_lexicon(path: Path, symbols: Collection[str] | None = None,
                 symbols_from: str = "the voice") -> Lexicon:
    """Read and check the lexicon file ``path`` (:func:`read_lexicon_file`,
    :func:`parse_lexicon`). Raises :class:`LexiconError`."""
    return parse_lexicon(read_lexicon_file(path), str(path), json_format=path.suffix == ".json",
                         symbols=symbols, symbols_from=symbols_from)


def parse_lexicon(raw: bytes, source: str = "lexicon", *, json_format: bool = False,
                  symbols: Collection[str] | None = None,
                  symbols_from: str = "the voice") -> Lexicon:
    """Check and build a lexicon from a file's bytes (TOML, or JSON with ``json_format``).

    ``symbols``: the phonemes the voice's id map knows; IPA with any other symbol is refused
    (None: not checked here; the frontend refuses it when it is used). Raises
    :class:`LexiconError` naming every problem (at most ten), each with its entry and line.
    """
    if len(raw) > MAX_FILE_BYTES:
        raise LexiconError(source, [f"larger than {MAX_FILE_BYTES} bytes"])
    try:
        text = raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise LexiconError(source, [f"not UTF-8 text (byte {exc.start})"]) from None
    try:
        data = _parse_json(text, source) if json_format else _parse_toml(text, source)
    except (RecursionError, jsonbound.TooDeep):  # "[[[[...": tomllib recurses; JSON is bounded
        raise LexiconError(source, ["nested too deeply (a lexicon is one table of words)"],
                           ) from None
    words, default_case = _check_header(data, source)
    checker = _Checker(text, symbols, symbols_from)
    entries = checker.entries(words, default_case)
    if checker.problems:
        raise LexiconError(source, checker.problems, total=checker.found)
    return Lexicon(entries, sha256=hashlib.sha256(raw).hexdigest(), source=source)


def _parse_toml(text: str, source: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise LexiconError(source, [f"not valid TOML: {exc}"]) from None


def _parse_json(text: str, source: str) -> dict[str, Any]:
    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise ValueError(f"key {key!r} given twice")
            out[key] = value
        return out

    try:  # bounded (agent.jsonbound): nesting and numbers refused before int() sees them
        data = jsonbound.loads(text, max_bytes=MAX_FILE_BYTES, object_pairs_hook=pairs)
    except jsonbound.TooDeep:
        raise
    except jsonbound.JsonError as exc:  # malformed, a number no lexicon has, a key given twice
        why = str(exc).removeprefix("malformed JSON: ")
        raise LexiconError(source, [f"not valid JSON: {why}"]) from None
    if not isinstance(data, dict):
        raise LexiconError(source, ["not a JSON object with version and words"])
    return data


def _check_header(data: dict[str, Any], source: str) -> tuple[dict[str, Any], bool]:
    """The ``words`` table and the default ``case_sensitive``, after the top level's checks."""
    unknown = sorted(set(data) - {"version", "case_sensitive", "words"})
    if unknown:
        raise LexiconError(source, [f"unknown top-level key {unknown[0]!r} (a lexicon holds "
                                    "version, case_sensitive and [words])"])
    version = data.get("version")
    if version is None:
        raise LexiconError(source, [f"no version (add version = {FORMAT_VERSION} at the top)"])
    if type(version) is not int or version != FORMAT_VERSION:
        raise LexiconError(source, [f"version {version!r} is not supported (this agent reads "
                                    f"version {FORMAT_VERSION})"])
    default_case = data.get("case_sensitive", False)
    if not isinstance(default_case, bool):
        raise LexiconError(source, ["case_sensitive must be true or false"])
    words = data.get("words", {})
    if not isinstance(words, dict):
        raise LexiconError(source, ["words must be a table of word = respelling"])
    if len(words) > MAX_ENTRIES:
        raise LexiconError(source, [f"{len(words)} entries, more than {MAX_ENTRIES}"])
    return words, default_case


class _Checker:
    """Checks entries one by one, collecting problems (each names its entry and line)."""

    def __init__(self, text: str, symbols: Collection[str] | None, symbols_from: str) -> None:
        self.lines = text.splitlines()
        self.first = next((i for i, line in enumerate(self.lines)
                           if re.match(r'\s*(\[\s*words\s*\]|"words"\s*:)', line)), 0)
        self.symbols = symbols
        self.symbols_from = symbols_from
        self.problems: list[str] = []
        """The first :data:`_MAX_LISTED` problems (each names its entry and line)."""
        self.found = 0
        """Every problem found."""

    def problem(self, raw_key: str, what: str) -> None:
        self.found += 1
        if len(self.problems) < _MAX_LISTED:  # the line is looked for in the first ones only
            self.problems.append(f"{self.where(raw_key)}{what}")

    def where(self, raw_key: str) -> str:
        """``entry 'key' (line N)``: the line found by looking for the key as written."""
        quoted = (json.dumps(raw_key, ensure_ascii=False), f"'{raw_key}'")
        for number, line in enumerate(self.lines[self.first:], self.first + 1):
            stripped = line.lstrip().lstrip("{,").lstrip()
            if stripped.startswith(quoted) or re.match(rf"{re.escape(raw_key)}\s*[=:.]", stripped):
                return f"entry {raw_key!r} (line {number})"
        return f"entry {raw_key!r}"

    def entries(self, words: dict[str, Any], default_case: bool) -> list[Entry]:
        entries: list[Entry] = []
        seen: dict[str, tuple[str, Entry]] = {}
        for raw_key, value in words.items():
            entry = self.entry(raw_key, value, default_case)
            if entry is None:
                continue
            folded = entry.key.casefold()
            earlier = seen.get(folded)
            if earlier is not None and not (entry.case_sensitive and earlier[1].case_sensitive
                                            and entry.key != earlier[1].key):
                self.problem(raw_key, f" repeats {earlier[0]!r} (keys are compared case-folded "
                             "unless both are case_sensitive)")
                continue
            seen[folded] = (raw_key, entry)
            entries.append(entry)
        return entries

    def entry(self, raw_key: str, value: Any, default_case: bool) -> Entry | None:
        problem = self._key_problem(raw_key)
        if problem is None:
            fields, problem = _fields(value)
        if problem is not None:
            self.problem(raw_key, f": {problem}")
            return None
        key = _WHITESPACE.sub(" ", unicodedata.normalize("NFC", raw_key)).strip()
        case = fields.get("case_sensitive", default_case)
        if "ipa" in fields:
            ipa = unicodedata.normalize("NFC", fields["ipa"]).strip()
            problem = self._ipa_problem(ipa)
            entry = Entry(key, ipa=ipa, case_sensitive=case)
        else:
            respelling = _WHITESPACE.sub(" ", unicodedata.normalize("NFC", fields["text"])).strip()
            problem = _text_problem(respelling, "respelling")
            entry = Entry(key, text=respelling, case_sensitive=case)
        if problem is not None:
            self.problem(raw_key, f": {problem}")
            return None
        return entry

    @staticmethod
    def _key_problem(raw_key: str) -> str | None:
        key = _WHITESPACE.sub(" ", unicodedata.normalize("NFC", raw_key)).strip()
        if not key:
            return "the word is empty"
        if len(key) > MAX_KEY_CHARS:
            return f"the word is longer than {MAX_KEY_CHARS} characters"
        if count_words(key) > MAX_KEY_WORDS:
            return f"the phrase has more than {MAX_KEY_WORDS} words"
        if any(unicodedata.category(ch)[0] == "C" for ch in key):
            return "the word holds a control character"
        if not any(ch.isalnum() for ch in key):
            return "the word holds no letter or digit"
        return None

    def _ipa_problem(self, ipa: str) -> str | None:
        problem = _text_problem(ipa, "ipa")
        if problem is not None:
            return problem
        for ch in unicodedata.normalize("NFD", ipa):
            if ch in _RESERVED_IPA:
                return f"ipa holds {ch!r}, which marks sentences and padding for the voice"
            if self.symbols is not None and ch not in self.symbols:
                return (f"IPA symbol {ch!r} (U+{ord(ch):04X}) is not one {self.symbols_from} "
                        "can say")
        return None


def _fields(value: Any) -> tuple[dict[str, Any], str | None]:
    """An entry's value as ``{text|ipa, case_sensitive?}``, or the problem with it."""
    if isinstance(value, str):
        return {"text": value}, None
    if not isinstance(value, dict):
        return {}, "must be a respelling (\"win\") or a table with text or ipa"
    unknown = sorted(set(value) - {"text", "ipa", "case_sensitive"})
    if unknown:
        return {}, (f"unknown field {unknown[0]!r} (an entry has text or ipa, and "
                    "case_sensitive; a word with a dot must be quoted: \"St. Pancras\" = ...)")
    problem = None
    if ("text" in value) == ("ipa" in value):
        problem = "give exactly one of text and ipa"
    elif not isinstance(value.get("text", value.get("ipa")), str):
        problem = f"{'text' if 'text' in value else 'ipa'} must be a string"
    elif not isinstance(value.get("case_sensitive", False), bool):
        problem = "case_sensitive must be true or false"
    return ({}, problem) if problem else (value, None)


def _text_problem(value: str, name: str) -> str | None:
    if not value:
        return f"{name} is empty"
    if len(value) > MAX_VALUE_CHARS:
        return f"{name} is longer than {MAX_VALUE_CHARS} characters"
    if any(unicodedata.category(ch)[0] == "C" for ch in value):
        return f"{name} holds a control character"
    return None
