"""What this machine is, read from files under one root path (``sysroot``).

Everything comes from ``<sysroot>/proc/...`` and ``<sysroot>/sys/...`` (CPU, board, memory,
allowed CPUs, cgroup limits, big.LITTLE capacities, a GPU), so tests and ``tts-agent profile
--sysroot DIR`` can point detection at a captured tree. Missing files are normal: detection never
fails, it records what it could not read in :attr:`HardwareInfo.notes`. Runs once at start-up; the
result is immutable. The files read: docs/internals.md#hardware-detection.
"""

from __future__ import annotations

import math
import platform
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.hardware.cgroups import read_cgroups
from agent.hardware.emulation import reconcile
from agent.hardware.sysroot import SysRoot, format_cpu_list, parse_cpu_list

__all__ = ["ARM_PARTS", "HardwareInfo", "detect_hardware"]

BIG_CORE_FRACTION = 0.8
"""A CPU counts as "big" when its capacity is at least this fraction of the largest one."""

ARM_PARTS: Mapping[str, str] = {
    "0xd03": "Cortex-A53", "0xd04": "Cortex-A35", "0xd05": "Cortex-A55", "0xd07": "Cortex-A57",
    "0xd08": "Cortex-A72", "0xd09": "Cortex-A73", "0xd0a": "Cortex-A75", "0xd0b": "Cortex-A76",
    "0xd0c": "Neoverse-N1", "0xd0d": "Cortex-A77", "0xd40": "Neoverse-V1", "0xd41": "Cortex-A78",
    "0xd42": "Cortex-A78AE", "0xd44": "Cortex-X1", "0xd46": "Cortex-A510", "0xd47": "Cortex-A710",
    "0xd48": "Cortex-X2", "0xd49": "Neoverse-N2", "0xd4b": "Cortex-A78C", "0xd4f": "Neoverse-V2",
    "0xd80": "Cortex-A520", "0xd81": "Cortex-A720",
}
"""Part numbers of ARM Ltd (implementer 0x41) cores, for readable explanations."""

_FAST_INT8_X86 = ("avx512_vnni", "avx_vnni", "amx_int8")
_FAST_INT8_ARM = ("asimddp",)


