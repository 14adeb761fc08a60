"""The ``[match]`` table of a hardware profile: rules checked against the detected hardware.

Every rule present must hold; each adds its weight from :data:`SPECIFICITY` to the profile's
score, so the most specific matching profile wins (:meth:`agent.hardware.profiles.ProfileSet.select`
breaks ties). :meth:`MatchRules.check` says in words why a profile matched or which rule failed.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agent.hardware.detect import ARM_PARTS, HardwareInfo

__all__ = ["SPECIFICITY", "MatchRules"]

SPECIFICITY: dict[str, int] = {
    "device_tree_model": 100,
    "device_tree_compatible": 80,
    "cpu_model_name": 70,
    "x86_model": 60,
    "arm_part": 50,
    "cpu_vendor": 20,
    "arm_implementer": 20,
    "x86_family": 10,
    "cpu_flags": 5,
    "min_cpus": 5,
    "max_cpus": 5,
    "min_memory_mb": 5,
    "max_memory_mb": 5,
    "gpu": 5,
    "arch": 1,
}
"""Weight each ``[match]`` rule adds to a profile's score: a board name beats a SoC, which beats a
CPU model, which beats a core type, which beats the architecture alone."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MatchRules(_Strict):
    """``[match]``: every rule given must hold; lists are alternatives unless said otherwise."""

    arch: list[str] = Field(default_factory=list, description="Any of these architectures.")
    device_tree_model: list[str] = Field(
        default_factory=list, description="Glob patterns for the device-tree model (board name)."
    )
    device_tree_compatible: list[str] = Field(
        default_factory=list,
        description="Glob patterns; any device-tree compatible string may match (SoC, board).",
    )
    cpu_model_name: list[str] = Field(
        default_factory=list, description="Glob patterns for the CPU model name."
    )
    cpu_vendor: list[str] = Field(default_factory=list, description="x86 vendor_id values.")
    x86_family: int | None = Field(default=None, ge=0, le=255, description="x86 CPU family.")
    x86_model: list[int] = Field(default_factory=list, description="Any of these x86 models.")
    arm_implementer: list[str] = Field(
        default_factory=list, description='ARM implementer codes, e.g. "0x41".'
    )
    arm_part: list[str] = Field(
        default_factory=list, description='ARM part codes; any core may have one, e.g. "0xd08".'
    )
    cpu_flags: list[str] = Field(
        default_factory=list, description="CPU flags / Features that must ALL be present."
    )
    min_cpus: int | None = Field(
        default=None, ge=1, le=4096, description="At least this many CPUs (logical)."
    )
    max_cpus: int | None = Field(
        default=None, ge=1, le=4096, description="At most this many CPUs (logical)."
    )
    min_memory_mb: int | None = Field(default=None, ge=1, description="At least this much memory.")
    max_memory_mb: int | None = Field(default=None, ge=1, description="At most this much memory.")
    gpu: bool | None = Field(default=None, description="A GPU must be present (true) or absent.")

    @field_validator("arm_implementer", "arm_part")
    @classmethod
    def _lower_hex(cls, values: list[str]) -> list[str]:
        for value in values:
            if not value.lower().startswith("0x"):
                raise ValueError(f"{value!r} is not a hex code like 0xd08")
            int(value, 16)  # ValueError names the bad value
        return [v.lower() for v in values]

    def specificity(self) -> int:
        """Sum of the weights of the rules given."""
        return sum(
            weight * (len(self.cpu_flags) if name == "cpu_flags" else 1)
            for name, weight in SPECIFICITY.items()
            if getattr(self, name) not in (None, [])
        )

    def check(self, hw: HardwareInfo) -> tuple[bool, list[str]]:
        """Whether every rule holds; the reasons (why it matched, or the first rule that failed)."""
        reasons: list[str] = []
        for ok, text in self._rules(hw):
            if not ok:
                return False, [text]
            reasons.append(text)
        return True, reasons

    def _rules(self, hw: HardwareInfo) -> Iterable[tuple[bool, str]]:
        if self.device_tree_model:
            pattern = _first_glob(self.device_tree_model, [hw.device_tree_model or ""])
            yield pattern is not None, (
                f"device-tree model {hw.device_tree_model!r} matches {pattern!r}" if pattern
                else f"device-tree model {hw.device_tree_model!r} is not {self.device_tree_model}"
            )
        if self.device_tree_compatible:
            hit = _first_hit(self.device_tree_compatible, hw.device_tree_compatible)
            yield hit is not None, (
                f"device-tree compatible {hit[1]!r} matches {hit[0]!r}" if hit
                else f"no device-tree compatible string matches {self.device_tree_compatible}"
            )
        if self.cpu_model_name:
            pattern = _first_glob(self.cpu_model_name, [hw.cpu_model or ""])
            yield pattern is not None, (
                f"CPU model {hw.cpu_model!r} matches {pattern!r}" if pattern
                else f"CPU model {hw.cpu_model!r} is not {self.cpu_model_name}"
            )
        if self.cpu_vendor:
            yield hw.cpu_vendor in self.cpu_vendor, f"CPU vendor {hw.cpu_vendor!r}" + (
                "" if hw.cpu_vendor in self.cpu_vendor else f" is not {self.cpu_vendor}")
        if self.x86_family is not None:
            yield hw.x86_family == self.x86_family, (
                f"x86 family {hw.x86_family}" + (
                    "" if hw.x86_family == self.x86_family else f" is not {self.x86_family}"))
        if self.x86_model:
            yield hw.x86_model in self.x86_model, f"x86 model {hw.x86_model}" + (
                " is listed" if hw.x86_model in self.x86_model else f" is not {self.x86_model}")
        if self.arm_implementer:
            ok = hw.arm_implementer in self.arm_implementer
            yield ok, f"ARM implementer {hw.arm_implementer}" + (
                "" if ok else f" is not {self.arm_implementer}")
        if self.arm_part:
            parts = [p for p in hw.arm_parts if p in self.arm_part]
            named = ", ".join(f"{p} ({ARM_PARTS.get(p, '?')})" for p in parts)
            yield bool(parts), (f"CPU part {named}" if parts
                                else f"CPU parts {list(hw.arm_parts)} are not {self.arm_part}")
        if self.cpu_flags:
            missing = [f for f in self.cpu_flags if f not in hw.cpu_flags]
            yield not missing, (f"CPU flags {self.cpu_flags} present" if not missing
                                else f"CPU flags {missing} missing")
        yield from self._size_rules(hw)
        if self.arch:
            yield hw.arch in self.arch, f"architecture {hw.arch}" + (
                "" if hw.arch in self.arch else f" is not {self.arch}")

    def _size_rules(self, hw: HardwareInfo) -> Iterable[tuple[bool, str]]:
        if self.min_cpus is not None:
            yield hw.logical_cpus >= self.min_cpus, f"{hw.logical_cpus} CPUs (min {self.min_cpus})"
        if self.max_cpus is not None:
            yield hw.logical_cpus <= self.max_cpus, f"{hw.logical_cpus} CPUs (max {self.max_cpus})"
        memory = hw.memory_total_mb
        if self.min_memory_mb is not None:
            yield (memory is not None and memory >= self.min_memory_mb,
                   f"{memory} MiB memory (min {self.min_memory_mb})")
        if self.max_memory_mb is not None:
            yield (memory is not None and memory <= self.max_memory_mb,
                   f"{memory} MiB memory (max {self.max_memory_mb})")
        if self.gpu is not None:
            yield (hw.gpu is not None) == self.gpu, f"GPU {hw.gpu or 'none'}"


def _first_glob(patterns: Sequence[str], values: Sequence[str]) -> str | None:
    hit = _first_hit(patterns, values)
    return hit[0] if hit else None


def _first_hit(patterns: Sequence[str], values: Sequence[str]) -> tuple[str, str] | None:
    for pattern in patterns:
        for value in values:
            if value and fnmatch.fnmatchcase(value, pattern):
                return pattern, value
    return None
