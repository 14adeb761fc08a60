"""Cardinals and decimals: ``1,234`` → "one thousand, two hundred and thirty-four"."""

from __future__ import annotations

import re

from num2words import num2words

from agent.text.normalize.options import NormalizeOptions

__all__ = ["cardinals"]

_NUMBER = re.compile(r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?![\w,]|\.\d)|(?<![\w.,])\d+(?![\w,]|\.\d)")


def _say(match: re.Match[str]) -> str:
    return str(num2words(int(match.group(0).replace(",", "")), lang="en"))


def cardinals(text: str, options: NormalizeOptions) -> str:
    """Whole numbers, with or without thousands separators, in words."""
    del options
    return _NUMBER.sub(_say, text)
