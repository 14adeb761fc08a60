"""Units and temperatures: ``50 km/h``, ``23 kg``, ``60 mph``, ``2 GB``, ``22°C``, ``-5 °F``.

A number (whole or decimal, thousands separators, a sign) followed by a unit symbol, with or
without a space: the unit is said in full, singular for exactly one (``1 kg`` "one kilogram",
``1.5 kg`` "one point five kilograms"), after "a" and before a hyphen (``a 500 m walk`` "a five
hundred meter walk", ``2 km-long``), and a per-unit with "per" (``km/h`` "kilometers per
hour", ``m/s``). Symbols that are also words (``in``, ``a``, ``am``) are not taken, except
``in`` after feet (``6 ft 2 in``, ``5'10"`` "five feet ten inches"); ``m`` is meters, ``min``
minutes. Letters more often something else are no unit: ``K`` (``5K run``, ``4K``), ``W``
(``Exit 12 W``), ``V``. Temperatures: ``°C``, ``°F``, ``°K`` after a number are degrees
Celsius, degrees Fahrenheit and kelvins; ``°`` alone is degrees; a leading ``-`` is "minus".
"""

from __future__ import annotations

import re

from agent.text.normalize import spoken
from agent.text.normalize.options import NormalizeOptions

__all__ = ["UNITS", "temperatures", "units"]

UNITS = {
    "km": "kilometer", "m": "meter", "cm": "centimeter", "mm": "millimeter",
    "mi": "mile", "ft": "foot", "yd": "yard", "nm": "nanometer", "NM": "nautical mile",
    "kg": "kilogram", "g": "gram", "mg": "milligram", "lb": "pound", "lbs": "pound",
    "oz": "ounce", "t": "tonne",
    "l": "liter", "L": "liter", "ml": "milliliter", "mL": "milliliter", "cl": "centiliter",
    "gal": "gallon",
    "kph": "kilometer per hour", "mph": "mile per hour", "knots": "knot", "kt": "knot",
    "s": "second", "sec": "second", "secs": "second", "ms": "millisecond",
    "min": "minute", "mins": "minute", "h": "hour", "hr": "hour", "hrs": "hour",
    "KB": "kilobyte", "kB": "kilobyte", "MB": "megabyte", "GB": "gigabyte", "TB": "terabyte",
    "Mbps": "megabit per second", "Gbps": "gigabit per second",
    "Hz": "hertz", "kHz": "kilohertz", "MHz": "megahertz", "GHz": "gigahertz",
    "kW": "kilowatt", "kWh": "kilowatt hour", "mAh": "milliamp hour", "Wh": "watt hour",
    "mA": "milliamp", "kV": "kilovolt", "mV": "millivolt", "MW": "megawatt", "kVA": "kilovolt amp",
    "μg": "microgram", "µg": "microgram", "mcg": "microgram", "μm": "micrometer",
    "µm": "micrometer", "μs": "microsecond", "µs": "microsecond", "μF": "microfarad",
    "µF": "microfarad", "μA": "microamp", "µA": "microamp",
    "Ω": "ohm", "kΩ": "kilohm", "MΩ": "megohm",
    "m²": "square meter", "km²": "square kilometer", "m2": "square meter", "sq ft": "square foot",
    "m³": "cubic meter",
}
"""Unit symbols and what they are called (singular; the plural is made)."""

_PER = {"h": "hour", "hr": "hour", "s": "second", "sec": "second", "min": "minute",
        "km": "kilometer", "m": "meter", "kg": "kilogram", "l": "liter", "L": "liter",
        "day": "day", "d": "day", "wk": "week", "yr": "year", "mo": "month", "g": "gram",
        "m²": "square meter", "m2": "square meter", "kWh": "kilowatt hour", "gal": "gallon",
        "mi": "mile", "ft": "foot", "lb": "pound"}

