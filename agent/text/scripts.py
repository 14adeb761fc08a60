"""Which writing systems a voice can read, and the symbols no voice should read aloud.

A request mostly in a script its voice cannot say is refused, naming the script
(:func:`unspeakable`, :func:`mostly_unspeakable`); a word or a letter of such a script in a text
the voice can say is skipped (:func:`skip_unspeakable`; a lone Greek letter, a symbol espeak-ng
names, stays). Emoji and other symbols without a reading are dropped (:func:`drop_symbols`)
unless ``text.symbols`` leaves them to espeak-ng. Scripts come from the Unicode Script property;
a voice reads Latin and its language's scripts (:data:`LANGUAGE_SCRIPTS`). Design:
docs/internals.md#scripts-and-symbols.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence

import regex

from agent.text.document import Document, Phonemes, Speech

__all__ = ["LANGUAGE_SCRIPTS", "NOTHING_TO_SPEAK", "SCRIPTS", "drop_symbols", "has_speech",
           "language_base", "mostly_unspeakable", "scripts_for", "scripts_of", "skip_unspeakable",
           "skipped_words", "speech_problem", "unspeakable", "unspeakable_reason"]

NOTHING_TO_SPEAK = "text has nothing to speak"

SCRIPTS: tuple[str, ...] = (
    "Latin", "Greek", "Cyrillic", "Armenian", "Georgian", "Hebrew", "Arabic", "Syriac", "Thaana",
    "Devanagari", "Bengali", "Gurmukhi", "Gujarati", "Oriya", "Tamil", "Telugu", "Kannada",
    "Malayalam", "Sinhala", "Thai", "Lao", "Tibetan", "Myanmar", "Khmer", "Ethiopic", "Mongolian",
    "Hangul", "Hiragana", "Katakana", "Bopomofo", "Han", "Yi", "Cherokee", "Tifinagh",
    "Canadian_Aboriginal", "Javanese", "Balinese", "Braille",
)
"""The scripts named in reasons; a character of any other script is "an unlisted script"."""

_LATIN_LANGUAGES = (
    "af", "az", "ca", "cs", "cy", "da", "de", "en", "eo", "es", "et", "eu", "fi", "fil", "fo",
    "fr", "ga", "gd", "gl", "ha", "haw", "hr", "ht", "hu", "id", "is", "it", "jbo", "la", "lb",
    "lt", "lv", "mi", "ms", "mt", "nb", "nl", "nn", "no", "oc", "pl", "pt", "qu", "ro", "sk", "sl",
    "sq", "sv", "sw", "tk", "tn", "tr", "uz", "vi", "yo", "zu",
)
LANGUAGE_SCRIPTS: Mapping[str, frozenset[str]] = {
    **{code: frozenset({"Latin"}) for code in _LATIN_LANGUAGES},
    **{code: frozenset({"Latin", "Cyrillic"}) for code in (
        "ru", "uk", "be", "bg", "mk", "sr", "kk", "ky", "mn", "tt", "ba", "cv", "tg")},
    **{code: frozenset({"Latin", "Greek"}) for code in ("el", "grc")},
    **{code: frozenset({"Latin", "Arabic"}) for code in ("ar", "fa", "ur", "ps", "sd", "ug", "ku")},
    **{code: frozenset({"Latin", "Hebrew"}) for code in ("he", "yi")},
    **{code: frozenset({"Latin", "Devanagari"}) for code in ("hi", "mr", "ne", "sa", "kok", "mai")},
    **{code: frozenset({"Latin", "Bengali"}) for code in ("bn", "as", "bpy")},
    "hy": frozenset({"Latin", "Armenian"}), "ka": frozenset({"Latin", "Georgian"}),
    "pa": frozenset({"Latin", "Gurmukhi"}), "gu": frozenset({"Latin", "Gujarati"}),
    "or": frozenset({"Latin", "Oriya"}), "ta": frozenset({"Latin", "Tamil"}),
    "te": frozenset({"Latin", "Telugu"}), "kn": frozenset({"Latin", "Kannada"}),
    "ml": frozenset({"Latin", "Malayalam"}), "si": frozenset({"Latin", "Sinhala"}),
    "th": frozenset({"Latin", "Thai"}), "lo": frozenset({"Latin", "Lao"}),
    "km": frozenset({"Latin", "Khmer"}), "my": frozenset({"Latin", "Myanmar"}),
    "am": frozenset({"Latin", "Ethiopic"}), "ti": frozenset({"Latin", "Ethiopic"}),
    "dv": frozenset({"Latin", "Thaana"}),
    **{code: frozenset({"Latin", "Han", "Bopomofo"}) for code in (
        "zh", "cmn", "yue", "hak", "wuu", "nan")},
    "ja": frozenset({"Latin", "Han", "Hiragana", "Katakana"}),
    "ko": frozenset({"Latin", "Hangul", "Han"}),
}
"""The scripts a language's voice reads, by ISO 639 code (Latin for all: see the module)."""

