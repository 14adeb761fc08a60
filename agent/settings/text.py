"""The ``[text]`` section: how request text is read (normalizer, lexicon)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agent.settings.base import Section
from agent.settings.paths import AbsPath


class TextSettings(Section):
    """How request text is read before espeak-ng phonemizes it (see docs/text.md)."""

    normalize: bool = Field(
        default=True,
        description="Put numbers, money, times, dates, units, codes, abbreviations and symbols "
        "in words before phonemizing (English, German, French and Spanish voices; espeak-ng "
        "reads other languages itself). "
        "Off: the text goes to espeak-ng as written.",
    )
    date_order: Literal["mdy", "dmy", "ymd"] = Field(
        default="mdy",
        description="How a numeric date such as 3/12 or 03/12/2026 is read: mdy (March 12), "
        "dmy (3 December) or ymd; ISO dates (2026-12-03) are always year-month-day.",
    )
    symbols: Literal["drop", "espeak"] = Field(
        default="drop",
        description="Emoji and other symbols without a reading: drop them (text of nothing "
        "but such symbols is refused as having nothing to speak), or leave them for espeak-ng, "
        "which names them (\"party popper\").",
    )
    lexicon: AbsPath | None = Field(
        default=None,
        description="The device lexicon: a TOML file of words and how to say them (a "
        "respelling or IPA), validated at load and reloaded when it changes (docs/text.md, "
        "Lexicon); unset = none.",
    )

