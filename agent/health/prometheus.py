"""The health snapshot in Prometheus text format, for node_exporter's textfile collector.

node_exporter (``--collector.textfile.directory``) reads every ``*.prom`` file at each scrape;
:func:`write_textfile` replaces ours atomically (temporary file, fsync, rename), and
:func:`remove_textfile` deletes it at a clean stop, so a stopped agent never looks healthy.
Names: ``tts_agent_*``, base units, ``_total`` on counters; the file says when it was written
(``tts_agent_last_write_timestamp_seconds``: a killed or hung agent's goes stale). Every
top-level number or boolean of a provider section becomes ``tts_agent_<section>_<key>``: a
counter (``_total``) when it is in :data:`COUNTERS`, else a gauge; strings, lists and nested
objects are left out. The alert recipe: docs/operations.md#prometheus.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.fsutil import atomic_write
from agent.health.snapshot import FIXED_KEYS, STATES

if TYPE_CHECKING:
    from agent.health.report import HealthReport, Quantiles

__all__ = ["COUNTERS", "GAUGES", "MAX_REASON_CHARS", "MAX_REASON_SERIES", "PREFIX",
           "remove_textfile", "render", "write_textfile"]

PREFIX = "tts_agent"
_NAME_BAD = re.compile(r"[^a-zA-Z0-9_]")
MAX_REASON_SERIES = 10
"""At most this many ``tts_agent_health_reason`` series (the worst reasons first)."""
MAX_REASON_CHARS = 200
"""A reason longer than this is cut (ending in ``...``) in its label."""

COUNTERS: Mapping[str, frozenset[str]] = {
    "audio": frozenset({"underruns", "device_errors", "recovery_probes", "seconds_played",
                        "started", "finished", "interrupted", "failed", "expired",
                        "internal_errors"}),
    "mqtt": frozenset({"reconnects", "takeovers"}),
    "journal": frozenset({"unjournaled", "refused"}),
    "instance": frozenset({"conflicts"}),
    "phrase_cache": frozenset({"hits", "misses", "evictions", "corrupt", "exact_hits"}),
    "wyoming": frozenset({"connections", "refused_clients", "replaced_clients", "requests",
                          "dropped_clients", "cancelled_syntheses", "finished", "failed",
                          "rejected", "interrupted"}),
}
"""Section keys that only grow while the agent runs: ``# TYPE counter``, named ``..._total``."""
GAUGES: Mapping[str, frozenset[str]] = {
    "audio": frozenset({"queue_depth", "volume", "alive"}),
    "mqtt": frozenset({"enabled", "connected", "tls"}),
    "queue": frozenset({"depth", "max", "pending", "intake"}),
    "journal": frozenset({"enabled", "writable", "requests"}),
    "hardware": frozenset({"ok", "forced", "intra_op_num_threads", "inter_op_num_threads"}),
    "phrase_cache": frozenset({"enabled", "entries", "bytes", "max_bytes", "exact_entries"}),
    "lexicon": frozenset({"loaded", "entries", "loaded_at"}),
    "wyoming": frozenset({"enabled", "listening", "port", "clients", "max_clients",
                          "max_syntheses"}),
    "sync": frozenset({"lead_ms", "output_latency_ms"}),
}
"""Section keys that go up and down (every other number is a gauge too; a unit test makes sure
each number of a typed section is named in one of the two tables)."""
_RENAMED: Mapping[tuple[str, str], str] = {
    ("audio", "seconds_played"): "audio_played_seconds_total",
    ("lexicon", "loaded_at"): "lexicon_loaded_timestamp_seconds",
}
"""Keys whose metric name is not ``<section>_<key>[_total]`` (base unit last)."""


def _name(*parts: str) -> str:
    name = _NAME_BAD.sub("_", "_".join((PREFIX, *parts)))
    return re.sub(r"_+", "_", name).strip("_")


def _label_value(value: object) -> str:
    text = str(value).encode("utf-8", "replace").decode("utf-8")  # no lone surrogates
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float | int) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")
    return repr(value) if isinstance(value, float) else str(value)


class _Writer:
    """Collects samples grouped by metric family (one HELP/TYPE block each)."""

    def __init__(self) -> None:
        self._families: dict[str, tuple[str, str, list[str]]] = {}

    def add(self, name: str, kind: str, help_text: str, value: float | int | None,
            labels: Mapping[str, object] | None = None) -> None:
        if value is None:
            return
        family = self._families.setdefault(name, (kind, help_text, []))
        label_text = ""
        if labels:
            label_text = "{" + ",".join(f'{k}="{_label_value(v)}"'
                                        for k, v in labels.items()) + "}"
        family[2].append(f"{name}{label_text} {_number(value)}")

    def has(self, name: str) -> bool:
        return name in self._families

    def text(self) -> str:
        lines: list[str] = []
        for name, (kind, help_text, samples) in self._families.items():
            lines.append(f"# HELP {name} {help_text}")
            lines.append(f"# TYPE {name} {kind}")
            lines.extend(samples)
        return "\n".join(lines) + "\n"


