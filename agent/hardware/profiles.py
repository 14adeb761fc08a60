"""Hardware profiles: data-only TOML files, validated, matched against the detected hardware.

A profile file ``firmware_profiles/<name>.toml`` has four tables (README, "Hardware profiles")::

    description = "Raspberry Pi 4 ..."
    [match]    # rules; every rule given must hold, the most specific matching profile wins
    [runtime]  # onnxruntime threads and options, preferred model variant, providers
    [audio]    # ALSA output, period/buffer sizes, play-queue length
    [thermal]  # temperature limit and the thermal zones to watch

The profile's name is its file name without ``.toml``. Loading raises :class:`ProfileError`
naming the file and the field; nothing is silently defaulted for a misspelt key.

Matching: every rule present in ``[match]`` must hold; each rule adds its weight from
:data:`SPECIFICITY` to the profile's score; the highest score wins, then the higher
``priority``, then the name (the explanation says when a tie was broken).
"""

from __future__ import annotations

import fnmatch
import sys
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agent.hardware.detect import ARM_PARTS, HardwareInfo

__all__ = [
    "SPECIFICITY",
    "AudioProfile",
    "MatchResult",
    "MatchRules",
    "Profile",
    "ProfileError",
    "ProfileSet",
    "RuntimeProfile",
    "ThermalProfile",
    "default_profile_dirs",
    "load_profile",
    "load_profiles",
]

MAX_PROFILE_BYTES = 64 * 1024
MAX_PROFILES = 256
PROFILE_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"

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

ThreadRule = Literal["all", "physical", "big"]
Provider = Literal["tensorrt", "cuda", "cpu"]


class ProfileError(Exception):
    """A profile file is unreadable or invalid, or no profile fits."""


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


def _cpu_only() -> list[Provider]:
    return ["cpu"]


class RuntimeProfile(_Strict):
    """``[runtime]``: how onnxruntime runs the voice on this board."""

    intra_op_threads: Annotated[int, Field(ge=1, le=256)] | ThreadRule = Field(
        default="physical",
        description='Threads inside an operator: a number, or "all" (every usable CPU), '
                    '"physical" (one per physical core), "big" (one per big core). Always '
                    "limited to the CPUs the process may use (cpuset, cgroup quota).",
    )
    max_intra_op_threads: int | None = Field(
        default=None, ge=1, le=256, description="Upper bound applied after the rule."
    )
    reserve_cpus: int = Field(
        default=0, ge=0, le=64,
        description="CPUs left free for audio/MQTT when a rule is used (never below 1 thread).",
    )
    inter_op_threads: int = Field(
        default=1, ge=1, le=64, description="Threads running independent operators in parallel."
    )
    execution_mode: Literal["sequential", "parallel"] = Field(
        default="sequential", description="onnxruntime execution mode."
    )
    graph_optimization: Literal["disable", "basic", "extended", "all"] = Field(
        default="all", description="onnxruntime graph optimisation level."
    )
    thread_affinity: Literal["none", "big_cores"] = Field(
        default="none",
        description="Pin intra-op threads to the big cores (heterogeneous CPUs only).",
    )
    allow_spinning: bool = Field(
        default=True,
        description="Let idle onnxruntime threads spin (lower latency, more CPU burned).",
    )
    model_variant: Literal["auto", "int8", "fp32"] = Field(
        default="auto",
        description="auto: int8 where the CPU has fast int8 dot products, else fp32.",
    )
    providers: list[Provider] = Field(
        default_factory=_cpu_only, min_length=1,
        description="Execution providers in order of preference; GPU ones are used only when a "
                    "GPU and an onnxruntime GPU build are present.",
    )


class AudioProfile(_Strict):
    """``[audio]``: the board's usual ALSA output and buffering. Read by the audio engineer."""

    alsa_device: str = Field(
        default="default", min_length=1, max_length=512,
        description="The board's usual ALSA PCM (e.g. the Pi's headphone jack).",
    )
    period_frames: int = Field(default=1024, ge=64, le=65536, description="ALSA period (frames).")
    buffer_periods: int = Field(default=4, ge=2, le=64, description="ALSA buffer (periods).")
    queue_max: int = Field(default=32, ge=1, le=10_000, description="Longest play queue.")


class ThermalProfile(_Strict):
    """``[thermal]``: when the board is too hot. Read by the health engineer."""

    limit_c: float = Field(
        default=85.0, ge=30.0, le=125.0,
        description="CPU temperature (deg C) above which health reports degraded.",
    )
    zones: list[str] = Field(
        default_factory=list,
        description="Thermal zone types to read (sys/class/thermal/*/type), e.g. cpu-thermal; "
                    "empty = the hottest zone.",
    )


class Profile(_Strict):
    """One validated profile file."""

    name: str = Field(pattern=PROFILE_NAME)
    source: str = Field(description="The file it was loaded from.")
    description: str = Field(default="", max_length=2000)
    priority: int = Field(default=0, ge=-100, le=100, description="Breaks specificity ties.")
    match: MatchRules = Field(default_factory=MatchRules)
    runtime: RuntimeProfile = Field(default_factory=RuntimeProfile)
    audio: AudioProfile = Field(default_factory=AudioProfile)
    thermal: ThermalProfile = Field(default_factory=ThermalProfile)


