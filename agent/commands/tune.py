"""``tts-agent tune``: measure real synthesis per thread setting here and keep the best one.

Loads the installed voice once per configuration (variant x intra-op threads x pinning), times
the same text several times, prints a Markdown RTF table and stores the chosen setting as the
local tune override (``synthesis.tune_file``, default ``<cache.dir>/tune.json``), which
:func:`agent.hardware.effective.resolve_profile` applies from then on. Runs on the main thread.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.commands import CommandError, UsageError, add_config_argument, settings_from_args
from agent.commands.profile import add_sysroot_argument

if TYPE_CHECKING:
    from agent.hardware.effective import EffectiveProfile
    from agent.hardware.runtime import ModelVariant
    from agent.hardware.tune_store import TuneMeasurement, TuneOverride
    from agent.hardware.tuning import TuneConfig
    from agent.settings import Settings
    from agent.voice.bundle import Bundle

MAX_TUNE_TEXT = 2000


def _thread_list(text: str) -> list[int]:
    try:
        counts = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a comma-separated list of numbers: {text!r}") from None
    if not counts or counts[0] < 1 or counts[-1] > 256:
        raise argparse.ArgumentTypeError("thread counts must be 1..256")
    return counts


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "tune",
        help="measure synthesis speed per thread count on this machine and keep the best",
        description="Synthesize the same text with the installed voice at each sensible thread "
                    "count, print the real-time factor (RTF) of each, and store the best "
                    "setting as a local override of the hardware profile.",
    )
    add_config_argument(parser)
    add_sysroot_argument(parser)
    parser.add_argument("--voice", help="voice to measure (default: models.default_voice)")
    parser.add_argument("--variant", choices=["fp32", "int8", "all"], default="all",
                        help="model variant(s) to measure (default: every variant installed)")
    parser.add_argument("--threads", type=_thread_list, metavar="N,N,...",
                        help="thread counts to try (default: 1..usable CPUs)")
    parser.add_argument("--repeats", type=int, default=3, choices=range(1, 21), metavar="N",
                        help="timed runs per setting, median reported (default 3)")
    parser.add_argument("--tolerance", type=float, default=0.05,
                        help="keep the fewest threads within this fraction of the fastest "
                             "(default 0.05)")
    parser.add_argument("--text", help=f"text to synthesize (at most {MAX_TUNE_TEXT} characters)")
    parser.add_argument("--dry-run", action="store_true", help="measure and print, store nothing")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from agent.hardware.effective import resolve_profile
    from agent.hardware.profiles import ProfileError

    settings = settings_from_args(args)
    text = _default_text() if args.text is None else args.text
    if not text.strip():
        raise UsageError("--text is empty: give a text to measure, or leave --text out for "
                         "the built-in one")
    if len(text) > MAX_TUNE_TEXT:
        raise UsageError(f"--text is longer than {MAX_TUNE_TEXT} characters")
    if not 0 <= args.tolerance <= 1:
        raise UsageError(f"--tolerance must be between 0 and 1 (got {args.tolerance:g})")
    if not args.sysroot.is_dir():
        raise UsageError(f"--sysroot is not a directory: {args.sysroot}")
    try:
        profile = resolve_profile(settings, sysroot=args.sysroot, use_tune=False)
    except ProfileError as exc:
        raise CommandError(str(exc)) from exc
    return _tune(args, settings, profile, text)


def _default_text() -> str:
    from agent.hardware.tuning import DEFAULT_TUNE_TEXT

    return DEFAULT_TUNE_TEXT


def _tune(args: argparse.Namespace, settings: Settings, profile: EffectiveProfile,
          text: str) -> int:
    import json

    from agent.hardware.effective import tune_path
    from agent.hardware.tune_store import write_tune
    from agent.hardware.tuning import candidate_configs, choose

    name = args.voice or settings.models.default_voice
    bundle = _bundle(settings, name)
    variants: list[ModelVariant] = [v for v in ("fp32", "int8") if v in bundle.variants
                                    and args.variant in ("all", v)]
    if not variants:
        raise UsageError(f"voice {name} has no {args.variant} variant "
                         f"(has: {', '.join(sorted(bundle.variants))})")
    configs = candidate_configs(profile, variants, args.threads)
    if not args.json:
        _print_plan(bundle, profile, len(configs), args.repeats, text)
    rows = [_measure(settings, profile, name, config, text=text, repeats=args.repeats,
                     quiet=args.json)
            for config in configs]
    chosen = choose(rows, tolerance=args.tolerance, preferred_variant=profile.runtime.model_variant)
    tune = _override(profile, bundle, rows, chosen, several_variants=len(variants) > 1)
    path = tune_path(settings)
    if not args.dry_run:
        try:
            write_tune(path, tune)
        except OSError as exc:
            raise CommandError(f"cannot store the result in {path}: {exc.strerror or exc}; "
                               "set synthesis.tune_file or use --dry-run") from exc
    if args.json:
        print(json.dumps({**tune.model_dump(), "stored": None if args.dry_run else str(path)},
                         indent=2))
        return 0
    _print_result(args, rows, chosen, path)
    _warn_explicit(settings)
    return 0


def _bundle(settings: Settings, name: str) -> Bundle:
    """The installed voice ``name``, verified."""
    from agent.library.voices import VoiceLibrary, VoiceNotFound
    from agent.voice.bundle import BundleError, verify_bundle

    try:
        return verify_bundle(VoiceLibrary(settings).bundle_dir(name))
    except VoiceNotFound as exc:
        raise UsageError(str(exc)) from exc
    except BundleError as exc:
        raise CommandError(str(exc)) from exc


def _print_plan(bundle: Bundle, profile: EffectiveProfile, settings_count: int, repeats: int,
                text: str) -> None:
    import onnxruntime

    hw = profile.hardware
    print(f"Tuning {bundle.voice} {bundle.version} on {hw.cpu_model or hw.arch} "
          f"({hw.cpu_budget} usable CPUs), profile {profile.name}, "
          f"onnxruntime {onnxruntime.__version__}")
    print(f"{settings_count} settings x {repeats} runs; text: {text[:60]!r}...\n", flush=True)


def _override(profile: EffectiveProfile, bundle: Bundle, rows: list[TuneMeasurement],
              chosen: TuneMeasurement, *, several_variants: bool) -> TuneOverride:
    """What is stored: the chosen setting, the machine it was measured on, and every row."""
    import onnxruntime

    from agent.hardware.tune_store import TuneOverride

    hw = profile.hardware
    return TuneOverride(
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        fingerprint=hw.fingerprint(),
        hardware=f"{hw.arch}, {hw.cpu_model}, {hw.cpu_budget} usable CPUs"[:500],
        profile=profile.name,
        voice=bundle.voice,
        voice_version=bundle.version,
        onnxruntime=onnxruntime.__version__,
        intra_op_threads=chosen.intra_op_threads,
        inter_op_threads=chosen.inter_op_threads,
        thread_affinity=chosen.thread_affinity,
        model_variant=chosen.variant if several_variants else None,
        rtf=chosen.rtf_median,
        results=rows,
    )


def _print_result(args: argparse.Namespace, rows: list[TuneMeasurement],
                  chosen: TuneMeasurement, path: Path) -> None:
    from agent.hardware.tuning import render_table

    print(render_table(rows, chosen))
    plural = "s" if chosen.intra_op_threads > 1 else ""
    print(f"\nchosen: {chosen.variant}, {chosen.intra_op_threads} intra-op thread{plural}"
          + (", pinned to the big cores" if chosen.thread_affinity == "big_cores" else "")
          + f" (RTF {chosen.rtf_median:.3f}; fewest threads within "
            f"{args.tolerance:.0%} of the fastest)")
    if args.dry_run:
        print("dry run: nothing stored")
    else:
        print(f"stored in {path}; the agent uses it from its next start "
              "(explicit synthesis.* settings still win)")


def _measure(settings: Settings, profile: EffectiveProfile, voice_name: str,
             config: TuneConfig, *, text: str, repeats: int, quiet: bool) -> TuneMeasurement:
    from agent.hardware.tuning import measurement, time_synthesis
    from agent.library.options import voice_options
    from agent.library.voices import VoiceLibrary
    from agent.voice.onnx_session import pin_current_thread
    from agent.voice.voice import SynthesisParams, VoiceLoadError

    pinned = config.thread_affinity == "big_cores"
    base = voice_options(settings, profile)
    runtime = replace(base.runtime, intra_op_threads=config.intra_op_threads,
                      affinity_cpus=profile.hardware.big_cpus if pinned else ())
    options = replace(base, variant=config.variant, runtime=runtime)
    try:
        voice = VoiceLibrary(settings, options).get(voice_name)
    except VoiceLoadError as exc:
        raise CommandError(f"cannot load {voice_name} ({config.variant}): {exc}") from exc
    params = SynthesisParams(noise_scale=0.0, noise_w=0.0)  # same audio length every run

    def synthesize() -> float:
        return sum(chunk.seconds for chunk in voice.synthesize(text, params))

    original = os.sched_getaffinity(0) if pinned else None
    try:
        if pinned:
            pin_current_thread(runtime)
        rtfs, audio_s = time_synthesis(synthesize, repeats)
    finally:
        if original is not None:
            os.sched_setaffinity(0, original)
    row = measurement(config, runtime.inter_op_threads, rtfs, audio_s)
    if not quiet:
        print(f"  {config.variant} {config.intra_op_threads:>3} threads"
              f"{' (big cores)' if pinned else ''}: RTF {row.rtf_median:.3f}", file=sys.stderr,
              flush=True)
    return row


def _warn_explicit(settings: Settings) -> None:
    explicit = [key for key in ("intra_op_threads", "inter_op_threads", "thread_affinity")
                if getattr(settings.synthesis, key) is not None]
    if settings.models.variant != "auto":
        explicit.append("models.variant")
    if explicit:
        print(f"note: the settings set {', '.join(explicit)} explicitly; "
              "those values win over the tune result")
