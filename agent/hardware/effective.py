"""The effective profile: the chosen profile, made concrete for this machine, with overrides.

Precedence, weakest first: the profile file < the local tune override (``tts-agent tune``) <
explicit settings; every value records where it came from (:attr:`EffectiveProfile.origins`)
and :attr:`EffectiveProfile.why` explains the choice in words. Resolved once at start-up; the
player's settings are ``agent.settings.effective_audio(settings.audio, eff)``, the one place
``eff.audio`` becomes ``[audio]`` settings. Immutable, safe to share between threads. How
profiles are chosen: docs/hardware-profiles.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.hardware.detect import HardwareInfo, detect_hardware
from agent.hardware.profiles import (
    AudioProfile,
    MatchResult,
    Profile,
    ProfileError,
    ProfileSet,
    ThermalProfile,
    load_profiles,
)
from agent.hardware.runtime import ModelVariant, Provider, RuntimeOptions, ThreadAffinity
from agent.hardware.sysroot import format_cpu_list
from agent.hardware.tune_store import TuneFileError, TuneOverride, read_tune

if TYPE_CHECKING:
    from agent.hardware.inputs import ProfileInputs

__all__ = ["EffectiveProfile", "ResolvedRuntime", "profile_or_reason", "resolve_profile",
           "tune_path"]

TUNE_FILE_NAME = "tune.json"


@dataclass(frozen=True, slots=True)
class ResolvedRuntime:
    """Concrete onnxruntime choices (no rules left)."""

    options: RuntimeOptions
    """What onnxruntime gets: thread counts, execution mode, graph optimisation, the CPUs the
    threads are pinned to, spinning, and the providers in preference order (already limited to
    what the hardware has: GPU ones need a GPU), with ``require_provider`` set when settings
    named them. The cache fields are unset; the voice library fills them in."""
    thread_affinity: ThreadAffinity
    """The pinning rule asked for; ``options.affinity_cpus`` is what it came to here."""
    model_variant: ModelVariant


@dataclass(frozen=True, slots=True)
class EffectiveProfile:
    """The profile in force: what was chosen, the concrete values, and why."""

    name: str
    description: str
    source: str
    """The profile file."""
    forced: bool
    """Chosen by the ``profile`` setting rather than detected."""
    hardware: HardwareInfo
    runtime: ResolvedRuntime
    audio: AudioProfile
    """ALSA output for the board: ``alsa_device``, ``period_frames``, ``buffer_periods``,
    ``queue_max`` (explicit ``audio.*`` settings already applied)."""
    thermal: ThermalProfile
    """``limit_c`` (deg C) and ``zones`` (thermal zone types to watch)."""
    why: tuple[str, ...]
    origins: Mapping[str, str]
    """Field (e.g. ``intra_op_threads``, ``audio.period_frames``) -> ``profile NAME``,
    ``tune FILE`` or ``settings KEY``."""
    tune_file: str
    tune: TuneOverride | None = None
    """The tune override that was applied, if any."""
    tune_note: str | None = None
    """Why no tune override was applied (none stored, other hardware, unreadable)."""
    candidates: tuple[MatchResult, ...] = field(default_factory=tuple)

    def as_dict(self) -> dict[str, Any]:
        """JSON-able; the top-level keys ``profile``, ``intra_op_num_threads``,
        ``inter_op_num_threads`` and ``model_variant`` are a stable interface."""
        rt = self.runtime.options
        return {
            "profile": self.name,
            "description": self.description,
            "profile_file": self.source,
            "forced": self.forced,
            "intra_op_num_threads": rt.intra_op_threads,
            "inter_op_num_threads": rt.inter_op_threads,
            "model_variant": self.runtime.model_variant,
            "execution_mode": rt.execution_mode,
            "graph_optimization": rt.graph_optimization,
            "thread_affinity": self.runtime.thread_affinity,
            "affinity_cpus": format_cpu_list(rt.affinity_cpus),
            "allow_spinning": rt.allow_spinning,
            "decode_workers": rt.decode_workers,
            "providers": list(rt.providers),
            "require_provider": rt.require_provider,
            "audio": self.audio.model_dump(),
            "thermal": self.thermal.model_dump(),
            "why": list(self.why),
            "origins": dict(self.origins),
            "tune": self._tune_dict(),
            "hardware": self.hardware.as_dict(),
            "candidates": [c.as_dict() for c in self.candidates],
        }

    def _tune_dict(self) -> dict[str, Any]:
        return {
            "file": self.tune_file,
            "applied": self.tune is not None,
            "note": self.tune_note,
            "created_at": self.tune.created_at if self.tune else None,
            "rtf": self.tune.rtf if self.tune else None,
            "voice": self.tune.voice if self.tune else None,
        }


def tune_path(settings: ProfileInputs) -> Path:
    """Where the tune override lives: ``synthesis.tune_file`` or ``<cache.dir>/tune.json``."""
    return settings.synthesis.tune_file or settings.cache.dir / TUNE_FILE_NAME


class _Values:
    """Values with the place each came from; later ``set`` calls override earlier ones."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.origins: dict[str, str] = {}

    def set(self, key: str, value: Any, origin: str) -> None:
        if value is not None:
            self.values[key] = value
            self.origins[key] = origin

    def __getitem__(self, key: str) -> Any:
        return self.values[key]