_NEUTRAL = r"\p{Script=Common}\p{Script=Inherited}"
_SCRIPT_PATTERNS = {name: regex.compile(rf"\p{{Script={name}}}") for name in SCRIPTS}
_UNLISTED = "an unlisted"
# Emoji and symbols without a reading: other symbols (So: pictographs, dingbats, ©, ✓),
# emoji modifiers and the arrows (Sm, but named, not read: "rightwards arrow"); the variation
# selectors, the keycap mark and the joiner that only dress an emoji (the digit of 1️⃣ stays).
# The degree and numero signs and the ready-made temperature units are read, and stay.
_SYMBOLS = regex.compile(
    r"[\p{So}\p{Extended_Pictographic}\U0001F3FB-\U0001F3FF\u2190-\u21FF\u27F0-\u27FF"
    r"\u2900-\u297F\u2B00-\u2BFF\uFE00-\uFE0F\u20E3\u200D\U000E0100-\U000E01EF"
    r"--[°№℃℉]]", regex.V1)
_SPEECH = regex.compile(r"[\p{L}\p{N}\p{Sc}\p{Sm}]")


def language_base(code: str) -> str:
    """The ISO 639 part of a language code: ``en_US`` -> ``en``, ``en-gb-x-rp`` -> ``en``."""
    return code.replace("-", "_").split("_", 1)[0].strip().lower()


def scripts_for(languages: Iterable[str]) -> frozenset[str] | None:
    """The scripts a voice of ``languages`` reads; None when none of them is in the table (the
    text is then not judged)."""
    known = [LANGUAGE_SCRIPTS[b] for b in map(language_base, languages) if b in LANGUAGE_SCRIPTS]
    return frozenset().union(*known) if known else None


@functools.lru_cache(maxsize=64)
def _outside(allowed: frozenset[str]) -> regex.Pattern[str]:
    """A pattern matching a character of none of the ``allowed`` scripts (nor a neutral one)."""
    inside = "".join(rf"\p{{Script={name}}}" for name in sorted(allowed))
    return regex.compile(rf"[^{_NEUTRAL}{inside}]")


def _script_name(char: str) -> str:
    for name, pattern in _SCRIPT_PATTERNS.items():
        if pattern.match(char):
            return name
    return _UNLISTED


def scripts_of(text: str) -> list[str]:
    """The scripts of ``text``'s characters (neutral ones left out), in order of first use."""
    return unspeakable(text, frozenset())


def unspeakable(text: str, allowed: frozenset[str] | None) -> list[str]:
    """The scripts in ``text`` outside ``allowed`` (None: nothing is outside), in order of
    first use; an empty list when the voice can read it all. Symbols :func:`drop_symbols`
    drops do not count. Linear in the text (one scan, then the distinct characters found)."""
    if allowed is None:
        return []
    found: dict[str, None] = {}
    seen: set[str] = set()
    pattern = _outside(allowed)
    for match in pattern.finditer(text):
        char = match.group()
        if char in seen or _SYMBOLS.match(char):
            continue
        seen.add(char)
        found.setdefault(_script_name(char), None)
    return list(found)


_WIDE = regex.compile(r"[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}"
                      r"\p{Script=Yi}\p{Script=Bopomofo}]")
_WIDE_WEIGHT = 3
"""A character of these scripts is about a word (a syllable or more): it counts as three letters."""
_LETTER = regex.compile(r"\p{L}")
_GREEK = regex.compile(r"\p{Script=Greek}")
_DOUBLE_MARK = regex.compile(r"([,;:])(?:\s*[,;:])+")
_LOOSE_MARK = regex.compile(r"^\s*[,;:.!?]+\s*|\s+(?=[,;:.!?])")
"""A mark a skipped word leaves at the start, or a space it leaves before a mark."""


