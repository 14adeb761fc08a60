"""The options of the normalizer's passes (what the ``[text]`` settings choose)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

__all__ = ["DateOrder", "NormalizeOptions", "Pass"]

DateOrder = Literal["mdy", "dmy", "ymd"]


@dataclass(frozen=True, slots=True)
class NormalizeOptions:
    """How ambiguous spans are read (the ``[text]`` settings)."""

    date_order: DateOrder = "mdy"
    """How ``3/12`` and ``12/03/2026`` are read: month first (``mdy``: March twelfth), day
    first (``dmy``: the third of December), or year first (``ymd``: ``2026/12/03``)."""
    british: bool = False
    """British English: ``and`` inside numbers (``two hundred and fifty``); set for ``en_GB``
    voices by :meth:`~agent.text.normalize.Normalizer.for_language`."""

    def __post_init__(self) -> None:
        if self.date_order not in ("mdy", "dmy", "ymd"):
            raise ValueError(f"date_order {self.date_order!r} is not one of mdy, dmy, ymd")


Pass = Callable[[str, NormalizeOptions], str]
"""One normalization pass: text in, the same text with the spans it understands in words."""