def load_profile(path: Path) -> Profile:
    """Read and validate one profile file; :class:`ProfileError` names the file and field."""
    try:
        if path.stat().st_size > MAX_PROFILE_BYTES:
            raise ProfileError(f"{path}: larger than {MAX_PROFILE_BYTES} bytes")
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"{path}: cannot read: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{path}: invalid TOML: {exc}") from exc
    for key in ("name", "source"):
        if key in data:
            raise ProfileError(f"{path}: field {key!r}: not allowed (the name is the file name)")
    try:
        return Profile.model_validate({**data, "name": path.stem, "source": str(path)})
    except ValidationError as exc:
        raise ProfileError(f"{path}: " + "; ".join(_problems(exc))) from exc


_UNION_TAGS = frozenset({"int", "str", "float", "bool", "list", "dict"})


def _problems(exc: ValidationError) -> list[str]:
    """One line per field; the alternatives of a union (``3`` or ``"all"``) joined by "or"."""
    grouped: dict[str, list[str]] = {}
    got: dict[str, str] = {}
    for err in exc.errors():
        parts = [str(p) for p in err["loc"]
                 if not (isinstance(p, str) and (p in _UNION_TAGS or "[" in p or "-" in p))]
        loc = ".".join(parts) or "(root)"
        grouped.setdefault(loc, []).append(err["msg"])
        if err["type"] != "missing":
            got[loc] = f" (got {err['input']!r})"
    return [f"field {loc}: {' or '.join(dict.fromkeys(msgs))}{got.get(loc, '')}"
            for loc, msgs in grouped.items()]


def default_profile_dirs() -> list[Path]:
    """Where shipped profiles live: the source checkout, then ``<prefix>/share``, ``/usr/share``."""
    checkout = Path(__file__).resolve().parents[2] / "firmware_profiles"
    candidates = [
        checkout,
        Path(sys.prefix) / "share" / "tts-agent" / "firmware_profiles",
        Path("/usr/share/tts-agent/firmware_profiles"),
    ]
    return [d for d in candidates if d.is_dir()][:1]


@dataclass(frozen=True, slots=True)
class MatchResult:
    """How one profile fared against the hardware."""

    profile: Profile
    matched: bool
    specificity: int
    reasons: tuple[str, ...]

    def as_dict(self) -> dict[str, object]:
        return {"name": self.profile.name, "matched": self.matched,
                "specificity": self.specificity, "reasons": list(self.reasons)}


@dataclass(frozen=True, slots=True)
class ProfileSet:
    """All loaded profiles by name; later directories replace same-named earlier ones."""

    profiles: dict[str, Profile]
    dirs: tuple[Path, ...]

    def names(self) -> list[str]:
        return sorted(self.profiles)

    def get(self, name: str) -> Profile:
        try:
            return self.profiles[name]
        except KeyError:
            raise ProfileError(
                f"no hardware profile named {name!r}; available: {', '.join(self.names())}"
            ) from None

    def evaluate(self, hw: HardwareInfo) -> list[MatchResult]:
        """Every profile's result, best match first."""
        results = []
        for profile in self.profiles.values():
            matched, reasons = profile.match.check(hw)
            results.append(MatchResult(profile, matched, profile.match.specificity(),
                                       tuple(reasons)))
        return sorted(results, key=lambda r: (not r.matched, -r.specificity,
                                              -r.profile.priority, r.profile.name))

    def select(self, hw: HardwareInfo) -> tuple[MatchResult, list[str]]:
        """The most specific matching profile and a human explanation of the choice."""
        results = self.evaluate(hw)
        matching = [r for r in results if r.matched]
        if not matching:
            raise ProfileError(
                f"no hardware profile matches this machine ({hw.arch}, {hw.cpu_model}); "
                "add one or set profile = NAME in the settings"
            )
        best = matching[0]
        why = [f"{best.profile.name}: " + ("; ".join(best.reasons) or "matches any machine")
               + f" (specificity {best.specificity})"]
        for other in matching[1:4]:
            if (other.specificity, other.profile.priority) == (best.specificity,
                                                               best.profile.priority):
                why.append(f"tie with {other.profile.name} broken by name")
            else:
                why.append(f"preferred over {other.profile.name} (specificity "
                           f"{other.specificity}, priority {other.profile.priority})")
        return best, why


def load_profiles(dirs: Sequence[Path] | None = None, extra_dir: Path | None = None) -> ProfileSet:
    """Load every ``*.toml`` in ``dirs`` (default: the shipped profiles) and ``extra_dir``.

    A profile in ``extra_dir`` replaces a shipped one of the same name. Raises
    :class:`ProfileError` for the first invalid file, or when no profile was found.
    """
    search = list(default_profile_dirs() if dirs is None else dirs)
    if extra_dir is not None:
        if not extra_dir.is_dir():
            raise ProfileError(f"profiles directory not found: {extra_dir}")
        search.append(extra_dir)
    profiles: dict[str, Profile] = {}
    for directory in search:
        for path in sorted(directory.glob("*.toml"))[:MAX_PROFILES]:
            profile = load_profile(path)
            profiles[profile.name] = profile
    if not profiles:
        where = ", ".join(str(d) for d in search) or "(no profile directory exists)"
        raise ProfileError(f"no hardware profiles found in {where}")
    return ProfileSet(profiles, tuple(search))
