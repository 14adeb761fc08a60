"""Money: ``$12.50`` "twelve dollars and fifty cents", ``£7.99``, ``€40``, ``5 €``, ``USD 5``.

A currency symbol or ISO code before or after the amount; two decimals are the minor unit
(cents, pence), one decimal is tens of it (``$2.5`` "two dollars and fifty cents"), more
decimals or a scale word make a decimal amount (``$1.5 million`` "one point five million
dollars"). ``99¢`` is cents; ``$9.99/month`` "... per month"; ``$5-$10`` and ``$5-10`` "five
dollars to ten dollars". One of a unit is singular (``$1`` "one dollar", ``1p`` "one penny"),
and so is the unit of a whole amount used as an adjective (``a $5 meal`` "a five dollar meal");
yen has no plural and no minor unit read. A minus sign starting the amount, before or after the
symbol (``-$5``, ``$-5``, ``−€12``, ``–£3``), is "minus": a debt is not read as a credit.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from agent.text.normalize import spoken
from agent.text.normalize.options import NormalizeOptions

__all__ = ["AFTER", "BEFORE", "CODES", "money"]


class Currency(NamedTuple):
    major: str
    minor: str | None
    """The minor unit's singular (cent, penny), None when it is not read (yen)."""


_SYMBOLS = {"$": Currency("dollar", "cent"), "US$": Currency("dollar", "cent"),
            "€": Currency("euro", "cent"), "£": Currency("pound", "penny"),
            "¥": Currency("yen", None), "₹": Currency("rupee", "paisa")}
CODES = {"USD": Currency("dollar", "cent"), "EUR": Currency("euro", "cent"),
         "GBP": Currency("pound", "penny"), "JPY": Currency("yen", None),
         "CHF": Currency("Swiss franc", "centime"), "CAD": Currency("Canadian dollar", "cent"),
         "AUD": Currency("Australian dollar", "cent"), "INR": Currency("rupee", "paisa")}
"""ISO codes read before or after an amount (``USD 5``, ``5 EUR``)."""
_SCALES = {"thousand": "thousand", "k": "thousand", "million": "million", "m": "million",
           "mn": "million", "billion": "billion", "bn": "billion", "b": "billion",
           "trillion": "trillion"}

_AMOUNT = r"(?P<whole>\d{1,3}+(?>(?:,\d{3})+)(?![\d,]\d)|\d++)(?:\.(?P<frac>\d++))?"
_SCALE = r"(?:\s?(?P<scale>thousand|million|billion|trillion|(?i:mn|bn|[kmb]))(?![\w]))?"
_SYMBOL = r"US\$|[$€£¥₹]"
_CODE = "|".join(CODES)
_PER = {"month": "month", "mo": "month", "year": "year", "yr": "year", "week": "week",
        "wk": "week", "day": "day", "night": "night", "hour": "hour", "hr": "hour", "h": "hour",
        "person": "person", "pp": "person", "kg": "kilogram", "lb": "pound", "km": "kilometer",
        "mi": "mile", "l": "liter", "gal": "gallon", "min": "minute", "ticket": "ticket"}
_PER_UNIT = r"(?:/(?P<per>" + "|".join(sorted(_PER, key=len, reverse=True)) + r")(?![\w/]))?"
_SIGN = r"(?P<sign>(?<![^\s(\[])[-−–](?=[\d$€£¥₹]|US\$|[A-Z]{3}\s?\d))?"
"""A minus sign that starts a word (``-$5``, ``−€12``, ``–$40``): the amount is negative."""
BEFORE = re.compile(rf"{_SIGN}(?<![\w$€£¥₹])(?P<sym>{_SYMBOL}|(?:{_CODE})\s?)(?P<inner>[-−])?"
                    rf"{_AMOUNT}{_SCALE}{_PER_UNIT}(?![\w/]|[.,]\d)")
AFTER = re.compile(rf"{_SIGN}(?<![\w.,$€£¥₹]){_AMOUNT}{_SCALE}"
                   rf"(?:\s?(?P<sym>[€£¥₹$]|(?:{_CODE})\b|¢)|(?P<pence>p)(?!\w|\.\w))")


def _units(count: str, unit: str, options: NormalizeOptions, *, exact_one: bool) -> str:
    said = spoken.number(count, options)
    return f"{said} {unit if exact_one else spoken.plural(unit)}"


def _say(m: re.Match[str], options: NormalizeOptions) -> str:
    groups = m.groupdict()
    negative = bool(groups.get("sign") or groups.get("inner"))
    return ("minus " if negative else "") + _amount(m, options)


def _amount(m: re.Match[str], options: NormalizeOptions) -> str:
    sym = "p" if m.groupdict().get("pence") else m["sym"].strip()
    whole, frac, scale = m["whole"], m["frac"] or "", m["scale"]
    if sym in ("¢", "p"):
        unit = "cent" if sym == "¢" else "penny"
        return _units(f"{whole}.{frac}" if frac else whole, unit, options,
                      exact_one=whole == "1" and not frac)
    currency = _SYMBOLS.get(sym) or CODES[sym]
    major = currency.major
    if scale:
        amount = f"{whole}.{frac}" if frac else whole
        return f"{spoken.number(amount, options)} {_SCALES[scale.lower()]} {spoken.plural(major)}"
    if frac and (len(frac) > 2 or currency.minor is None):
        return _units(f"{whole}.{frac}", major, options, exact_one=False)
    cents = int(frac.ljust(2, "0")) if frac else 0
    value = int(whole.replace(",", ""))
    parts = []
    if value or not cents:
        parts.append(_units(whole, major, options, exact_one=value == 1))
    if cents and currency.minor:
        parts.append(_units(str(cents), currency.minor, options, exact_one=cents == 1))
    return " and ".join(parts)


def _with_per(m: re.Match[str], options: NormalizeOptions) -> str:
    per = m.groupdict().get("per")
    said = _say(m, options)
    if not m["frac"] or m["scale"]:
        said = _as_adjective(m, said)
    return said + (f" per {_PER[per]}" if per else "")


_ARTICLE = re.compile(r"(?:^|\s)[Aa]n?\s$")


def _as_adjective(m: re.Match[str], said: str) -> str:
    """``a $5 meal`` "a five dollar meal": after "a" and before a word, the unit is singular."""
    after = m.string[m.end():m.end() + 2]
    if not (_ARTICLE.search(m.string[max(0, m.start() - 4):m.start()])
            and after[:1] == " " and after[1:].isalpha()):
        return said
    currency = _SYMBOLS.get(m["sym"].strip()) or CODES[m["sym"].strip()]
    plural = spoken.plural(currency.major)
    return said[:-len(plural)] + currency.major if said.endswith(plural) else said


_SPAN = r"(?:\d{1,3}+(?>(?:,\d{3})+)|\d++)(?:\.\d++)?"
_RANGE = re.compile(rf"(?<![\w$€£¥₹])(?P<sym>[$€£¥₹])(?P<a>{_SPAN})\s?[-–—]\s?(?P=sym)?"
                    rf"(?P<b>{_SPAN})(?![\w/]|[.,]\d)")
"""``$5-$10``, ``$5-10``, ``£5–£8``: each amount with its symbol, "to" between."""


def money(text: str, options: NormalizeOptions) -> str:
    """Amounts with a currency symbol or code, before or after, in words."""
    text = _RANGE.sub(lambda m: f"{m['sym']}{m['a']} to {m['sym']}{m['b']}", text)
    text = BEFORE.sub(lambda m: _with_per(m, options), text)
    return AFTER.sub(lambda m: _say(m, options), text)
