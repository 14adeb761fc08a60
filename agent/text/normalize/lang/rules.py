"""The passes of the German, French and Spanish normalizer, one code for the three languages
with their :class:`~agent.text.normalize.lang.words.Words`: dates, times, phone numbers, money,
temperatures, percentages, units, ordinals, then the remaining numbers. Each pass writes the
spans it understands in words and leaves the rest as it was; linear patterns only."""

from __future__ import annotations

import re
from collections.abc import Callable

from agent.text.normalize.lang import spoken
from agent.text.normalize.lang.words import Words

__all__ = ["PASSES"]

NUMBER = (r"[0-9]{1,3}(?:[.\u00a0\u202f ][0-9]{3}){1,4}(?:,[0-9]{1,15})?"
          r"|[0-9]{1,15}(?:,[0-9]{1,15})?")
"""A number as written: thousands grouped by ``.`` or a space, a decimal comma; at most 15
digits in each part (a longer run is read digit by digit, :data:`_LONG`)."""
_LONG = re.compile(r"(?<![\w,.])[0-9]{16,}(?![\w])")
_NUM = re.compile(rf"(?<![\w,.])({NUMBER})(?![\w])")
_ISO = re.compile(r"\b([0-9]{4})-([0-9]{2})-([0-9]{2})\b")
_DOTTED = re.compile(r"(?<![0-9.])([0-9]{1,2})\.([0-9]{1,2})\.(?:([0-9]{4})\b)?")
_SLASHED = re.compile(r"(?<![0-9/])([0-9]{1,2})/([0-9]{1,2})(?:/([0-9]{4}))?(?![0-9/])")
_PHONE = re.compile(r"(?<![\w,.+])(\+[0-9]{1,3}(?:(?:\s?/\s?|[ .-])[0-9]{1,8})+"
                    r"|[0-9]{2,5}(?:(?:\s?/\s?|[ .-])[0-9]{2,8})+)(?!\w|[,.][0-9])")
_SEPARATOR = re.compile(r"\s?/\s?|[ .-]")
_ANNOUNCE = frozenset({"le", "du", "au", "dès", "depuis", "avant", "après", "jusqu'au", "el",
                       "del", "al", "desde", "hasta", "antes", "después", "hoy", "aujourd'hui"})
"""A French or Spanish day/month without a year is a date only after one of these or a
weekday (``le 15/03``; ``16/9`` and ``24/7`` stay numbers)."""
_DATIVE = frozenset({"am", "im", "vom", "zum", "beim", "dem", "den", "zur", "ab", "seit", "bis",
                     "ihrem", "unserem", "seinem", "einem"})
_STRONG = frozenset({"ein", "unser", "mein", "dein", "sein", "ihr", "euer", "kein"})
_ARTICLES = frozenset({"der", "die", "das", "des"})
_ES_NOT_NOUN = frozenset({"en", "de", "del", "a", "al", "con", "por", "y", "o", "el", "la",
                          "lugar", "puesto"})


def _before(text: str, match: re.Match[str]) -> str:
    """The few words before a match (bounded: the rules look at the word before only)."""
    return text[max(0, match.start() - 40):match.start()]


def _german_ending(before: str, after: str, words: Words) -> tuple[str, str]:
    """(article to add, ending) of a German ordinal from the words around it."""
    previous = before.rsplit(maxsplit=1)[-1] if before.strip() else ""
    if previous.rstrip(",") in words.weekdays and previous.endswith(","):
        return "den ", "n"
    previous = previous.lower()
    if previous in _DATIVE:
        return "", "n"
    if previous in _STRONG:
        return "", "r"
    if previous in _ARTICLES:
        return "", ""
    return "", "n" if after in words.months else ""


def _german_ordinal(before: str, after: str, words: Words) -> bool:
    """Whether ``3.`` is an ordinal: before a month or a lower-case word (``vom 1. bis``), or
    after an article or preposition (``der 3. Stock``); else a number ending a sentence."""
    previous = before.rsplit(maxsplit=1)[-1].lower() if before.strip() else ""
    return (after in words.months or after[0].islower()
            or previous in _DATIVE | _STRONG | _ARTICLES)


def _date(day: int, month: int, year: str | None, words: Words, before: str) -> str | None:
    if not (1 <= day <= 31 and 1 <= month <= 12):
        return None
    name = words.months[month - 1]
    said = spoken.year(int(year), words.code) if year else ""
    if words.code == "de":
        article, ending = _german_ending(before, name, words)
        return f"{article}{spoken.ordinal(day, 'de', ending=ending)} {name} {said}".strip()
    first = "premier" if words.code == "fr" and day == 1 else spoken.cardinal(day, words.code)
    if words.code == "es":
        return f"{first} de {name}" + (f" de {said}" if said else "")
    return f"{first} {name} {said}".strip()