_NUMBER = (r"(?P<sign>[-−]|minus\s)?"
           r"(?P<number>(?:\d{1,3}+(?>(?:,\d{3})+)(?![\d,]\d)|\d++)(?:\.\d++)?)")
_NAMES = "|".join(sorted((re.escape(u) for u in UNITS), key=len, reverse=True))
_PERS = "|".join(sorted((re.escape(u) for u in _PER), key=len, reverse=True))
_UNIT = re.compile(rf"(?<![\w.,/]){_NUMBER}\s?(?P<unit>{_NAMES})(?:/(?P<per>{_PERS}))?"
                   r"(?![\w/²³]|\.\w)")
_ELECTRIC = re.compile(rf"(?<![\w.,/]){_NUMBER}(?P<space>\s?)(?P<unit>[VAW])(?![\w/²³'’-]|\.\w)")
"""``12 V``, ``230V``, ``5 A``, ``60 W``: letters that are other things too (:func:`_electric`)."""
_ELECTRIC_NAMES = {"V": "volt", "A": "amp", "W": "watt"}
_ELECTRIC_WORDS = re.compile(
    r"(?i:\b(?:volts?|voltage|watts?|amps?|amperes?|fuses?|bulbs?|lamps?|chargers?|charging"
    r"|sockets?|plugs?|power|current|rated|breakers?|circuits?|batter(?:y|ies)|output|input"
    r"|supply|motors?|heaters?|load|draws?|solar|panels?|inverters?|adapters?|cables?|led"
    r"|kettles?|ac|dc)\b)|\d\s?(?:[kmM]?[VW]|mA|mAh|kWh)\b")
_NOT_ELECTRIC = frozenset({"gate", "gates", "platform", "platforms", "seat", "row", "exit",
                           "room", "bus", "route", "level", "floor", "zone", "terminal", "car",
                           "coach", "bay", "stand", "door", "track", "line", "junction",
                           "grade", "type", "class", "size", "vitamin"})


def _electric(m: re.Match[str], text: str, options: NormalizeOptions) -> str:
    """Volts after a number; amps and watts only where the text speaks of electricity (a fuse,
    a bulb, volts...), never after a code word (``Gate 5 A``, ``Exit 12 W``)."""
    words = text[max(0, m.start() - 16):m.start()].split()
    if words and words[-1].lower().strip(",:") in _NOT_ELECTRIC:
        return m.group(0)
    if m["unit"] != "V" and not _ELECTRIC_WORDS.search(text):
        return m.group(0)
    if m["unit"] == "A" and not m["space"] and m.string[m.end():m.end() + 1] == " ":
        return m.group(0)  # "13A fuse" is amps only with a unit word; "12A" is a seat
    said, one = _count(m, options)
    one = one or _adjective(m)
    name = _ELECTRIC_NAMES[m["unit"]]
    return f"{said} {name if one else spoken.plural(name)}"


_ARTICLE = re.compile(r"(?:^|\s)(?:[Aa]n?|[Tt]he)\s$")
_NEXT_WORD = re.compile(r" ([a-z]+)\b")
_NOT_NOUNS = frozenset({"at", "of", "and", "or", "in", "on", "to", "for", "from", "with", "is",
                        "are", "was", "max", "each", "per", "by", "only", "now"})


def _adjective(m: re.Match[str]) -> bool:
    """``a 60 W bulb``, ``the 10 x 12 ft room``, ``2 km-long``: after an article and before a
    word that is no preposition, the unit of a number used as an adjective is singular."""
    after = m.string[m.end():m.end() + 16]
    if after[:1] == "-":
        return True
    following = _NEXT_WORD.match(after)
    return (bool(_ARTICLE.search(m.string, max(0, m.start() - 5), m.start()))
            and following is not None and following.group(1) not in _NOT_NOUNS)


