"""The health snapshot: what the fleet (and systemd's STATUS line) knows about this device.

A :class:`Health` object gathers, on demand, what it reads itself (uptime, system figures,
liveness), the request window fed by :meth:`Health.record_request`, and one section per
provider the daemon registers; :func:`evaluate` turns a snapshot into ``ok | degraded |
failing`` with reasons (all the rules live there). Providers are called on the thread that takes
the snapshot, so they must only read. The shape is :class:`agent.health.report.HealthReport`;
the rules and threads: docs/internals.md#the-health-snapshot.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast, get_args

from agent import __version__
from agent.health.liveness import Liveness
from agent.health.report import State
from agent.health.sysinfo import SystemProbe
from agent.logs import get_logger
from agent.outcomes import SPEAK_OUTCOMES, Outcome, SpeakOutcome
from agent.settings import HealthSettings, Settings

if TYPE_CHECKING:
    from agent.health.report import HealthReport, HealthSummary, Quantiles, RequestsSection

__all__ = [
    "FIXED_KEYS",
    "OUTCOMES",
    "STATES",
    "Health",
    "Provider",
    "RequestStats",
    "evaluate",
    "percentile",
    "summary_line",
]

log = get_logger(__name__)

STATES: tuple[State, ...] = get_args(State)
OUTCOMES: tuple[SpeakOutcome, ...] = SPEAK_OUTCOMES
"""How a speak request can end (:data:`agent.outcomes.SPEAK_OUTCOMES`): what is counted."""
Provider = Callable[[], Mapping[str, Any]]
"""Returns one section of the report (the shapes the daemon's sections have are in
:mod:`agent.health.report`)."""

SCHEMA_VERSION = 1
MIN_REQUESTS_FOR_RATIO = 5
"""The failure-ratio rule needs at least this many finished+failed requests in the window."""

_SECTION_NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
FIXED_KEYS = frozenset({"schema", "state", "reasons", "device_id", "version", "time",
                        "uptime_s", "requests", "workers", "system"})
"""The report's own keys; no provider section may take one of these names."""
_MAX_ERROR_CHARS = 200

# What a provider section saying ``ok: false`` means, section by section (default degraded).
_NOT_OK_LEVEL: dict[str, State] = {"voices": "failing"}
_NOT_OK_TEXT: dict[str, str] = {
    "audio": "audio device unavailable",
    "voices": "voices unusable",
    "mqtt": "mqtt not ok",
    "journal": "request journal not written",
    "settings": "settings file not usable",
}


def percentile(sorted_values: list[float], p: float) -> float:
    """The nearest-rank ``p``-th percentile: the smallest value with at least ``p`` % of the
    values at or below it. ``sorted_values`` must be sorted and non-empty."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


@dataclass(frozen=True, slots=True)
class _Sample:
    outcome: SpeakOutcome
    synthesis_s: float | None
    audio_s: float | None
    first_audio_s: float | None

    @property
    def rtf(self) -> float | None:
        if self.synthesis_s is None or not self.audio_s:
            return None
        return self.synthesis_s / self.audio_s


def _duration(name: str, value: float | None) -> float | None:
    if value is None:
        return None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, not {value!r}")
    return float(value)


DEFAULT_THERMAL_LIMIT_C = 85.0
"""Temperature limit (deg C) when neither the settings nor a hardware profile give one."""


class RequestStats:
    """Counters since start plus the last ``window`` requests' durations. Thread-safe."""

    def __init__(self, window: int) -> None:
        self._lock = threading.Lock()
        self._totals = dict.fromkeys(OUTCOMES, 0)
        self._window: deque[_Sample] = deque(maxlen=window)
        self._last_synthesis_s: float | None = None

    def record(
        self,
        outcome: SpeakOutcome,
        *,
        synthesis_s: float | None = None,
        audio_s: float | None = None,
        first_audio_s: float | None = None,
    ) -> None:
        """Count one request. ``synthesis_s``: time spent synthesizing; ``audio_s``: length of
        the audio produced; ``first_audio_s``: from accepting the request to its first audio
        frame reaching the device. Leave out what does not apply (a cached phrase has no
        synthesis time; a rejected request has nothing)."""
        if outcome not in self._totals:
            raise ValueError(f"unknown outcome {outcome!r}; expected one of "
                             f"{tuple(o.value for o in OUTCOMES)}")
        sample = _Sample(outcome, _duration("synthesis_s", synthesis_s),
                         _duration("audio_s", audio_s), _duration("first_audio_s", first_audio_s))
        with self._lock:
            self._totals[outcome] += 1
            self._window.append(sample)
            if sample.synthesis_s is not None:
                self._last_synthesis_s = sample.synthesis_s

    def snapshot(self) -> RequestsSection:
        with self._lock:
            totals = dict(self._totals)
            samples = list(self._window)
            last_synthesis_s = self._last_synthesis_s

        def quantiles(values: list[float]) -> Quantiles | None:
            if not values:
                return None
            values.sort()
            return {"p50": round(percentile(values, 50), 4),
                    "p95": round(percentile(values, 95), 4)}

        return {
            "served": totals[Outcome.FINISHED],
            "failed": totals[Outcome.FAILED],
            "total": totals,
            "window": {
                "requests": len(samples),
                "failed": sum(1 for s in samples if s.outcome == Outcome.FAILED),
                "finished": sum(1 for s in samples if s.outcome == Outcome.FINISHED),
            },
            "synthesis_s": quantiles([s.synthesis_s for s in samples
                                      if s.synthesis_s is not None]),
            "rtf": quantiles([r for s in samples if (r := s.rtf) is not None]),
            "first_audio_s": quantiles([s.first_audio_s for s in samples
                                        if s.first_audio_s is not None]),
            "last_synthesis_s": (None if last_synthesis_s is None
                                 else round(last_synthesis_s, 4)),
        }


