"""Hardware detection and hardware profiles.

``resolve_profile(settings)`` is the entry point: it detects the machine (through one root path,
``sysroot``), picks the most specific profile from ``firmware_profiles/*.toml``, applies the local
tune override and explicit settings, and returns an immutable :class:`EffectiveProfile`.
:meth:`agent.voice.onnx_session.RuntimeOptions.from_profile` turns it into onnxruntime options.
"""

from agent.hardware.detect import HardwareInfo, detect_hardware
from agent.hardware.effective import (
    EffectiveProfile,
    ResolvedRuntime,
    profile_or_reason,
    resolve_profile,
    tune_path,
)
from agent.hardware.profiles import (
    AudioProfile,
    MatchResult,
    Profile,
    ProfileError,
    ProfileSet,
    RuntimeProfile,
    ThermalProfile,
    load_profile,
    load_profiles,
)
from agent.hardware.sysroot import format_cpu_list, parse_cpu_list
from agent.hardware.tune_store import (
    TuneFileError,
    TuneMeasurement,
    TuneOverride,
    read_tune,
    write_tune,
)

__all__ = [
    "AudioProfile",
    "EffectiveProfile",
    "HardwareInfo",
    "MatchResult",
    "Profile",
    "ProfileError",
    "ProfileSet",
    "ResolvedRuntime",
    "RuntimeProfile",
    "ThermalProfile",
    "TuneFileError",
    "TuneMeasurement",
    "TuneOverride",
    "detect_hardware",
    "format_cpu_list",
    "load_profile",
    "load_profiles",
    "parse_cpu_list",
    "profile_or_reason",
    "read_tune",
    "resolve_profile",
    "tune_path",
    "write_tune",
]
