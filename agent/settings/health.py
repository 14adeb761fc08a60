"""The ``[health]`` section: health reports, watchdog, Prometheus textfile."""

from __future__ import annotations

from pydantic import Field

from agent.settings.base import Section
from agent.settings.paths import PromPath


class HealthSettings(Section):
    interval_s: float = Field(
        default=30.0, ge=1.0, le=86_400.0, description="Health publish interval (s)."
    )
    stall_s: float = Field(
        default=30.0, ge=1.0, le=3600.0,
        description="A worker busy on one item longer than this counts as hung (s).",
    )
    state_check_s: float = Field(
        default=5.0, ge=0.5, le=3600.0,
        description="How often the overall state is re-evaluated; a change of state is "
                    "published at once, not at the next interval (s).",
    )
    window: int = Field(
        default=200, ge=10, le=100_000,
        description="Most recent requests the latency, RTF and first-audio percentiles cover.",
    )
    failure_ratio: float = Field(
        default=0.5, ge=0.0, le=1.0,
        description="Share of failed requests in the window (at least 5 requests) at which the "
                    "device counts as degraded; 0 switches the rule off.",
    )
    thermal_limit_c: float | None = Field(
        default=None, ge=30.0, le=150.0,
        description="CPU temperature at or above which the device counts as degraded (deg C); "
                    "unset = the hardware profile's thermal limit (85 without a profile).",
    )
    disk_min_free_mb: int = Field(
        default=100, ge=0, le=10_000_000,
        description="Free space on the cache filesystem below which the device counts as "
                    "degraded (MiB); 0 switches the rule off.",
    )
    prometheus_file: PromPath | None = Field(
        default=None,
        description="Write the health figures in Prometheus text format to this file, for "
                    "node_exporter's textfile collector, at every health publication; deleted "
                    "at a clean stop. Under the systemd unit: "
                    "/run/tts-agent/tts_agent.prom, linked from node_exporter's directory "
                    "(docs/operations.md, \"Prometheus\": the link and the alert rules); "
                    "unset = off.",
    )

