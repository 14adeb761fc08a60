"""The limits of common MQTT brokers that the agent keeps within (AWS IoT Core's, the tightest).

Slashes and bytes in a topic (:data:`MAX_TOPIC_SLASHES`, :data:`MAX_TOPIC_BYTES`: the settings
bound what topics are built of), filters in one SUBSCRIBE (:func:`batches`) and bytes in a
message (:data:`MAX_PAYLOAD_BYTES`; :func:`fit_report` shrinks the health report to fit).
docs/fleet.md#limits-the-agent-keeps-within.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

__all__ = ["MAX_FILTERS_PER_SUBSCRIBE", "MAX_PAYLOAD_BYTES", "MAX_TOPIC_BYTES",
           "MAX_TOPIC_SLASHES", "batches", "fit_report"]

MAX_TOPIC_SLASHES = 7
"""Slashes in a topic name (AWS IoT Core: eight levels)."""
MAX_TOPIC_BYTES = 256
"""UTF-8 bytes in a topic name (AWS IoT Core)."""
MAX_FILTERS_PER_SUBSCRIBE = 8
"""Topic filters in one SUBSCRIBE packet (AWS IoT Core)."""
MAX_PAYLOAD_BYTES = 128_000
"""Bytes in one message's payload (AWS IoT Core: 128 KB; counted here in thousands, the
smaller reading)."""

_KEPT = frozenset({"schema", "state", "reasons", "device_id", "version", "time", "uptime_s"})
"""Health report keys never shrunk: what a fleet view reads first."""

T = TypeVar("T")


def batches(items: Sequence[T], size: int = MAX_FILTERS_PER_SUBSCRIBE) -> list[tuple[T, ...]]:
    """``items`` in order, in groups of at most ``size`` (one SUBSCRIBE each)."""
    return [tuple(items[start:start + size]) for start in range(0, len(items), size)]


def _dump(report: Mapping[str, Any]) -> bytes:
    return json.dumps(report, separators=(",", ":"), default=str).encode()


def fit_report(report: Mapping[str, Any], limit: int = MAX_PAYLOAD_BYTES) -> bytes:
    """The health report as compact JSON of at most ``limit`` bytes.

    A report over the limit has its largest sections replaced, largest first, by
    ``{"omitted": "<n> bytes: over the message size limit"}`` until it fits (the state, its
    reasons and the device's identity are always kept). Its ``reasons`` say so.
    """
    payload = _dump(report)
    if len(payload) <= limit:
        return payload
    shrunk = dict(report)
    sizes = sorted(((len(_dump({key: value})), key) for key, value in report.items()
                    if key not in _KEPT), reverse=True)
    omitted: list[str] = []
    for size, key in sizes:
        shrunk[key] = {"omitted": f"{size} bytes: over the message size limit ({limit})"}
        omitted.append(key)
        note = f"health sections omitted to fit {limit} bytes: {', '.join(omitted)}"
        shrunk["reasons"] = [*report.get("reasons", ()), note]
        payload = _dump(shrunk)
        if len(payload) <= limit:
            return payload
    return _dump({key: shrunk[key] for key in shrunk if key in _KEPT})