def mostly_unspeakable(text: str, allowed: frozenset[str] | None) -> bool:
    """Whether most of ``text``'s letters are in scripts outside ``allowed`` (a character of
    Han, kana or Hangul weighs three letters): such a text is refused, while a word or a
    symbol of another script in a text the voice can say is skipped. None: never."""
    if allowed is None:
        return False
    weight = letters = 0
    for match in _outside(allowed).finditer(text):
        char = match.group()
        if not _SYMBOLS.match(char):
            weight += _WIDE_WEIGHT if _WIDE.match(char) else 1
            letters += 1 if _LETTER.match(char) else 0
    return weight > 0 and weight > len(_LETTER.findall(text)) - letters


@functools.lru_cache(maxsize=64)
def _outside_runs(allowed: frozenset[str]) -> regex.Pattern[str]:
    inside = "".join(rf"\p{{Script={name}}}" for name in sorted(allowed))
    return regex.compile(rf"[^{_NEUTRAL}{inside}\s]+")


def skip_unspeakable(text: str, allowed: frozenset[str] | None) -> tuple[str, list[str]]:
    """``text`` without the words of scripts outside ``allowed``, and the words skipped. A
    lone Greek letter (``π``, ``Δ``, ``α-blocker``: a symbol espeak-ng names) stays; emoji
    and other symbols are :func:`drop_symbols`'s. None: nothing is skipped."""
    if allowed is None or text.isascii():
        return text, []
    skipped: list[str] = []

    def skip(match: regex.Match[str]) -> str:
        run = match.group()
        if (len(run) == 1 and _GREEK.match(run)) or _SYMBOLS.fullmatch(run):
            return run
        skipped.append(run)
        return " "

    left = _outside_runs(allowed).sub(skip, text)
    if not skipped:
        return text, []
    left = _DOUBLE_MARK.sub(r"\1", " ".join(left.split()))
    return _LOOSE_MARK.sub("", left), skipped


def drop_symbols(text: str) -> str:
    """``text`` without emoji and other symbols that have no reading (see the module); a
    dropped symbol between words leaves a space."""
    if not _SYMBOLS.search(text):
        return text
    return " ".join(_SYMBOLS.sub(" ", text).split())


def has_speech(text: str) -> bool:
    """Whether ``text`` holds anything to say once its symbols are dropped: a letter, a digit,
    or a currency or maths sign (which espeak-ng and the normalizer read)."""
    return _SPEECH.search(drop_symbols(text)) is not None


def unspeakable_reason(scripts: Sequence[str], voice: str, languages: Sequence[str],
                       able: Sequence[str]) -> str:
    """The one-line reason for text in ``scripts`` that ``voice`` (of ``languages``) cannot
    say; ``able`` are the installed voices that can."""
    named = " and ".join(f"{s} script" if s != _UNLISTED else "an unlisted script"
                         for s in scripts) or "no script"
    language = languages[0] if languages else "no language"
    return (f"text is in {named}, which voice {voice} ({language}) cannot speak; installed voices "
            f"that can: {', '.join(able) or 'none'}")


def speech_problem(document: Document, voice: str, languages: Mapping[str, Sequence[str]], *,
                   drop_symbols: bool = True) -> str | None:
    """Why ``document`` cannot be spoken, in one line, or None when it can: text mostly in a
    script its voice cannot say (each speech part judged by the voice it names, else ``voice``;
    the reason names the installed voices of ``languages`` that could say it), or, with
    ``drop_symbols``, nothing to say once emoji and symbols are dropped (no letter, digit or
    sign in any part, no given phonemes, pause or sound)."""
    something = False
    for part in document:
        if not isinstance(part, Speech):
            something = True
            continue
        name = part.voice or voice
        text = " ".join(p for p in part.pieces if isinstance(p, str))
        allowed = scripts_for(languages.get(name, ()))
        scripts = unspeakable(text, allowed) if mostly_unspeakable(text, allowed) else []
        if scripts:
            able = [other for other, codes in sorted(languages.items())
                    if not unspeakable(text, scripts_for(codes))]
            return unspeakable_reason(scripts, name, languages.get(name, ()), able)
        something = something or not drop_symbols or has_speech(text) or any(
            isinstance(p, Phonemes) for p in part.pieces)
    return None if something else NOTHING_TO_SPEAK


def skipped_words(document: Document, voice: str,
                  languages: Mapping[str, Sequence[str]]) -> list[str]:
    """The words of other scripts the voices of ``document`` will skip (for warnings and
    logs): each speech part judged by the voice it names, else ``voice``."""
    words: list[str] = []
    for part in document:
        if isinstance(part, Speech):
            text = " ".join(p for p in part.pieces if isinstance(p, str))
            words += skip_unspeakable(text, scripts_for(languages.get(part.voice or voice, ())))[1]
    return words