def dates(text: str, words: Words) -> str:
    def iso(m: re.Match[str]) -> str:
        said = _date(int(m[3]), int(m[2]), m[1], words, _before(text, m))
        return said if said is not None else m[0]

    def numeric(m: re.Match[str]) -> str:
        before = _before(text, m)
        previous = before.rsplit(maxsplit=1)[-1].lower() if before.strip() else ""
        if (words.code != "de" and m[3] is None and previous not in _ANNOUNCE
                and previous not in words.weekdays):
            return m[0]
        said = _date(int(m[1]), int(m[2]), m[3], words, before)
        return said if said is not None else m[0]

    text = _ISO.sub(iso, text)
    return (_DOTTED if words.code == "de" else _SLASHED).sub(numeric, text)


def _hour(hour: int, words: Words) -> str:
    if words.code == "de":
        return "ein" if hour == 1 else spoken.cardinal(hour, "de")
    return spoken.feminine(hour, words.code) if hour else ("zéro" if words.code == "fr"
                                                           else "cero")


_TIMES = {
    "de": re.compile(r"\b(?P<h>[0-9]{1,2})"
                     r"(?::(?P<m>[0-9]{2})(?:\s*Uhr\b)?|\.(?P<dm>[0-9]{2})\s*Uhr\b)"),
    "fr": re.compile(r"\b(?P<h>[0-9]{1,2})"
                     r"(?:\s?h\s?(?P<m>[0-9]{2})?|:(?P<dm>[0-9]{2}))(?![\w/])"),
    "es": re.compile(r"\b(?P<h>[0-9]{1,2})(?::(?P<m>[0-9]{2})|\s?(?P<unit>h))(?![\w/:])"),
}


def times(text: str, words: Words) -> str:
    def said(m: re.Match[str]) -> str:
        found = m.groupdict()
        hour, minutes = int(m["h"]), found["m"] or found.get("dm") or ""
        if hour > 24 or (minutes and int(minutes) > 59):
            return m[0]
        rest = spoken.cardinal(int(minutes), words.code) if minutes and int(minutes) else ""
        if words.code == "es":
            if found["unit"]:
                return f"{_hour(hour, words)} {words.hour[hour != 1]}"
            if not rest:
                return _hour(hour, words) + (" horas" if hour == 0 else "")
            return f"{_hour(hour, words)} y {rest}"
        clock = words.hour[words.code == "fr" and hour > 1]
        return f"{_hour(hour, words)} {clock} {rest}".strip()

    return _TIMES[words.code].sub(said, text)


def _is_phone(groups: list[str], written: str, code: str) -> bool:
    run = "".join(groups)
    if written.startswith("+") or (run.startswith("0") and len(run) >= 6):
        return True
    thousands = all(len(g) == 3 for g in groups[1:]) and " " in written and "/" not in written
    if code == "es" and len(run) == 9 and run[0] in "6789" and " " in written:
        return True
    return not thousands and len(run) >= 6 and all(s == " " for s in _SEPARATOR.findall(written))


def _group(group: str, code: str) -> str:
    if code == "fr" and len(group) <= 2:
        return ("zéro " if len(group) == 2 and group[0] == "0" else "") + spoken.cardinal(
            int(group), "fr")
    return spoken.digits(group, code)


def phones(text: str, words: Words) -> str:
    def said(m: re.Match[str]) -> str:
        written = m[0]
        groups = _SEPARATOR.split(written.lstrip("+"))
        if not _is_phone(groups, written, words.code):
            return written
        parts = [_group(g, words.code) for g in groups]
        if written.startswith("+"):
            code = groups[0]
            parts[0] = f"{words.plus} " + (spoken.cardinal(int(code), "fr")
                                           if words.code == "fr" else spoken.digits(code,
                                                                                    words.code))
        return ", ".join(parts)

    return _PHONE.sub(said, text)


_RANGE = re.compile(r"(?<![\w,.])([0-9]{1,4})\s?[–—-]\s?([0-9]{1,4})(?![\w]|[,.:][0-9])")
_TO = {"de": "bis", "fr": "à", "es": "a"}


def ranges(text: str, words: Words) -> str:
    """``9–17 Uhr``, ``10-15 Minuten``: two numbers joined by a dash, read with "to"."""
    return _RANGE.sub(lambda m: f"{m[1]} {_TO[words.code]} {m[2]}", text)


