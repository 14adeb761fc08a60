"""What the health report reads from the system itself: memory, temperature, throttling, load and
disk space. Linux only; every reading that is not available is ``None``.

Files are read relative to ``sysroot``, so tests can lay out a fake tree; :meth:`SystemProbe.read`
runs on whichever thread builds the health snapshot. The sources:
docs/internals.md#system-readings.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent.health.report import DiskUsage, SystemReading, Throttled

__all__ = ["THROTTLE_FLAGS", "SystemProbe", "decode_throttled"]

MAX_ZONES = 32

THROTTLE_FLAGS: dict[int, str] = {
    0: "under_voltage",
    1: "arm_freq_capped",
    2: "throttled",
    3: "soft_temp_limit",
}
"""Bits of the Pi firmware's get_throttled value that describe *now*; the same flag
``16`` bits higher means it has happened since boot."""

_CPU_ZONE = re.compile(r"cpu|soc|x86_pkg_temp|package", re.IGNORECASE)
_STATUS_KB = re.compile(r"^(VmRSS|VmHWM):\s+(\d+)\s+kB", re.MULTILINE)


@dataclass(frozen=True)
class _Zone:
    type: str
    temp_c: float


def _zone_number(name: str) -> int:
    digits = name.removeprefix("thermal_zone")
    return int(digits) if digits.isdigit() else 1 << 30


def decode_throttled(value: int) -> Throttled:
    """The Pi firmware's throttling word as ``{raw, now: [...], since_boot: [...]}``."""
    return {
        "raw": f"0x{value:x}",
        "now": [name for bit, name in THROTTLE_FLAGS.items() if value & (1 << bit)],
        "since_boot": [name for bit, name in THROTTLE_FLAGS.items() if value & (1 << (bit + 16))],
    }


class SystemProbe:
    """Reads the system figures for the health report. ``disk_path`` is the directory whose
    filesystem's free space counts (the cache directory; its nearest existing parent if it
    does not exist yet)."""

    def __init__(self, disk_path: Path, *, sysroot: Path = Path("/")) -> None:
        self.disk_path = disk_path
        self.sysroot = sysroot

    def _path(self, rel: str) -> Path:
        return self.sysroot / rel.lstrip("/")

    def _text(self, rel: str | Path) -> str | None:
        path = rel if isinstance(rel, Path) else self._path(rel)
        try:
            return path.read_text(encoding="ascii", errors="replace")
        except OSError:
            return None

    def read(self) -> SystemReading:
        """All figures as JSON-able data (bytes, seconds, degrees Celsius)."""
        memory = self.memory()
        zones = self.thermal_zones()
        throttled = self.throttled()
        return {
            "load_avg": self.load_avg(),
            "rss_bytes": memory.get("VmRSS"),
            "rss_peak_bytes": memory.get("VmHWM"),
            "cpu_temp_c": self.cpu_temp_c(zones),
            "thermal_zones": [{"type": z.type, "temp_c": z.temp_c} for z in zones],
            "throttled": None if throttled is None else decode_throttled(throttled),
            "disk": self.disk(),
        }

    def memory(self) -> dict[str, int]:
        """``VmRSS`` and ``VmHWM`` of this process, in bytes."""
        text = self._text("proc/self/status") or ""
        return {key: int(kb) * 1024 for key, kb in _STATUS_KB.findall(text)}

    def load_avg(self) -> list[float] | None:
        """1, 5 and 15-minute load averages."""
        text = self._text("proc/loadavg")
        if text is None:
            return None
        try:
            return [float(v) for v in text.split()[:3]]
        except ValueError:
            return None

    def thermal_zones(self) -> list[_Zone]:
        """Every readable thermal zone (at most :data:`MAX_ZONES`), in zone order."""
        base = self._path("sys/class/thermal")
        try:
            names = sorted((p.name for p in base.glob("thermal_zone*")), key=_zone_number)
        except OSError:
            return []
        zones = []
        for name in names[:MAX_ZONES]:
            temp = self._text(base / name / "temp")
            kind = (self._text(base / name / "type") or name).strip()
            try:
                millideg = int((temp or "").strip())
            except ValueError:
                continue  # zones of disabled sensors answer EINVAL or nothing
            zones.append(_Zone(kind[:64], round(millideg / 1000, 1)))
        return zones

    @staticmethod
    def cpu_temp_c(zones: list[_Zone]) -> float | None:
        """The CPU's zone (cpu-thermal, x86_pkg_temp, soc...), else the hottest zone."""
        for zone in zones:
            if _CPU_ZONE.search(zone.type):
                return zone.temp_c
        return max((z.temp_c for z in zones), default=None)

    def throttled(self) -> int | None:
        """The Raspberry Pi firmware's throttling word, ``None`` elsewhere."""
        text = self._text("sys/devices/platform/soc/soc:firmware/get_throttled")
        if text is None:
            return None
        try:
            return int(text.strip(), 16)
        except ValueError:
            return None

    def disk(self) -> DiskUsage | None:
        """Free and total bytes of the filesystem holding :attr:`disk_path`."""
        path = self.disk_path
        while not path.exists() and path != path.parent:
            path = path.parent
        try:
            st = os.statvfs(path)
        except OSError:
            return None
        return {"path": str(self.disk_path), "free_bytes": st.f_bavail * st.f_frsize,
                "total_bytes": st.f_blocks * st.f_frsize}
