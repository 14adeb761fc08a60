"""The values of SSML attributes: break times and strengths, prosody rates and volumes.

Each parser takes the attribute's value and the element's position (``line L, column C``, for
the reason) and returns seconds or a factor, or raises :class:`~agent.text.ssml_tree.SsmlError`.
"""

from __future__ import annotations

import math
import re
from typing import Final

from agent.text.document import MAX_PAUSE_S
from agent.text.ssml_tree import SsmlError

__all__ = ["MAX_VOLUME", "RATES", "RATE_RANGE", "STRENGTHS", "VOLUMES", "rate_factor",
           "seconds", "volume_factor"]

STRENGTHS: Final = {"none": 0.0, "x-weak": 0.1, "weak": 0.25, "medium": 0.4, "strong": 0.7,
                    "x-strong": 1.0}
"""``<break strength>`` in seconds of silence; a ``<break/>`` without attributes is medium."""
RATES: Final = {"x-slow": 0.5, "slow": 0.75, "medium": 1.0, "default": 1.0, "fast": 1.3,
                "x-fast": 1.6}
"""``<prosody rate>`` keywords, as multipliers of the request's speaking rate."""
VOLUMES: Final = {"silent": 0.0, "x-soft": 0.25, "soft": 0.5, "medium": 1.0, "default": 1.0,
                  "loud": 1.4, "x-loud": 2.0}
"""``<prosody volume>`` keywords, as factors on the request's volume (1.0 after multiplying is
the loudest the agent plays)."""
RATE_RANGE: Final = (0.25, 4.0)
"""Bounds of a ``<prosody rate>`` (nested ones multiplied)."""
MAX_VOLUME: Final = 4.0
"""Largest ``<prosody volume>`` factor (nested ones multiplied)."""

_TIME: Final = re.compile(r"(\d{1,6}(?:\.\d{1,6})?|\.\d{1,6})\s?(ms|s)")
_PERCENT: Final = re.compile(r"([+-]?)(\d{1,4}(?:\.\d{1,4})?)%")
_NUMBER: Final = re.compile(r"\d{1,3}(?:\.\d{1,4})?")
_DECIBELS: Final = re.compile(r"([+-]?\d{1,3}(?:\.\d{1,3})?)\s?dB")


def seconds(value: str, where: str) -> float:
    """``<break time>``: ``500ms``, ``1s``, ``1.5 s``... in seconds, at most the longest pause."""
    match = _TIME.fullmatch(value)
    if match is None:
        raise SsmlError(f"<break time={value!r}> is not a time such as 500ms or 1.5s "
                        f"({where})")
    length = float(match[1]) / (1000.0 if match[2] == "ms" else 1.0)
    if length > MAX_PAUSE_S:
        raise SsmlError(f"<break time={value!r}> is longer than {MAX_PAUSE_S:g} s "
                        f"({where})")
    return length


def rate_factor(value: str, where: str) -> float:
    """``<prosody rate>``: a keyword (:data:`RATES`), ``80%`` (of the rate), ``+10%``/``-10%``
    (a change) or a multiplier (``1.5``)."""
    if value in RATES:
        return RATES[value]
    percent = _PERCENT.fullmatch(value)
    if percent is not None:
        share = float(percent[2]) / 100.0
        factor = share if not percent[1] else 1.0 + share * (1 if percent[1] == "+" else -1)
    elif _NUMBER.fullmatch(value):
        factor = float(value)
    else:
        raise SsmlError(f"<prosody rate={value!r}> is not a keyword ({', '.join(RATES)}), "
                        f"a percentage or a number ({where})")
    if not factor > 0.0:
        raise SsmlError(f"<prosody rate={value!r}> must be above zero ({where})")
    return factor


def volume_factor(value: str, where: str) -> float:
    """``<prosody volume>``: a keyword (:data:`VOLUMES`), a change in decibels (``+6dB``,
    ``-3 dB``), ``50%`` (of the volume) or ``+10%``/``-10%`` (a change)."""
    if value in VOLUMES:
        return VOLUMES[value]
    decibels = _DECIBELS.fullmatch(value)
    if decibels is not None:
        return float(math.pow(10.0, float(decibels[1]) / 20.0))
    percent = _PERCENT.fullmatch(value)
    if percent is not None:
        share = float(percent[2]) / 100.0
        factor = share if not percent[1] else 1.0 + share * (1 if percent[1] == "+" else -1)
        if factor >= 0.0:
            return factor
    raise SsmlError(f"<prosody volume={value!r}> is not a keyword ({', '.join(VOLUMES)}), "
                    f"a change in dB (+6dB) or a percentage ({where})")