@dataclass(frozen=True, slots=True)
class HardwareInfo:
    """The facts profile matching and thread selection are based on. Immutable."""

    sysroot: str
    arch: str
    """``x86_64``, ``aarch64``, ``armv7l``, ``i686`` or what ``uname -m`` says; ``unknown``."""
    cpu_model: str | None
    """x86 ``model name``; on ARM a summary of the cores, e.g. ``4x Cortex-A76 + 4x Cortex-A55``."""
    cpu_vendor: str | None = None
    """x86 ``vendor_id`` (``GenuineIntel``, ``AuthenticAMD``)."""
    x86_family: int | None = None
    x86_model: int | None = None
    arm_implementer: str | None = None
    """``0x41`` for ARM Ltd cores, lower-case hex."""
    arm_parts: tuple[str, ...] = ()
    """Distinct ``CPU part`` values, lower-case hex, sorted."""
    cpu_flags: frozenset[str] = frozenset()
    """x86 ``flags`` or ARM ``Features`` (common to all CPUs)."""
    device_tree_model: str | None = None
    """Board name from the device tree (or the Raspberry Pi ``Model`` line of cpuinfo)."""
    device_tree_compatible: tuple[str, ...] = ()
    logical_cpus: int = 1
    """CPUs the kernel knows about (cpuinfo processors), whether or not we may use them."""
    online_cpus: tuple[int, ...] = ()
    usable_cpus: tuple[int, ...] = ()
    """Online CPUs this process may run on: process affinity and cgroup cpuset applied."""
    cpu_capacity: Mapping[int, int] = field(default_factory=dict)
    """``cpu_capacity`` per CPU (1024 = the fastest core class), where the kernel exposes it."""
    big_cpus: tuple[int, ...] = ()
    """Usable CPUs of the fast class on heterogeneous (big.LITTLE, Intel hybrid) systems; empty
    when all usable CPUs are alike."""
    physical_cores: int = 1
    """Distinct physical cores among the usable CPUs (SMT siblings counted once)."""
    big_physical_cores: int = 0
    """Distinct physical cores among :attr:`big_cpus`."""
    cgroup_version: int | None = None
    cgroup_cpu_quota: float | None = None
    """CPU bandwidth limit of the cgroup in CPUs (``cpu.max`` 200000/100000 = 2.0); None = none."""
    cpu_budget: int = 1
    """How many CPUs computation may keep busy: usable CPUs, limited by the cgroup quota
    (rounded down, at least 1)."""
    memory_total_mb: int | None = None
    memory_limit_mb: int | None = None
    """cgroup memory limit (MiB), None when unlimited."""
    gpu: str | None = None
    """``nvidia`` (driver present), ``nvidia-tegra`` (Jetson integrated GPU) or None."""
    emulated_on: str | None = None
    """The architecture ``proc/cpuinfo`` described when it was not this process's own (qemu-user
    shows the host's): :mod:`agent.hardware.emulation`."""
    notes: tuple[str, ...] = ()
    """What could not be read or looked odd; shown by ``tts-agent profile``."""

    @property
    def fast_int8(self) -> bool:
        """The CPU has fast int8 dot products (AVX-512 VNNI, AVX-VNNI, AMX or ARM dotprod)."""
        return self.fast_int8_flag is not None

    @property
    def fast_int8_flag(self) -> str | None:
        """The flag that proves fast int8 dot products, or None."""
        for flag in (*_FAST_INT8_X86, *_FAST_INT8_ARM):
            if flag in self.cpu_flags:
                return flag
        return None

    @property
    def memory_mb(self) -> int | None:
        """Memory this process can use: the smaller of total memory and the cgroup limit."""
        values = [v for v in (self.memory_total_mb, self.memory_limit_mb) if v is not None]
        return min(values) if values else None

    def fingerprint(self) -> str:
        """A stable description of the compute resources; a tune result is valid only for it."""
        parts = [
            self.arch,
            self.cpu_model or "?",
            ",".join(self.arm_parts),
            f"usable={format_cpu_list(self.usable_cpus)}",
            f"budget={self.cpu_budget}",
            f"big={format_cpu_list(self.big_cpus)}",
        ]
        return "|".join(parts)

    def as_dict(self) -> dict[str, Any]:
        """JSON-able view for ``tts-agent profile --json`` and health reports."""
        return {
            "sysroot": self.sysroot,
            "arch": self.arch,
            "cpu_model": self.cpu_model,
            "cpu_vendor": self.cpu_vendor,
            "x86_family": self.x86_family,
            "x86_model": self.x86_model,
            "arm_implementer": self.arm_implementer,
            "arm_parts": [f"{p} ({ARM_PARTS.get(p, 'unknown')})" for p in self.arm_parts],
            "device_tree_model": self.device_tree_model,
            "device_tree_compatible": list(self.device_tree_compatible),
            "logical_cpus": self.logical_cpus,
            "online_cpus": format_cpu_list(self.online_cpus),
            "usable_cpus": format_cpu_list(self.usable_cpus),
            "cpu_capacity": {str(k): v for k, v in sorted(self.cpu_capacity.items())},
            "big_cpus": format_cpu_list(self.big_cpus),
            "physical_cores": self.physical_cores,
            "big_physical_cores": self.big_physical_cores,
            "cgroup_version": self.cgroup_version,
            "cgroup_cpu_quota": self.cgroup_cpu_quota,
            "cpu_budget": self.cpu_budget,
            "memory_total_mb": self.memory_total_mb,
            "memory_limit_mb": self.memory_limit_mb,
            "fast_int8": self.fast_int8,
            "fast_int8_flag": self.fast_int8_flag,
            "gpu": self.gpu,
            "emulated_on": self.emulated_on,
            "cpu_flags_count": len(self.cpu_flags),
            "notes": list(self.notes),
        }


# --- /proc/cpuinfo ---------------------------------------------------------------------------

@dataclass
class _CpuInfo:
    processors: list[dict[str, str]] = field(default_factory=list)
    machine: dict[str, str] = field(default_factory=dict)
    """Key/values outside processor blocks (ARM: Hardware, Revision, Model)."""


def _parse_cpuinfo(text: str) -> _CpuInfo:
    info = _CpuInfo()
    block: dict[str, str] = {}
    for line in [*text.splitlines(), ""]:
        if not line.strip():
            if "processor" in block:
                info.processors.append(block)
            elif block:
                info.machine.update(block)
            block = {}
            continue
        key, sep, value = line.partition(":")
        if sep:
            block[key.strip().lower()] = value.strip()
    return info


