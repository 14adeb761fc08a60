"""This process's cgroup limits (v1 and v2): CPU quota, cpuset, memory limit.

The process's cgroup paths come from ``proc/self/cgroup``; where each hierarchy is mounted, and
which part of it the mount shows (containers see their own cgroup as the root), from
``proc/self/mountinfo``. Without mountinfo the conventional ``sys/fs/cgroup`` layout is assumed.
Limits of parent cgroups apply too, so quotas and memory limits are read up to the mount point
and the smallest wins.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from agent.hardware.sysroot import SysRoot

__all__ = ["CgroupLimits", "read_cgroups"]

MAX_CGROUP_DEPTH = 32
UNLIMITED_V1 = 1 << 62
"""cgroup v1 reports "no memory limit" as a huge page-aligned number; anything above is none."""


@dataclass(frozen=True)
class _Mount:
    root: str
    point: str
    fstype: str
    options: frozenset[str]


def _parse_mountinfo(text: str) -> list[_Mount]:
    mounts: list[_Mount] = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 5 or len(tail) < 3 or tail[0] not in ("cgroup", "cgroup2"):
            continue
        mounts.append(_Mount(
            root=_unescape(fields[3]), point=_unescape(fields[4]), fstype=tail[0],
            options=frozenset(tail[2].split(",")),
        ))
    return mounts


def _unescape(path: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), path)


def _serves(mount: _Mount, controller: str) -> bool:
    """Whether ``mount`` holds ``controller`` ("" = the cgroup v2 unified hierarchy)."""
    if controller == "":
        return mount.fstype == "cgroup2"
    return mount.fstype == "cgroup" and controller in mount.options


def _parse_proc_cgroup(text: str) -> dict[str, str]:
    """``{"": v2 path, "cpu": v1 path, "cpuset": ..., "memory": ...}``."""
    paths: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if not controllers:
            paths[""] = path
        for controller in controllers.split(","):
            if controller:
                paths[controller] = path
    return paths


@dataclass
class CgroupLimits:
    version: int | None = None
    quota: float | None = None
    cpuset: tuple[int, ...] | None = None
    memory_limit: int | None = None


class _CgroupReader:
    """Finds this process's cgroup directories (v1 per controller, v2 unified) and reads limits."""

    def __init__(self, root: SysRoot) -> None:
        self.root = root
        self.paths = _parse_proc_cgroup(root.text("proc/self/cgroup") or "")
        self.mounts = _parse_mountinfo(root.text("proc/self/mountinfo") or "")

    def _dirs(self, controller: str) -> list[str] | None:
        """Directories from this process's cgroup up to the mount point (leaf first)."""
        mount = next((m for m in self.mounts if _serves(m, controller)), None)
        if mount is None:
            point = self._conventional_mount(controller)
            if point is None:
                return None
            mount = _Mount(root="/", point=point, fstype="", options=frozenset())
        path = self.paths.get(controller, "/")
        inside = path == mount.root or path.startswith(mount.root.rstrip("/") + "/")
        rel = os.path.relpath(path, mount.root) if inside else "."
        leaf = os.path.normpath(os.path.join(mount.point, rel))
        if not self.root.path(leaf).is_dir():
            leaf = mount.point  # cgroup namespace: our cgroup is the mount's root
        dirs: list[str] = []
        current = leaf
        while len(dirs) < MAX_CGROUP_DEPTH:
            dirs.append(current)
            if os.path.normpath(current) == os.path.normpath(mount.point) or current in ("/", ""):
                break
            current = os.path.dirname(current)
        return dirs

    def _conventional_mount(self, controller: str) -> str | None:
        if controller == "":
            for point in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
                if self.root.path(point + "/cgroup.controllers").is_file():
                    return point
            return None
        names = {"cpu": ("cpu,cpuacct", "cpu"), "cpuset": ("cpuset",), "memory": ("memory",)}
        for name in names.get(controller, (controller,)):
            point = f"/sys/fs/cgroup/{name}"
            if self.root.path(point).is_dir():
                return point
        return None

    def read(self) -> CgroupLimits:
        result = CgroupLimits()
        quotas: list[float] = []
        memory: list[int] = []
        self._read_v2(result, quotas, memory)
        self._read_v1(result, quotas, memory)
        result.quota = min(quotas) if quotas else None
        result.memory_limit = min(memory) if memory else None
        return result

    def _read_v2(self, result: CgroupLimits, quotas: list[float], memory: list[int]) -> None:
        dirs = self._dirs("")
        if not dirs:
            return
        for d in dirs:  # a parent's limit applies to its children too
            text = self.root.text(d + "/cpu.max")
            if text is not None:
                result.version = 2
                quotas.extend(_v2_quota(text))
            limit = self.root.text(d + "/memory.max")
            if limit is not None and limit.strip().isdigit():
                memory.append(int(limit))
        cpuset = self.root.cpu_list(dirs[0] + "/cpuset.cpus.effective")
        if cpuset:
            result.cpuset, result.version = cpuset, 2

    def _read_v1(self, result: CgroupLimits, quotas: list[float], memory: list[int]) -> None:
        for d in self._dirs("cpu") or []:
            quota = self.root.integer(d + "/cpu.cfs_quota_us")
            period = self.root.integer(d + "/cpu.cfs_period_us")
            if quota is not None:
                result.version = result.version or 1
                if quota > 0 and period:
                    quotas.append(quota / period)
        cpuset_dirs = self._dirs("cpuset")
        if cpuset_dirs and result.cpuset is None:
            for name in ("cpuset.effective_cpus", "cpuset.cpus"):
                cpuset = self.root.cpu_list(cpuset_dirs[0] + "/" + name)
                if cpuset:
                    result.cpuset, result.version = cpuset, result.version or 1
                    break
        for d in self._dirs("memory") or []:
            limit = self.root.integer(d + "/memory.limit_in_bytes")
            if limit is not None and 0 < limit < UNLIMITED_V1:
                memory.append(limit)


def _v2_quota(text: str) -> list[float]:
    fields = text.split()
    if len(fields) == 2 and fields[0] != "max":
        try:
            quota, period = int(fields[0]), int(fields[1])
        except ValueError:
            return []
        if quota > 0 and period > 0:
            return [quota / period]
    return []


def read_cgroups(root: SysRoot) -> CgroupLimits:
    """The CPU quota (in CPUs), cpuset and memory limit (bytes) of this process's cgroups."""
    return _CgroupReader(root).read()