class Health:
    """Builds health snapshots for one agent. See the module docstring."""

    def __init__(
        self,
        settings: Settings,
        *,
        liveness: Liveness | None = None,
        probe: SystemProbe | None = None,
        clock: Callable[[], float] = time.monotonic,
        version: str = __version__,
        thermal_limit_c: float | None = None,
    ) -> None:
        """``thermal_limit_c``: the hardware profile's limit; ``health.thermal_limit_c`` wins."""
        self.settings = settings.health
        self.thermal_limit_c = (settings.health.thermal_limit_c or thermal_limit_c
                                or DEFAULT_THERMAL_LIMIT_C)
        self.device_id = settings.device_id
        self.version = version
        self.liveness = liveness
        self.probe = probe if probe is not None else SystemProbe(settings.cache.dir)
        self.requests = RequestStats(settings.health.window)
        self._clock = clock
        self._started = clock()
        self._lock = threading.Lock()
        self._providers: dict[str, Provider] = {}

    def add_provider(self, name: str, provider: Provider) -> None:
        """Report ``provider()`` as section ``name`` of every snapshot. Any thread."""
        if not _SECTION_NAME.match(name) or name in FIXED_KEYS:
            raise ValueError(f"invalid or reserved health section name {name!r}")
        with self._lock:
            if name in self._providers:
                raise ValueError(f"a health provider called {name!r} is already registered")
            self._providers[name] = provider

    def remove_provider(self, name: str) -> None:
        with self._lock:
            self._providers.pop(name, None)

    def record_request(
        self,
        outcome: SpeakOutcome,
        *,
        synthesis_s: float | None = None,
        audio_s: float | None = None,
        first_audio_s: float | None = None,
    ) -> None:
        """Count one finished request; see :meth:`RequestStats.record`. Any thread."""
        self.requests.record(outcome, synthesis_s=synthesis_s, audio_s=audio_s,
                             first_audio_s=first_audio_s)

    def compact(self) -> HealthSummary:
        """Just the overall ``state`` and its ``reasons`` (for ``pong``)."""
        snap = self.snapshot()
        return {"state": snap["state"], "reasons": snap["reasons"]}

    def snapshot(self) -> HealthReport:
        """The full health report, ``state`` and ``reasons`` included (JSON-able as long as
        the providers return JSON-able data)."""
        snap: HealthReport = {
            "schema": SCHEMA_VERSION,
            "state": "ok",
            "reasons": [],
            "device_id": self.device_id,
            "version": self.version,
            "time": datetime.now(UTC).isoformat(timespec="seconds"),
            "uptime_s": round(self._clock() - self._started, 3),
            "requests": self.requests.snapshot(),
            "workers": self.liveness.check().as_dict() if self.liveness is not None else {},
            "system": {**self.probe.read(), "cpu_temp_limit_c": self.thermal_limit_c},
        }
        with self._lock:
            providers = list(self._providers.items())
        sections = cast("dict[str, object]", snap)  # provider sections are keyed by name
        for name, provider in providers:
            sections[name] = _call_provider(name, provider)
        snap["state"], snap["reasons"] = evaluate(snap, self.settings)
        return snap


def _call_provider(name: str, provider: Provider) -> dict[str, Any]:
    try:
        section = provider()
        if not isinstance(section, Mapping):
            raise TypeError(f"returned {type(section).__name__}, not a mapping")
        return dict(section)
    except Exception as exc:
        log.warning("health_provider_failed", section=name, error=repr(exc)[:_MAX_ERROR_CHARS])
        return {"provider_error": f"{type(exc).__name__}: {exc}"[:_MAX_ERROR_CHARS]}


def _worker_findings(snap: Mapping[str, Any]) -> Iterator[tuple[State, str]]:
    for name, status in (snap.get("workers") or {}).items():
        if status.get("problem"):
            yield "failing", f"worker {name} {status['state']}: {status['problem']}"