def _quantiles(out: _Writer, name: str, help_text: str, figures: Quantiles | None) -> None:
    if figures is None:
        return
    for quantile, value in ((0.5, figures["p50"]), (0.95, figures["p95"])):
        out.add(name, "gauge", help_text, value, {"quantile": f"{quantile:g}"})


def _scalars(section: Mapping[str, Any]) -> Iterable[tuple[str, float | int]]:
    for key, value in section.items():
        if isinstance(value, bool | int | float):
            yield key, value


def _reasons(reasons: list[str]) -> Iterable[str]:
    """The reasons as label values: the first :data:`MAX_REASON_SERIES`, cut to
    :data:`MAX_REASON_CHARS`, each once (two series with one label set would void the file)."""
    seen: set[str] = set()
    for reason in reasons:
        if len(seen) >= MAX_REASON_SERIES:
            return
        text = reason if len(reason) <= MAX_REASON_CHARS else reason[:MAX_REASON_CHARS - 3] + "..."
        if text not in seen:
            seen.add(text)
            yield text


def _overall(out: _Writer, snap: HealthReport, written_at: float) -> None:
    out.add(_name("last_write_timestamp_seconds"), "gauge",
            "When the agent wrote this file (Unix time); old means the agent is dead or hung.",
            round(written_at, 3))
    out.add(_name("info"), "gauge", "Agent version and device id (always 1).", 1,
            {"version": snap["version"], "device_id": snap["device_id"]})
    for state in STATES:
        out.add(_name("health_state"), "gauge", "1 for the current overall state, else 0.",
                int(snap["state"] == state), {"state": state})
    out.add(_name("health_reasons"), "gauge", "Number of reasons for the overall state.",
            len(snap["reasons"]))
    for reason in _reasons(snap["reasons"]):
        out.add(_name("health_reason"), "gauge",
                "1 for each reason for the overall state (the health report's text).", 1,
                {"reason": reason})
    out.add(_name("uptime_seconds"), "gauge", "Seconds since the agent started.",
            snap["uptime_s"])


def render(snap: HealthReport, *, written_at: float | None = None) -> str:
    """``snap`` (a :meth:`agent.health.snapshot.Health.snapshot`) as Prometheus text format;
    ``written_at``: the Unix time the file is written (default: now)."""
    out = _Writer()
    _overall(out, snap, time.time() if written_at is None else written_at)

    requests = snap["requests"]
    for outcome, count in requests["total"].items():
        out.add(_name("requests_total"), "counter", "Requests by how they ended.", count,
                {"outcome": outcome})
    _quantiles(out, _name("synthesis_seconds"),
               "Synthesis time per request over the recent window.", requests["synthesis_s"])
    _quantiles(out, _name("real_time_factor"),
               "Synthesis time / audio length over the recent window.", requests["rtf"])
    _quantiles(out, _name("first_audio_seconds"),
               "Time from accepting a request to its first audio frame.",
               requests["first_audio_s"])

    for worker, status in snap["workers"].items():
        out.add(_name("worker_alive"), "gauge", "1 while the worker is idle or making progress.",
                int(status["problem"] is None), {"worker": worker})
        out.add(_name("worker_busy_seconds"), "gauge", "Time spent on the current item.",
                status["busy_s"] or 0.0, {"worker": worker})

    system = snap["system"]
    out.add(_name("resident_memory_bytes"), "gauge", "Resident set size (VmRSS).",
            system.get("rss_bytes"))
    out.add(_name("resident_memory_peak_bytes"), "gauge", "Peak resident set size (VmHWM).",
            system.get("rss_peak_bytes"))
    out.add(_name("cpu_temperature_celsius"), "gauge", "CPU temperature.",
            system.get("cpu_temp_c"))
    throttled = system.get("throttled")
    if throttled:
        out.add(_name("throttled_flags"), "gauge", "Raspberry Pi firmware get_throttled word.",
                int(throttled["raw"], 16))
    disk = system.get("disk")
    if disk:
        out.add(_name("cache_disk_free_bytes"), "gauge",
                "Free bytes on the cache directory's filesystem.", disk["free_bytes"],
                {"path": disk["path"]})

    for section, data in snap.items():
        if section in FIXED_KEYS or not isinstance(data, Mapping):
            continue
        for key, value in _scalars(data):
            _section_metric(out, section, key, value)
    return out.text()


def _section_metric(out: _Writer, section: str, key: str, value: float | int) -> None:
    counter = key in COUNTERS.get(section, ())
    name = _name(_RENAMED.get((section, key)) or f"{section}_{key}{'_total' if counter else ''}")
    if not out.has(name):  # first one wins; never mixed into another family
        out.add(name, "counter" if counter else "gauge",
                f"{section}.{key} from the health report{' (since start)' if counter else ''}.",
                value)


def write_textfile(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically (readable by node_exporter: mode 0644)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # node_exporter reads only *.prom: the dot-prefixed temporary file is never collected.
    atomic_write(path, text.encode("utf-8"), mode=0o644, prefix=f".{path.name}.")


def remove_textfile(path: Path) -> None:
    """Delete ``path`` (a clean stop: node_exporter then no longer shows the agent's figures)."""
    path.unlink(missing_ok=True)
