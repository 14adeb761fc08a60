"""Times of day: ``7:15`` "seven fifteen", ``19:05`` "nineteen oh five", ``9:30 am``, ``5 pm``.

A time is read as written, 12 h or 24 h ("o'clock", "hundred", "midnight" on the hour; am/pm
written ``a.m``/``p.m``), with seconds, ranges (``9am-5pm``) and four-digit 24 h times in the
places announcers use them. The rules: docs/internals.md#normalizer-times-of-day.
"""

from __future__ import annotations

import re

from agent.text.normalize import spoken
from agent.text.normalize.options import NormalizeOptions

__all__ = ["CLOCK", "HOUR", "times"]

_MERIDIEM = r"(?:\s?(?P<ap>[AaPp])\.?\s?[Mm](?![\w])(?P<dot>\.)?)"
CLOCK = re.compile(r"(?<![\w:.,+])(?P<hour>[01]?\d|2[0-4]):(?P<minute>[0-5]\d)"
                    r"(?::(?P<second>[0-5]\d))?(?:" + _MERIDIEM + r"|(?!\w|[:.,]\d))")
HOUR = re.compile(r"(?<![\w:.,])(?P<hour>1[0-2]|0?[1-9])" + _MERIDIEM)
_DOTTED = re.compile(r"(?<![\w:.,])(?P<hour>1[0-2]|0?[1-9])\.(?P<minute>[0-5]\d)"
                     r"(?P<second>)" + _MERIDIEM)
"""``7.30pm``: a dot between hour and minutes only with am/pm (else it is a decimal)."""
_SPAN = r"\d{1,2}+(?>(?::[0-5]\d)?)(?>(?:\s?[AaPp]\.?[Mm](?!\w)\.?)?)"
_RANGE = re.compile(rf"(?<![\w:.,])(?P<a>{_SPAN})\s?[-–—]\s?(?P<b>{_SPAN})(?![\w:]|[.,]\d)")
"""Two times joined by a dash (``9am-5pm``, ``10:00–12:30``): "to" between them."""


_HHMM = re.compile(r"(?<![\w:.,/-])(?P<hour>[01]\d|2[0-3])(?P<minute>[0-5]\d)"
                   r"(?P<hrs>\s?(?:hrs|hours)\b)?(?!\w|[.,:/-]\d)")
"""Four digits as a 24 h time (``the 1445 to Leeds``, ``departs 0915``, ``1430 hrs``)."""
_TIME_WORDS = frozenset({"at", "departs", "departing", "departure", "arrives", "arriving",
                         "arrival", "leaves", "leaving", "dep", "dep.", "arr", "arr."})
"""Words after which four digits are a time (not ``from``/``until``/``by``: years follow them)."""
_SERVICE_WORDS = frozenset({"to", "from", "service", "train", "bus", "departure", "arrival"})
"""``the 1445 to Leeds``: after "the", four digits followed by one of these are a time."""


def _hhmm(m: re.Match[str], options: NormalizeOptions) -> str:
    before = m.string[max(0, m.start() - 12):m.start()].split()
    after = m.string[m.end():m.end() + 12].split()
    last = before[-1].lower() if before else ""
    service = last == "the" and bool(after) and after[0].lower().strip(",.") in _SERVICE_WORDS
    if not (m["hrs"] or last in _TIME_WORDS or service):
        return m.group(0)
    hour, minute = m["hour"], int(m["minute"])
    said = ("oh " if hour[0] == "0" and hour != "00" else "") + spoken.cardinal(
        str(int(hour)), options)
    said += " " + _minutes(minute, options) if minute else " hundred"
    return said + (" hours" if m["hrs"] else "")


def _range(m: re.Match[str]) -> str:
    a, b = m["a"], m["b"]
    timed = [":" in t or t.rstrip(".")[-1:] in "mM" for t in (a, b)]
    return f"{a} to {b}" if any(timed) else m.group(0)


def _meridiem(m: re.Match[str], text: str) -> str:
    if not m["ap"]:
        return ""
    said = f" {m['ap'].lower()}.m"
    if m["dot"]:
        rest = text[m.end():m.end() + 2]
        if not rest.strip() or rest[-1:].isupper():
            said += "."
    return said


def _minutes(minute: int, options: NormalizeOptions) -> str:
    return ("oh " if minute < 10 else "") + spoken.cardinal(str(minute), options)


def _clock(m: re.Match[str], text: str, options: NormalizeOptions) -> str:
    hour, minute = int(m["hour"]), int(m["minute"])
    if hour == 24 and minute:
        return m.group(0)
    suffix = _meridiem(m, text)
    if hour in (0, 24) and minute == 0 and not suffix and not m["second"]:
        return "midnight"
    said = spoken.cardinal(str(hour), options)
    if minute:
        said += " " + _minutes(minute, options)
    elif not suffix and not re.match(r"\s(?:noon|midnight)\b", text[m.end():m.end() + 9]):
        said += " o'clock" if 1 <= hour <= 12 else " hundred"
    if m["second"]:
        seconds = int(m["second"])
        unit = "second" if seconds == 1 else "seconds"
        said += f" and {spoken.cardinal(str(seconds), options)} {unit}"
    return said + suffix


def times(text: str, options: NormalizeOptions) -> str:
    """``h:mm`` (and ``h:mm:ss``) with or without am/pm, and a bare hour with am/pm."""
    text = _RANGE.sub(_range, text)
    text = CLOCK.sub(lambda m: _clock(m, text, options), text)
    text = _DOTTED.sub(lambda m: _clock(m, text, options), text)
    text = _HHMM.sub(lambda m: _hhmm(m, options), text)
    return HOUR.sub(lambda m: spoken.cardinal(str(int(m["hour"])), options)
                     + _meridiem(m, text), text)