def _rule_threads(profile: Profile, hw: HardwareInfo) -> tuple[int, str]:
    rt = profile.runtime
    rule = rt.intra_op_threads
    if isinstance(rule, int):
        threads, how = rule, f"{rule}"
    else:
        if rule == "all":
            threads, how = hw.cpu_budget, f"'all' = {hw.cpu_budget} usable CPUs"
        elif rule == "big" and hw.big_cpus:
            threads = hw.big_physical_cores
            how = f"'big' = {threads} big cores (CPUs {format_cpu_list(hw.big_cpus)})"
        else:
            threads = hw.physical_cores
            how = f"'{rule}' = {threads} physical cores" + (
                " (all cores alike)" if rule == "big" else "")
        if rt.reserve_cpus:
            threads -= rt.reserve_cpus
            how += f" - {rt.reserve_cpus} reserved"
    if rt.max_intra_op_threads is not None and threads > rt.max_intra_op_threads:
        threads = rt.max_intra_op_threads
        how += f", capped at {threads}"
    if threads > hw.cpu_budget:
        threads = hw.cpu_budget
        how += f", limited to the {threads} CPUs this process may use"
    threads = max(1, threads)
    return threads, f"intra_op_threads {threads}: profile rule {how}"


def _variant(profile: Profile, hw: HardwareInfo) -> tuple[ModelVariant, str]:
    wanted = profile.runtime.model_variant
    if wanted != "auto":
        return wanted, f"model_variant {wanted}: set by the profile"
    if hw.fast_int8:
        return "int8", f"model_variant int8: CPU has fast int8 dot products ({hw.fast_int8_flag})"
    return "fp32", ("model_variant fp32: no fast int8 dot products "
                    "(no avx512_vnni/avx_vnni/asimddp)")


def _providers(profile: Profile, hw: HardwareInfo) -> tuple[tuple[Provider, ...], str | None]:
    wanted = list(profile.runtime.providers)
    kept: list[Provider] = [p for p in wanted if p == "cpu" or hw.gpu is not None]
    if "cpu" not in kept:
        kept.append("cpu")
    dropped = [p for p in wanted if p not in kept]
    note = f"providers {dropped} skipped: no GPU detected" if dropped else None
    return tuple(kept), note


