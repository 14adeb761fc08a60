"""A device's clock against the controller's, from one ping (for synchronized starts: the start is
wall-clock time, so devices whose clocks disagree start apart; docs/fleet.md).

The controller notes when it sent the ping and when the ``pong`` came; the ``pong``'s ``ts`` is
the device's clock in between. Assuming the way there and back take as long, the offset is
``ts`` less the midpoint, within half the round trip either way. :func:`disagreement_ms` is
how far apart the clocks of several devices are at least, those bounds allowed for: a figure
that is never larger than the truth, so a warning built on it is never a false alarm.

The device's side (a ping's ``sent_ms`` against its own clock) is
:class:`agent.health.clock.PingClock`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

__all__ = ["MAX_SENT_MS", "ClockOffset", "clock_offset", "disagreement_ms"]

MAX_SENT_MS: Final = 4_102_444_800_000.0
"""The latest ``sent_ms`` a ping may carry (2100-01-01 UTC, Unix ms)."""


@dataclass(frozen=True, slots=True)
class ClockOffset:
    """A device's clock less the controller's (ms), and the round trip that bounds it."""

    offset_ms: float
    rtt_ms: float


def clock_offset(sent: float, received: float, device_ts: object) -> ClockOffset | None:
    """The offset from a ping sent and answered at ``sent`` and ``received`` (Unix time, the
    controller's clock) and the answer's ``ts``; None when ``ts`` is not a number."""
    if isinstance(device_ts, bool) or not isinstance(device_ts, int | float):
        return None
    if not math.isfinite(device_ts) or received < sent:
        return None
    midpoint = (sent + received) / 2
    return ClockOffset(round((device_ts - midpoint) * 1000, 2), round((received - sent) * 1000, 2))


def disagreement_ms(offsets: Iterable[ClockOffset]) -> float:
    """How far apart the clocks are at least: the largest lower bound less the smallest upper
    bound (0 when the bounds overlap)."""
    bounds = [(o.offset_ms - o.rtt_ms / 2, o.offset_ms + o.rtt_ms / 2) for o in offsets]
    if len(bounds) < 2:
        return 0.0
    return round(max(0.0, max(low for low, _ in bounds) - min(high for _, high in bounds)), 2)

