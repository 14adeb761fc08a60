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
    "kW": "kilowatt", "kWh": "kilowatt hour", "mAh": "milliamp hour",
    "m²": "square meter", "km²": "square kilometer", "m2": "square meter", "sq ft": "square foot",
    "m³": "cubic meter",
}
"""Unit symbols and what they are called (singular; the plural is made)."""

_PER = {"h": "hour", "hr": "hour", "s": "second", "sec": "second", "min": "minute",
        "km": "kilometer", "m": "meter", "kg": "kilogram", "l": "liter", "L": "liter",
        "day": "day", "d": "day", "wk": "week", "yr": "year", "mo": "month", "g": "gram",
        "m²": "square meter", "m2": "square meter", "kWh": "kilowatt hour", "gal": "gallon",
        "mi": "mile", "ft": "foot", "lb": "pound"}

_NUMBER = r"(?P<sign>[-−]|minus\s)?(?P<number>(?:\d{1,3}+(?:,\d{3})++(?![\d,]\d)|\d++)(?:\.\d++)?)"
_NAMES = "|".join(sorted((re.escape(u) for u in UNITS), key=len, reverse=True))
_PERS = "|".join(sorted((re.escape(u) for u in _PER), key=len, reverse=True))
_UNIT = re.compile(rf"(?<![\w.,/]){_NUMBER}\s?(?P<unit>{_NAMES})(?:/(?P<per>{_PERS}))?"
                   r"(?![\w/²³]|\.\w)")
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
    return _UNIT.sub(lambda m: _unit(m, options), text)