def _apply_tune(values: _Values, path: Path, hw: HardwareInfo) -> tuple[TuneOverride | None, str]:
    try:
        tune = read_tune(path)
    except TuneFileError as exc:
        return None, f"tune override ignored: {exc}"
    if tune is None:
        return None, f"no tune override at {path} (run `tts-agent tune`)"
    if tune.fingerprint != hw.fingerprint():
        return None, (f"tune override {path} ignored: measured on other hardware "
                      f"({tune.hardware}); run `tts-agent tune` again")
    origin = f"tune {path}"
    values.set("intra_op_threads", tune.intra_op_threads, origin)
    values.set("inter_op_threads", tune.inter_op_threads, origin)
    values.set("thread_affinity", tune.thread_affinity, origin)
    values.set("model_variant", tune.model_variant, origin)
    return tune, (f"tune override {path} applied: {tune.intra_op_threads} threads, "
                  f"RTF {tune.rtf:.3f} measured {tune.created_at}")


def _apply_settings(values: _Values, settings: ProfileInputs) -> None:
    syn, audio = settings.synthesis, settings.audio
    for key in ("intra_op_threads", "inter_op_threads", "execution_mode", "graph_optimization",
                "thread_affinity", "allow_spinning"):
        values.set(key, getattr(syn, key), f"settings synthesis.{key}")
    if syn.providers is not None:
        providers = list(dict.fromkeys(syn.providers))
        values.set("providers", tuple(providers), "settings synthesis.providers")
        values.set("require_provider", True, "settings synthesis.providers")
    if settings.models.variant != "auto":
        values.set("model_variant", settings.models.variant, "settings models.variant")
    explicit = audio.model_fields_set
    if "device" in explicit:
        values.set("audio.alsa_device", audio.device, "settings audio.device")
    values.set("audio.period_frames", audio.period_frames, "settings audio.period_frames")
    values.set("audio.buffer_periods", audio.buffer_periods, "settings audio.buffer_periods")
    if "queue_max" in explicit:
        values.set("audio.queue_max", audio.queue_max, "settings audio.queue_max")
    thermal_limit = getattr(settings.health, "thermal_limit_c", None)  # when health defines it
    values.set("thermal.limit_c", thermal_limit, "settings health.thermal_limit_c")


def _affinity(values: _Values, hw: HardwareInfo) -> tuple[tuple[int, ...], str | None]:
    if values["thread_affinity"] != "big_cores":
        return (), None
    threads = values["intra_op_threads"]
    if not hw.big_cpus:
        return (), "thread_affinity big_cores: all usable CPUs are alike, threads not pinned"
    if threads > len(hw.big_cpus):
        return (), (f"thread_affinity big_cores: {threads} threads > {len(hw.big_cpus)} big CPUs, "
                    "threads not pinned")
    cpus = format_cpu_list(hw.big_cpus)
    return hw.big_cpus, f"thread_affinity big_cores: intra-op threads pinned to CPUs {cpus}"


def _choose(settings: ProfileInputs, library: ProfileSet,
            hw: HardwareInfo) -> tuple[Profile, list[str]]:
    if not settings.profile:
        best, why = library.select(hw)
        return best.profile, why
    profile = library.get(settings.profile)
    matched, reasons = profile.match.check(hw)
    return profile, [f"{profile.name}: forced by the setting profile = {profile.name!r}"
                     + ("" if matched else f" (it would not match: {'; '.join(reasons)})")]


def _profile_values(profile: Profile, hw: HardwareInfo) -> tuple[_Values, list[str]]:
    origin = f"profile {profile.name}"
    values = _Values()
    rt = profile.runtime
    threads, threads_why = _rule_threads(profile, hw)
    variant, variant_why = _variant(profile, hw)
    providers, providers_note = _providers(profile, hw)
    for key, value in (
        ("intra_op_threads", threads), ("inter_op_threads", rt.inter_op_threads),
        ("execution_mode", rt.execution_mode), ("graph_optimization", rt.graph_optimization),
        ("thread_affinity", rt.thread_affinity), ("allow_spinning", rt.allow_spinning),
        ("decode_workers", rt.decode_workers),
        ("model_variant", variant), ("providers", providers), ("require_provider", False),
    ):
        values.set(key, value, origin)
    for prefix, model in (("audio", profile.audio), ("thermal", profile.thermal)):
        for key, value in model.model_dump().items():
            values.set(f"{prefix}.{key}", value, origin)
    why = [threads_why, variant_why]
    if providers_note:
        why.append(providers_note)
    return values, why


