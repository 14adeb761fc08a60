"""Hardware profiles: data-only TOML files, validated, matched against the detected hardware.

A profile file ``firmware_profiles/<name>.toml`` has a description and the tables ``[match]``,
``[runtime]``, ``[audio]`` and ``[thermal]``; loading raises :class:`ProfileError` naming the file
and the field. The most specific matching profile wins (:mod:`agent.hardware.match`). The file and
the matching: docs/internals.md#hardware-profiles (and docs/hardware-profiles.md).
"""

from __future__ import annotations

import sys
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent.hardware.detect import HardwareInfo
from agent.hardware.match import MatchRules
from agent.hardware.runtime import ExecutionMode, GraphOptimization, Provider, ThreadAffinity

__all__ = [
    "AudioProfile",
    "MatchResult",
    "Profile",
    "ProfileError",
    "ProfileSet",
    "RuntimeProfile",
    "ThermalProfile",
    "default_profile_dirs",
    "load_profile",
    "load_profiles",
    "profile_dir_candidates",
]

MAX_PROFILE_BYTES = 64 * 1024
MAX_PROFILES = 256
PROFILE_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"

ThreadRule = Literal["all", "physical", "big"]


class ProfileError(Exception):
    """A profile file is unreadable or invalid, or no profile fits."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


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
    execution_mode: ExecutionMode = Field(
        default="sequential", description="onnxruntime execution mode."
    )
    graph_optimization: GraphOptimization = Field(
        default="all", description="onnxruntime graph optimisation level."
    )
    thread_affinity: ThreadAffinity = Field(
        default="none",
        description="Pin intra-op threads to the big cores (heterogeneous CPUs only).",
    )
    allow_spinning: bool = Field(
        default=True,
        description="Let idle onnxruntime threads spin (lower latency, more CPU burned).",
    )
    decode_workers: int = Field(
        default=1, ge=1, le=16,
        description="A sentence's decoder windows decoded this many at once, each on its own "
                    "thread (the same audio); at most intra_op_threads; above 1, set "
                    "allow_spinning = false.",
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


PROFILES_SHARE = Path("share", "tts-agent", "firmware_profiles")
"""Where an install keeps the shipped profiles, below its prefix: ``pip install`` fills
``<sys.prefix>/share/...`` from the wheel's data files (``[tool.setuptools.data-files]``);
``./build.sh`` links a development venv's to the checkout's ``firmware_profiles/``."""


def profile_dir_candidates() -> list[Path]:
    """Where shipped profiles are looked for, in order: the running environment's share
    directory (``<sys.prefix>/share/tts-agent/firmware_profiles``), then the system's
    (``/usr/share/tts-agent/firmware_profiles``, a distribution package)."""
    return [Path(sys.prefix) / PROFILES_SHARE, Path("/usr") / PROFILES_SHARE]


def default_profile_dirs() -> list[Path]:
    """The shipped profiles' directory: the first of :func:`profile_dir_candidates` that exists
    (a list of one, or empty)."""
    return [d for d in profile_dir_candidates() if d.is_dir()][:1]


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
    if not search:
        looked = ", ".join(str(d) for d in profile_dir_candidates())
        raise ProfileError(f"no hardware profiles: none of {looked} exists (reinstall the agent "
                           "or set synthesis.profiles_dir)")
    if not profiles:
        raise ProfileError(f"no hardware profiles found in {', '.join(map(str, search))}")
    return ProfileSet(profiles, tuple(search))