def _signs(table: dict[str, tuple[str, str]]) -> str:
    return "|".join(re.escape(s) for s in sorted(table, key=len, reverse=True))


def money(text: str, words: Words) -> str:
    signs = _signs(words.currencies)
    after = re.compile(rf"(?<![\w,.])({NUMBER})\s?({signs})(?!\w)")
    before = re.compile(rf"(?<!\w)({signs})\s?({NUMBER})(?![\w])")

    def said(amount: str, sign: str) -> str:
        value, fraction = spoken.number_value(amount)
        cents = int(fraction[:2].ljust(2, "0")) if fraction else 0
        if value == 0 and cents:
            return f"{spoken.cardinal(cents, words.code)} {words.cents[cents != 1]}"
        name = words.currencies[sign][value != 1]
        tail = f" {words.cents_joiner}" if words.cents_joiner else ""
        rest = f"{tail} {spoken.cardinal(cents, words.code)}" if cents else ""
        return f"{spoken.before_noun(value, words.code)} {name}{rest}"

    text = after.sub(lambda m: said(m[1], m[2]), text)
    return before.sub(lambda m: said(m[2], m[1]), text)


def _quantity(amount: str, nouns: tuple[str, str], words: Words) -> str:
    return f"{spoken.decimal(amount, words.code, words.comma, noun=True)} " + nouns[
        spoken.plural(amount)]


_TEMPERATURE = re.compile(rf"(?<![\w-])([-−])?\s?({NUMBER})\s?°\s?([CF])?(?!\w)")
_PERCENT = re.compile(rf"(?<![\w,.])({NUMBER})\s?%")


def temperatures(text: str, words: Words) -> str:
    def said(m: re.Match[str]) -> str:
        sign = f"{words.minus} " if m[1] else ""
        return sign + _quantity(m[2], words.degree, words) + (" Fahrenheit" if m[3] == "F"
                                                              else "")

    return _TEMPERATURE.sub(said, text)


def percent(text: str, words: Words) -> str:
    return _PERCENT.sub(lambda m: f"{spoken.decimal(m[1], words.code, words.comma)} "
                                  f"{words.percent}", text)


def units(text: str, words: Words) -> str:
    pattern = re.compile(rf"(?<![\w,.])({NUMBER})\s?({_signs(words.units)})(?![\w/])")
    return pattern.sub(lambda m: _quantity(m[1], words.units[m[2]], words), text)


_ORDINALS = {
    "de": re.compile(r"(?<![\w.,])([0-9]{1,3})\.(?=\s+([^\W\d_]+))"),
    "fr": re.compile(r"(?<![\w.,])([0-9]{1,4})(er|re|ère|ème|eme|e)(?!\w)"),
    "es": re.compile(r"(?<![\w.,])([0-9]{1,4})(?:\.?([ºª])|(er|era)(?!\w))(?=(\s+[^\W\d_]+)?)"),
}


def ordinals(text: str, words: Words) -> str:
    def said(m: re.Match[str]) -> str:
        value = int(m[1])
        if words.code == "de":
            following = m[2]
            if not _german_ordinal(_before(text, m), following, words):
                return m[0]
            article, ending = _german_ending(_before(text, m), following, words)
            return article + spoken.ordinal(value, "de", ending=ending)
        if words.code == "fr":
            return spoken.ordinal(value, "fr", female=m[2] in ("re", "ère"))
        female = m[2] == "ª" or m[3] == "era"
        following = (m[4] or "").strip()
        short = m[3] == "er" or (m[2] == "º" and bool(following)
                                 and following.lower() not in _ES_NOT_NOUN)
        return spoken.ordinal(value, "es", female=female, short=short)

    return _ORDINALS[words.code].sub(said, text)


def numbers(text: str, words: Words) -> str:
    def said(m: re.Match[str]) -> str:
        written = m[1]
        if "," in written:
            return spoken.decimal(written, words.code, words.comma)
        value, _ = spoken.number_value(written)
        return spoken.year(value, words.code) if len(written) == 4 else spoken.cardinal(
            value, words.code)

    text = _LONG.sub(lambda m: spoken.digits(m[0], words.code), text)
    return _NUM.sub(said, text)


def abbreviations(text: str, words: Words) -> str:
    for short, long in words.abbreviations.items():
        text = re.sub(rf"(?<!\w){re.escape(short)}(?=:?\s*[0-9])", long, text)
    return text


PASSES: tuple[Callable[[str, Words], str], ...] = (
    abbreviations, dates, times, phones, money, temperatures, percent, ranges, units, ordinals,
    numbers)
"""The passes, in the order they run."""