def _section(values: _Values, prefix: str) -> dict[str, Any]:
    return {k[len(prefix) + 1:]: v for k, v in values.values.items()
            if k.startswith(prefix + ".")}


def resolve_profile(
    settings: ProfileInputs,
    *,
    sysroot: Path | str = "/",
    hardware: HardwareInfo | None = None,
    profiles: ProfileSet | None = None,
    use_tune: bool = True,
) -> EffectiveProfile:
    """Detect the hardware (below ``sysroot``), choose the profile, apply tune and settings.

    ``use_tune=False`` ignores the tune override (``tts-agent tune`` measures from the profile).
    Raises :class:`~agent.hardware.profiles.ProfileError` for a broken profile file, an
    unknown ``profile`` setting, or when no profile matches.
    """
    hw = hardware or detect_hardware(sysroot)
    library = profiles or load_profiles(extra_dir=settings.synthesis.profiles_dir)
    profile, why = _choose(settings, library, hw)
    values, derived = _profile_values(profile, hw)
    why += derived

    path = tune_path(settings)
    tune: TuneOverride | None = None
    tune_note: str | None = "tune override not used"
    if use_tune:
        tune, tune_note = _apply_tune(values, path, hw)
        if tune is not None:
            why.append(tune_note)
            tune_note = None
    _apply_settings(values, settings)
    runtime = _runtime(values, hw, why)
    return EffectiveProfile(
        name=profile.name,
        description=profile.description,
        source=profile.source,
        forced=bool(settings.profile),
        hardware=hw,
        runtime=runtime,
        audio=AudioProfile.model_validate(_section(values, "audio")),
        thermal=ThermalProfile.model_validate(_section(values, "thermal")),
        why=tuple(why),
        origins=dict(values.origins),
        tune_file=str(path),
        tune=tune,
        tune_note=tune_note,
        candidates=tuple(library.evaluate(hw)),
    )


def _runtime(values: _Values, hw: HardwareInfo, why: list[str]) -> ResolvedRuntime:
    """The resolved runtime from the merged values; appends to ``why`` what settings chose, the
    pinning, and a warning when the threads outnumber the usable CPUs."""
    why += [f"{key} {values[key]}: {where}" for key, where in values.origins.items()
            if where.startswith("settings ") and "." not in key]
    affinity, affinity_why = _affinity(values, hw)
    if affinity_why:
        why.append(affinity_why)
    if values["intra_op_threads"] > hw.cpu_budget:
        why.append(f"warning: {values['intra_op_threads']} intra-op threads but only "
                   f"{hw.cpu_budget} CPUs usable (oversubscribed)")
    options = RuntimeOptions(
        intra_op_threads=values["intra_op_threads"],
        inter_op_threads=values["inter_op_threads"],
        execution_mode=values["execution_mode"],
        graph_optimization=values["graph_optimization"],
        affinity_cpus=affinity,
        allow_spinning=values["allow_spinning"],
        decode_workers=min(values["decode_workers"], values["intra_op_threads"]),
        providers=values["providers"],
        require_provider=values["require_provider"],
    )
    return ResolvedRuntime(options=options, thread_affinity=values["thread_affinity"],
                           model_variant=values["model_variant"])


def profile_or_reason(settings: ProfileInputs) -> tuple[EffectiveProfile | None, str | None]:
    """The effective profile and None, or None and why it cannot be resolved (logged once here).

    For the agent and the commands that run a voice: without a profile they fall back to one
    thread and fp32 rather than fail.
    """
    from agent.logs import get_logger

    try:
        return resolve_profile(settings), None
    except (ProfileError, OSError) as exc:
        get_logger(__name__).warning("hardware_profile_unavailable", error=str(exc))
        return None, str(exc)
