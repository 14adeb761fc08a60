"""Phone numbers: digit by digit, with a pause (a comma) between the groups as written.

``555-0123`` "five five five, oh one two three"; ``(415) 555-0123``; ``+1 415 555 0123`` "plus
one, four one five, ..."; zero is "oh", as US announcers say it. Found by shape: a North
American number (with ``+1`` or ``1-``, brackets, spaces, dots or hyphens), ``555-0123``, a
``+`` number in groups, a national number with its leading zero (``0800 123 4567``), any digits
right after ``call``, ``dial``, ``phone``, ``text``... and those joined by "or" (``dial 112 or
999``); an SMS short code (``text JOIN to 80888``), an emergency or service number after a word
naming one (``Emergency number: 112``), ``911``, and ten or eleven digits in one run.
``100-2000`` after ``from``, ``pages``, ``rooms``... is a range. The rules:
docs/text.md#announcements-in-words-the-normalizer.
"""

from __future__ import annotations

import re

from agent.text.normalize import spoken
from agent.text.normalize.options import NormalizeOptions

__all__ = ["phones"]

_NANP = re.compile(r"(?<![\w+(-])(?P<country>\+?1[\s.-]|\+1)?(?:\((?P<area1>\d{3})\)\s?|"
                   r"(?P<area2>\d{3})[\s.-])(?P<exchange>\d{3})[\s.-](?P<line>\d{4})(?![\w-]|\.\d)")
_LOCAL = re.compile(r"(?<![\w.,:/+-])(?P<exchange>\d{3})-(?P<line>\d{4})(?![\w-]|[.,]\d)")
_INTERNATIONAL = re.compile(r"(?<![\w+])\+(?P<groups>\d{1,3}(?:[ .-]\d{1,4}){1,5})(?![\w]|[.-]\d)")
_TRUNK = re.compile(r"(?<![\w.,:/+-])(?P<number>0\d{2,4}+(?>(?:[ -]\d{3,4}+){1,2}))"
                    r"(?![\w-]|[.,]\d)")
"""A national number with its leading zero, in groups (``0800 123 4567``, ``020 7946 0958``)."""
_DIALED = re.compile(r"(?i:\b(?:call|dial|phone|tel|telephone|text|fax|ring)\b\.?:?)\s"
                     r"(?P<number>\d{2,15}+(?>(?:[ .-]\d{2,6}+){0,4}))"
                     r"(?P<more>(?>(?:,?\s(?:or|and)\s\d{2,15}+){0,3}))(?![\w]|[.,-]\d)")


_SHORT_CODE = re.compile(r"(?i:\b(?:text|txt|send|sms)\s)(?P<word>[A-Za-z0-9]{1,12}\s(?:to|on)\s)"
                         r"(?P<number>\d{3,6}+)(?![\w]|[.,:]\d)")
"""An SMS short code: ``text JOIN to 80888``, ``send STOP to 60123``: digit by digit."""
_SERVICE = re.compile(r"(?i:\b(?:emergency|emergencies|police|ambulance|fire|coastguard"
                      r"|helpline|hotline)(?:\s(?:number|line|services?))?[\s:,]{1,3}(?:on\s|is\s)?)"
                      r"(?P<number>999|112|111|000|101|911|988|311|211|411|511|811)(?![\w]|[.,:]\d)"
                      r"|(?<![\w.,$€£-])(?P<alone>911)(?![\w]|[.,:]\d|\s[a-z]+s\b)")
"""Emergency and service numbers after a word that names one (``Emergency number: 112``), and
``911`` anywhere: digit by digit, never an amount."""
_UNBROKEN = re.compile(r"(?<![\w.,:/+$€£-])(?P<number>[1-9]\d{9,10})(?![\w]|[.,:/-]\d)")
"""Ten or eleven digits in one run (``4155550123``): a phone number, never an amount."""

_NOT_PHONE = frozenset({"from", "between", "page", "pages", "pp.", "room", "rooms", "seat", "seats",
                        "number", "numbers", "no.", "nos.", "years", "aged", "ages", "items"})


def _local(m: re.Match[str], text: str) -> str:
    words = text[max(0, m.start() - 10):m.start()].split()
    if words and words[-1].lower() in _NOT_PHONE:
        return m.group(0)
    return _groups(m["exchange"], m["line"])


def _groups(*groups: str) -> str:
    return ", ".join(spoken.digits(group, zero="oh") for group in groups if group)


def _nanp(m: re.Match[str]) -> str:
    said = _groups(m["area1"] or m["area2"], m["exchange"], m["line"])
    country = m["country"] or ""
    return f"{'plus ' if country.startswith('+') else ''}one, {said}" if country else said


def phones(text: str, options: NormalizeOptions) -> str:
    """Phone numbers in words, digit by digit."""
    del options
    text = _NANP.sub(_nanp, text)
    text = _INTERNATIONAL.sub(lambda m: "plus " + _groups(*re.split(r"[ .-]", m["groups"])), text)
    text = _LOCAL.sub(lambda m: _local(m, text), text)
    text = _TRUNK.sub(lambda m: _groups(*re.split(r"[ -]", m["number"])), text)
    text = _DIALED.sub(_dialed, text)
    text = _SHORT_CODE.sub(lambda m: m.group(0)[:m.start("number") - m.start()]
                           + _groups(m["number"]), text)
    text = _SERVICE.sub(lambda m: m.group(0)[:m.start("number") - m.start()] + _groups(m["number"])
                        if m["number"] else _groups(m["alone"]), text)
    return _UNBROKEN.sub(lambda m: _groups(m["number"]), text)


def _dialed(m: re.Match[str]) -> str:
    """``dial 112 or 999``: the number, and the ones joined to it by "or"/"and", digit by digit."""
    said = m.group(0)[:m.start("number") - m.start()] + _groups(*re.split(r"[ .-]", m["number"]))
    return said + re.sub(r"\d++", lambda d: _groups(d.group(0)), m["more"])