def _section_findings(snap: Mapping[str, Any]) -> Iterator[tuple[State, str]]:
    for name, section in snap.items():
        if name in FIXED_KEYS or not isinstance(section, Mapping):
            continue
        if "provider_error" in section:
            yield "degraded", f"{name} provider failed: {section['provider_error']}"
            continue
        own_state = section.get("state")
        if section.get("ok") is False or own_state in ("degraded", "failing"):
            text = _NOT_OK_TEXT.get(name, f"{name} not ok")
            error = section.get("error") or section.get("reason")
            if error:
                text = f"{text}: {str(error)[:_MAX_ERROR_CHARS]}"
            level: State = (own_state if own_state in ("degraded", "failing")
                            else _NOT_OK_LEVEL.get(name, "degraded"))
            yield level, text
        if name == "voices":
            yield from _voice_findings(section)
        if name == "mqtt" and section.get("enabled", True) and section.get("connected") is False:
            yield "degraded", "mqtt disconnected"


def _voice_findings(section: Mapping[str, Any]) -> Iterator[tuple[State, str]]:
    live = [v for v in section.get("voices") or () if isinstance(v, Mapping)]
    last_reload = section.get("last_reload")
    last_reload = last_reload if isinstance(last_reload, Mapping) else {}
    default = section.get("default")
    missing = default is not None and default not in {v.get("voice") for v in live}
    if missing:  # what to fix: the default voice, and what is installed instead
        why = _default_missing(str(default), section.get("installed"), last_reload.get(default))
        yield ("degraded", f"default voice not loaded: {why}") if live else (
            "failing", f"no voice loaded: {why}")
    elif not live:
        yield "failing", "no voice loaded"
    for voice in live:
        for problem in voice.get("problems") or ():
            yield "degraded", f"voice {voice.get('voice')}: {str(problem)[:_MAX_ERROR_CHARS]}"
    for voice, result in last_reload.items():
        if (isinstance(result, Mapping) and result.get("outcome") == "rejected"
                and not (missing and voice == default)):  # said above
            reason = str(result.get("reason") or "no reason given")[:_MAX_ERROR_CHARS]
            yield "degraded", f"last model reload rejected: {voice}: {reason}"


def _default_missing(default: str, installed: Any, last: Any) -> str:
    """Why the default voice serves nothing: not installed in ``models.dir``, or rejected (the
    reason), and the voices installed (names only: the report goes over the network)."""
    known = isinstance(installed, list)
    have = f" (installed: {', '.join(str(n) for n in installed) or 'none'})" if known else ""
    if known and default not in installed:
        return f"models.default_voice {default!r} is not installed in models.dir{have}"
    if isinstance(last, Mapping) and last.get("outcome") == "rejected":
        reason = str(last.get("reason") or "no reason given")[:_MAX_ERROR_CHARS]
        return f"models.default_voice {default!r} was rejected: {reason}{have}"
    return f"models.default_voice {default!r} is not loaded yet{have}"


def _request_findings(snap: Mapping[str, Any], settings: HealthSettings,
                      ) -> Iterator[tuple[State, str]]:
    window = snap["requests"]["window"]
    judged = window["failed"] + window["finished"]
    if (settings.failure_ratio > 0 and judged >= MIN_REQUESTS_FOR_RATIO
            and window["failed"] / judged >= settings.failure_ratio):
        yield "degraded", f"{window['failed']} of the last {judged} requests failed"


def _system_findings(snap: Mapping[str, Any], settings: HealthSettings,
                     ) -> Iterator[tuple[State, str]]:
    system = snap["system"]
    temp = system.get("cpu_temp_c")
    limit = system.get("cpu_temp_limit_c") or DEFAULT_THERMAL_LIMIT_C  # a snapshot may lack it
    if temp is not None and temp >= limit:
        yield "degraded", f"cpu temperature {temp:.1f} C (limit {limit:g} C)"
    throttled = system.get("throttled")
    if throttled and throttled["now"]:
        yield "degraded", "throttled now: " + ", ".join(throttled["now"])
    disk = system.get("disk")
    min_free = settings.disk_min_free_mb * 1024 * 1024
    if disk and min_free and disk["free_bytes"] < min_free:
        yield "degraded", (f"{disk['free_bytes'] // (1024 * 1024)} MiB free for {disk['path']} "
                           f"(limit {settings.disk_min_free_mb} MiB)")


def _findings(snap: Mapping[str, Any], settings: HealthSettings) -> Iterator[tuple[State, str]]:
    """Every rule that fires on ``snap``, as (level, reason). All the rules are here."""
    yield from _worker_findings(snap)
    yield from _section_findings(snap)
    yield from _request_findings(snap, settings)
    yield from _system_findings(snap, settings)


def evaluate(snap: Mapping[str, Any], settings: HealthSettings) -> tuple[State, list[str]]:
    """The overall state of ``snap`` and the reasons for it, worst first."""
    findings = sorted(_findings(snap, settings), key=lambda f: -STATES.index(f[0]))
    state: State = findings[0][0] if findings else "ok"
    return state, [reason for _, reason in findings]


def summary_line(snap: HealthReport) -> str:
    """One line for systemd's ``STATUS=``: state, first reason, request counts."""
    requests = snap["requests"]
    head = snap["state"] if not snap["reasons"] else f"{snap['state']}: {snap['reasons'][0]}"
    more = len(snap["reasons"]) - 1
    if more > 0:
        head += f" (+{more} more)"
    return f"{head}; served {requests['served']}, failed {requests['failed']}"
