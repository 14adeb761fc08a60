"""``tts-agent profile``: the detected hardware, the chosen profile, why, and its settings."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.commands import (
    USAGE,
    CommandError,
    UsageError,
    add_config_argument,
    settings_from_args,
)

if TYPE_CHECKING:
    from agent.hardware.effective import EffectiveProfile


def add_sysroot_argument(parser: argparse.ArgumentParser) -> None:
    """``--sysroot DIR``: read proc/ and sys/ below DIR instead of / (fixtures, other boards)."""
    parser.add_argument(
        "--sysroot", type=Path, default=Path("/"), metavar="DIR",
        help="read DIR/proc/... and DIR/sys/... instead of the real ones (default /)",
    )


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "profile",
        help="show the detected hardware, the chosen hardware profile and why",
        description="Detect the hardware, choose the most specific profile from "
                    "firmware_profiles/, and print the effective settings with their origin.",
    )
    add_config_argument(parser)
    add_sysroot_argument(parser)
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--list", action="store_true",
                        help="list every profile and whether it matches this machine")
    parser.add_argument("--check", nargs="+", type=Path, metavar="FILE",
                        help="validate profile files (or directories of them) and exit")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from agent.hardware.effective import resolve_profile
    from agent.hardware.profiles import ProfileError, load_profile

    if args.check:
        return _check(args.check, load_profile, ProfileError)
    if not args.sysroot.is_dir():
        raise UsageError(f"--sysroot is not a directory: {args.sysroot}")
    settings = settings_from_args(args)
    try:
        effective = resolve_profile(settings, sysroot=args.sysroot)
    except ProfileError as exc:
        raise CommandError(str(exc)) from exc
    if args.json:
        print(json.dumps(effective.as_dict(), indent=2))
    elif args.list:
        for candidate in effective.candidates:
            mark = "*" if candidate.profile.name == effective.name else " "
            state = "matches" if candidate.matched else "no"
            print(f"{mark} {candidate.profile.name:<20} {state:<8} "
                  f"specificity {candidate.specificity:<4} {'; '.join(candidate.reasons)}")
    else:
        print(_summary(effective))
    return 0


def _check(paths: list[Path], load: Any, error: type[Exception]) -> int:
    files: list[Path] = []
    for path in paths:
        files.extend(sorted(path.glob("*.toml")) if path.is_dir() else [path])
    failed = 0
    for file in files:
        try:
            profile = load(file)
        except error as exc:
            failed += 1
            print(f"FAIL {exc}")
        else:
            print(f"ok   {file} ({profile.name}, specificity {profile.match.specificity()})")
    if not files:
        raise UsageError("no profile files given")
    return USAGE if failed else 0


def _summary(eff: EffectiveProfile) -> str:
    rt, hw = eff.runtime.options, eff.hardware
    lines = [
        f"profile        {eff.name}  ({eff.description})",
        f"file           {eff.source}",
        f"hardware       {hw.arch}, {hw.cpu_model or 'unknown CPU'}"
        + (f", board {hw.device_tree_model!r}" if hw.device_tree_model else "")
        + (f" (emulated on an {hw.emulated_on} host)" if hw.emulated_on else ""),
        f"CPUs           {hw.cpu_budget} usable of {hw.logical_cpus}"
        + (f" (cgroup quota {hw.cgroup_cpu_quota})" if hw.cgroup_cpu_quota else "")
        + (f", big cores {','.join(map(str, hw.big_cpus))}" if hw.big_cpus else ""),
        "",
        f"intra_op_threads {rt.intra_op_threads}   inter_op_threads {rt.inter_op_threads}   "
        f"mode {rt.execution_mode}   optimisation {rt.graph_optimization}",
        f"model_variant    {eff.runtime.model_variant}   providers {', '.join(rt.providers)}   "
        f"spinning {'on' if rt.allow_spinning else 'off'}   affinity "
        + (",".join(map(str, rt.affinity_cpus)) or "none"),
        f"audio            {eff.audio.alsa_device}  period {eff.audio.period_frames} frames x "
        f"{eff.audio.buffer_periods}, queue {eff.audio.queue_max}",
        f"thermal limit    {eff.thermal.limit_c} C",
        "",
        "why:",
        *(f"  - {line}" for line in eff.why),
    ]
    if eff.tune_note:
        lines.append(f"  - {eff.tune_note}")
    lines += [f"  ! {note}" for note in hw.notes]
    return "\n".join(lines)