def _x86_facts(cpu: _CpuInfo) -> dict[str, Any]:
    first = cpu.processors[0]
    flags = frozenset(first.get("flags", "").split())
    arch = "x86_64" if "lm" in flags else "i686"

    def as_int(key: str) -> int | None:
        try:
            return int(first[key])
        except (KeyError, ValueError):
            return None

    return {
        "arch": arch,
        "cpu_model": first.get("model name"),
        "cpu_vendor": first.get("vendor_id"),
        "x86_family": as_int("cpu family"),
        "x86_model": as_int("model"),
        "cpu_flags": flags,
    }


def _arm_facts(cpu: _CpuInfo) -> dict[str, Any]:
    parts = [p.get("cpu part", "").lower() for p in cpu.processors if p.get("cpu part")]
    implementers = {p.get("cpu implementer", "").lower() for p in cpu.processors} - {""}
    feature_sets = [frozenset(p.get("features", "").split()) for p in cpu.processors]
    flags = frozenset.intersection(*feature_sets) if feature_sets else frozenset()
    architecture = cpu.processors[0].get("cpu architecture", "")
    if architecture == "8" and "asimd" in flags:
        arch = "aarch64"
    elif architecture in ("7", "8"):
        arch = "armv7l"  # a 32-bit kernel (also on ARMv8 cores) reports ARMv7 features
    else:
        arch = "arm"
    counts = Counter(parts)
    implementer = min(implementers) if implementers else None
    summary: str | None
    if implementer == "0x41" and counts:
        summary = " + ".join(
            f"{n}x {ARM_PARTS.get(part, 'part ' + part)}" for part, n in counts.most_common()
        )
    else:
        summary = cpu.processors[0].get("model name") or cpu.machine.get("hardware")
    return {
        "arch": arch,
        "cpu_model": summary,
        "arm_implementer": implementer,
        "arm_parts": tuple(sorted(counts)),
        "cpu_flags": flags,
    }


# --- topology --------------------------------------------------------------------------------

def _physical_cores(root: SysRoot, cpus: Iterable[int], cpuinfo: _CpuInfo) -> int:
    """Distinct physical cores among ``cpus``: SMT siblings (same ``core_cpus_list``) count once.

    Falls back to x86 cpuinfo ``physical id``/``core id``, then to one core per CPU.
    """
    x86_ids = {
        int(p["processor"]): f"{p.get('physical id', '0')}/{p['core id']}"
        for p in cpuinfo.processors if p.get("processor", "").isdigit() and "core id" in p
    }
    cores: set[str] = set()
    for cpu in cpus:
        base = f"sys/devices/system/cpu/cpu{cpu}/topology"
        siblings = root.text(f"{base}/core_cpus_list") or root.text(f"{base}/thread_siblings_list")
        if siblings is not None and siblings.strip():
            cores.add("siblings " + siblings.strip())
        elif cpu in x86_ids:
            cores.add("cpuinfo " + x86_ids[cpu])
        else:
            cores.add(f"cpu {cpu}")
    return max(1, len(cores))


def _big_cpus(root: SysRoot, usable: tuple[int, ...]) -> tuple[dict[int, int], tuple[int, ...]]:
    capacity: dict[int, int] = {}
    for cpu in usable:
        value = root.integer(f"sys/devices/system/cpu/cpu{cpu}/cpu_capacity")
        if value is not None and value > 0:
            capacity[cpu] = value
    values = capacity.values()
    if len(capacity) == len(usable) and capacity and max(values) > min(values):
        top = max(values)
        return capacity, tuple(c for c in usable if capacity[c] >= BIG_CORE_FRACTION * top)
    p_cores = root.cpu_list("sys/devices/cpu_core/cpus")
    if p_cores and root.path("sys/devices/cpu_atom/cpus").is_file():  # Intel hybrid
        big = tuple(c for c in usable if c in p_cores)
        if big and len(big) < len(usable):
            return capacity, big
    return capacity, ()


def _status_cpus(root: SysRoot) -> tuple[int, ...] | None:
    status = root.text("proc/self/status")
    if status is None:
        return None
    for line in status.splitlines():
        if line.startswith("Cpus_allowed_list:"):
            try:
                return parse_cpu_list(line.partition(":")[2])
            except ValueError:
                root.notes.append("proc/self/status: bad Cpus_allowed_list")
    return None


def _memory_total_mb(root: SysRoot) -> int | None:
    for line in (root.text("proc/meminfo", note_missing=True) or "").splitlines():
        if line.startswith("MemTotal:"):
            fields = line.split()
            if len(fields) >= 2 and fields[1].isdigit():
                return int(fields[1]) // 1024
    return None