_BY = r"\s?[x×X]\s?"
_SIDE = r"(?:\d{1,4}+(?:\.\d{1,3}+)?)"
_DIMENSIONS = re.compile(rf"(?<![\w.,/])(?P<a>{_SIDE}){_BY}(?P<b>{_SIDE})(?:{_BY}(?P<c>{_SIDE}))?"
                         rf"(?:\s?(?P<unit>{_NAMES}))?(?![\w/²³]|\.\w|[.,]\d)")
"""``10 x 12 ft``, ``3x4 m``, ``40 × 30 × 20 cm``: "ten by twelve feet"."""


def _dimensions(m: re.Match[str], options: NormalizeOptions) -> str:
    sides = [spoken.number(side, options) for side in (m["a"], m["b"], m["c"]) if side]
    said = " by ".join(sides)
    unit = m["unit"]
    if not unit:
        return said
    name = UNITS[unit]
    return f"{said} {name if _adjective(m) else spoken.plural(name)}"


_DEGREES = re.compile(rf"(?<![\w.,/]){_NUMBER}\s?°\s?(?P<scale>[CFK])?"
                      r"(?![\w°])")
_SCALES = {"C": "Celsius", "F": "Fahrenheit", "K": ""}


def _count(m: re.Match[str], options: NormalizeOptions) -> tuple[str, bool]:
    """The number in words (with "minus") and whether it is exactly one."""
    before = m.string[m.start() - 1:m.start()] if m.start() else ""
    sign = "minus " if m["sign"] and (not before or not before.isalnum()) else ""
    return sign + spoken.number(m["number"], options), m["number"] == "1"


def _unit(m: re.Match[str], options: NormalizeOptions) -> str:
    said, one = _count(m, options)
    one = (one or m.string[max(0, m.start() - 3):m.start()].lower() in (" a ", "an ", "a ")
           or m.string[m.end():m.end() + 1] == "-")  # "a 2 km-long tunnel"
    name = UNITS[m["unit"]]
    head, per, tail = name.partition(" per ")
    head = head if one else spoken.plural(head)
    name = f"{head}{per}{tail}"
    if m["per"]:
        name += f" per {_PER[m['per']]}"
    return f"{said} {name}"


def _degrees(m: re.Match[str], options: NormalizeOptions) -> str:
    said, one = _count(m, options)
    scale = m["scale"] or ""
    if scale == "K":
        return f"{said} {'kelvin' if one else 'kelvins'}"
    unit = "degree" if one else "degrees"
    return f"{said} {unit} {_SCALES[scale]}".rstrip() if scale else f"{said} {unit}"


_FEET_INCHES = re.compile(r"(?<![\w.,/])(?P<feet>\d{1,2}+)\s?(?:ft|')\s?(?P<inches>\d{1,2}+)\s?"
                          r"(?:in\b|\"|”|'')")
"""A height: ``6 ft 2 in``, ``5'10"`` (``in`` alone is a word, so only after feet)."""


def _feet_inches(m: re.Match[str], options: NormalizeOptions) -> str:
    feet, inches = m["feet"], m["inches"]
    return (f"{spoken.cardinal(feet, options)} {'foot' if feet == '1' else 'feet'} "
            f"{spoken.cardinal(inches, options)} {'inch' if inches == '1' else 'inches'}")


def temperatures(text: str, options: NormalizeOptions) -> str:
    """``22°C`` "twenty two degrees Celsius", ``-5 °F``, ``300 K``, ``90°``."""
    return _DEGREES.sub(lambda m: _degrees(m, options), text)


def units(text: str, options: NormalizeOptions) -> str:
    """A number and a unit symbol in words; feet and inches together."""
    text = _FEET_INCHES.sub(lambda m: _feet_inches(m, options), text)
    if any(c in text for c in "x×X"):
        text = _DIMENSIONS.sub(lambda m: _dimensions(m, options), text)
    text = _UNIT.sub(lambda m: _unit(m, options), text)
    return _ELECTRIC.sub(lambda m: _electric(m, text, options), text)