def _gpu(root: SysRoot, compatible: tuple[str, ...]) -> str | None:
    gpus = root.path("proc/driver/nvidia/gpus")
    try:
        if gpus.is_dir() and any(gpus.iterdir()):
            return "nvidia"
    except OSError:
        pass
    if any(c.startswith("nvidia,tegra") for c in compatible):
        return "nvidia-tegra"
    return None


def _device_tree(root: SysRoot, cpuinfo: _CpuInfo) -> tuple[str | None, tuple[str, ...]]:
    model = None
    compatible: tuple[str, ...] = ()
    for base in ("proc/device-tree", "sys/firmware/devicetree/base"):
        text = root.text(f"{base}/model")
        if text is not None:
            model = text.strip("\0\n ") or None
            compat = root.text(f"{base}/compatible") or ""
            compatible = tuple(c for c in compat.strip("\0\n").split("\0") if c)
            break
    if model is None and cpuinfo.machine.get("model"):
        model = cpuinfo.machine["model"]  # Raspberry Pi kernels repeat the board name here
        root.notes.append("device-tree model taken from the Model line of proc/cpuinfo")
    return model, compatible


def _cpu_facts(cpuinfo: _CpuInfo, machine: str | None, notes: list[str]) -> dict[str, Any]:
    facts: dict[str, Any] = {"arch": "unknown", "cpu_model": None}
    if cpuinfo.processors:
        first = cpuinfo.processors[0]
        if "vendor_id" in first or "flags" in first:
            facts = _x86_facts(cpuinfo)
        elif "cpu implementer" in first or "features" in first:
            facts = _arm_facts(cpuinfo)
    if not machine:
        return facts
    if facts["arch"] == "unknown":
        return {**facts, "arch": machine}
    return reconcile(facts, machine, notes)


def detect_hardware(sysroot: Path | str = "/", *, machine: str | None = None) -> HardwareInfo:
    """Read the machine's facts below ``sysroot``; never raises for missing or odd files.

    ``machine`` is the architecture this process runs as (default: ``uname -m`` for the real
    root, None for another); CPU facts of another family are the emulating host's and dropped.
    """
    root = SysRoot(Path(sysroot))
    cpuinfo = _parse_cpuinfo(root.text("proc/cpuinfo", note_missing=True) or "")
    if machine is None and Path(sysroot).resolve() == Path("/"):
        machine = platform.machine()
    facts = _cpu_facts(cpuinfo, machine, root.notes)

    known = [int(p["processor"]) for p in cpuinfo.processors if p.get("processor", "").isdigit()]
    logical = len(known) or 1
    online = root.cpu_list("sys/devices/system/cpu/online") or tuple(known) or (0,)
    usable = set(online)
    allowed = _status_cpus(root)
    if allowed is not None:
        usable &= set(allowed)
    cgroups = read_cgroups(root)
    if cgroups.cpuset is not None:
        usable &= set(cgroups.cpuset)
    if not usable:
        root.notes.append("affinity/cpuset leave no online CPU; assuming all online CPUs")
        usable = set(online)
    usable_cpus = tuple(sorted(usable))

    budget = len(usable_cpus)
    if cgroups.quota is not None:
        budget = max(1, min(budget, math.floor(cgroups.quota + 1e-9)))
    capacity, big = _big_cpus(root, usable_cpus)
    model, compatible = _device_tree(root, cpuinfo)
    memory_limit = cgroups.memory_limit // (1 << 20) if cgroups.memory_limit else None
    return HardwareInfo(
        sysroot=str(sysroot),
        device_tree_model=model,
        device_tree_compatible=compatible,
        logical_cpus=max(logical, len(online)),
        online_cpus=tuple(online),
        usable_cpus=usable_cpus,
        cpu_capacity=capacity,
        big_cpus=big,
        physical_cores=_physical_cores(root, usable_cpus, cpuinfo),
        big_physical_cores=_physical_cores(root, big, cpuinfo) if big else 0,
        cgroup_version=cgroups.version,
        cgroup_cpu_quota=round(cgroups.quota, 3) if cgroups.quota is not None else None,
        cpu_budget=budget,
        memory_total_mb=_memory_total_mb(root),
        memory_limit_mb=memory_limit,
        gpu=_gpu(root, compatible),
        notes=tuple(root.notes),
        **facts,
    )
