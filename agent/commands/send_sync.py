"""``tts-agent send --group G speak ... --sync [--lead S]`` and ``--at MS``: a synchronized group
speak, whose members start its first sample at one time (docs/fleet.md#synchronized-group-speech).

With ``--sync`` the start is now plus a lead: ``--lead``, else the largest ``sync.lead_ms`` the
members' health reports (what each needs to synthesize ahead and start its sound card) plus
:data:`NETWORK_S` for the broker's share, else :data:`DEFAULT_LEAD_S` when none reports one. The
account of ``--wait`` ends with a line on how each member started. A helper of
:mod:`agent.commands.send`, no sub-command of its own.
"""

from __future__ import annotations

import argparse
import math
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agent.commands import USAGE, CommandError
from agent.settings.mqtt import DEFAULT_SYNC_LEAD_S, MAX_SYNC_LEAD_S

if TYPE_CHECKING:
    from agent.mqtt.fleet_view import FleetView

__all__ = ["DEFAULT_LEAD_S", "NETWORK_S", "add_options", "check_options", "choose_start",
           "register", "start_lines"]

DEFAULT_LEAD_S = DEFAULT_SYNC_LEAD_S
"""The lead when no member reports the one it needs (s): the settings' one default."""
NETWORK_S = 0.3
"""Added to the members' own leads for the way through the broker (s)."""
MAX_LEAD_S = MAX_SYNC_LEAD_S
"""As far ahead as ``--lead`` may be (s): the settings' one bound."""
SYNC_TARGET_MS = 20.0
"""How far apart the members' clocks may be before ``--sync`` warns (ms)."""


def register(subparsers: Any) -> None:
    """Nothing to register: ``send`` (:mod:`agent.commands.send`) owns the sub-command."""


def add_options(speak: argparse.ArgumentParser) -> None:
    start = speak.add_mutually_exclusive_group()
    start.add_argument("--sync", action="store_true",
                       help="a synchronized start: every device plays the first sample at one "
                            "time, now + the lead (with --group/--all)")
    start.add_argument("--at", type=float, metavar="MS",
                       help="start at this Unix time in milliseconds (as --sync, chosen by you)")
    speak.add_argument("--sync-target", type=float, default=SYNC_TARGET_MS, metavar="MS",
                       help="--sync: warn when the members' clocks disagree by more than this "
                            f"(default {SYNC_TARGET_MS:g} ms)")
    speak.add_argument("--lead", type=float, metavar="S",
                       help="--sync: seconds from now to the start (default: what the members' "
                            f"health asks for + {NETWORK_S:g} s, else {DEFAULT_LEAD_S:g} s)")


def check_options(args: argparse.Namespace) -> None:
    """Usage errors of the start options, before anything is sent."""
    if getattr(args, "lead", None) is not None and not args.sync:
        raise CommandError("--lead goes with --sync", status=USAGE)
    if getattr(args, "sync", False) and args.device:
        raise CommandError("--sync is for --group or --all (one device needs no shared "
                           "start: use --at MS)", status=USAGE)


def choose_start(args: argparse.Namespace, view: FleetView | None) -> list[str]:
    """Set ``args.at`` for ``--sync`` (Unix ms); the lines telling the choice and the members'
    clocks, for stderr."""
    if not getattr(args, "sync", False):
        return []
    lead, why = args.lead, "--lead"
    if lead is None:
        lead, why = _lead_from(view, args.group)
    if not (math.isfinite(lead) and 0 < lead <= MAX_LEAD_S):
        raise CommandError(f"--lead must be more than 0 and at most {MAX_LEAD_S:g} seconds "
                           f"(got {lead:g})", status=USAGE)
    at = time.time() + lead
    args.at = round(at * 1000, 3)
    clock = datetime.fromtimestamp(at).strftime("%H:%M:%S.%f")[:-3]
    return [f"synchronized start at {clock} (in {lead:.2f} s: {why})",
            *_clock_lines(view, args.group, args.sync_target)]


def _clock_lines(view: FleetView | None, group: str | None, target_ms: float) -> list[str]:
    """A warning when the members' clocks disagree by more than ``target_ms`` (from the
    probe's pongs, :mod:`agent.mqtt.clock_offset`), naming each member's offset."""
    from agent.mqtt.clock_offset import disagreement_ms

    clocks = {}
    for device in sorted(view.members(group)) if view is not None else []:
        record = view.record(device) if view is not None else None
        if record is not None and record.clock is not None:
            clocks[device] = record.clock
    apart = disagreement_ms(clocks.values())
    if apart <= target_ms:
        return []
    offsets = ", ".join(f"{d} {c.offset_ms:+.1f} ms (±{c.rtt_ms / 2:.1f})"
                        for d, c in list(clocks.items())[:20])
    return [f"warning: the members' clocks disagree by at least {apart:g} ms, more than the "
            f"sync target of {target_ms:g} ms (--sync-target): they will start that far "
            f"apart; set up NTP (docs/fleet.md#synchronized-group-speech). Offsets: {offsets}"]


def _lead_from(view: FleetView | None, group: str | None) -> tuple[float, str]:
    asked: dict[str, float] = {}
    for device in sorted(view.members(group)) if view is not None else []:
        record = view.record(device) if view is not None else None
        if record is not None and record.sync_lead_ms is not None:
            asked[device] = record.sync_lead_ms / 1000
    if not asked:
        return DEFAULT_LEAD_S, "no member reports the lead it needs"
    slowest = max(asked, key=lambda d: asked[d])
    return (asked[slowest] + NETWORK_S,
            f"{slowest} asks for {asked[slowest]:.2f} s, + {NETWORK_S:g} s for the network")


def start_lines(finals: dict[str, dict[str, Any]]) -> list[str]:
    """How each member started, from its final event: who was on time, who joined late (and
    what it skipped) and who did not play because it was late."""
    on_time, late = [], []
    for device, event in sorted(finals.items()):
        late_ms = event.get("late_by_ms")
        if not isinstance(late_ms, int | float):
            continue
        if late_ms <= 0:
            on_time.append(device)
        else:
            skipped = event.get("skipped_ms")
            late.append(f"{device} (late by {late_ms:g} ms"
                        + (f", joined {skipped:g} ms in)" if skipped else ")"))
    missed = [d for d, e in sorted(finals.items()) if e.get("event") == "expired"
              and "synchronized start" in str(e.get("reason", ""))]
    if not on_time and not late and not missed:
        return []
    line = f"synchronized start: {len(on_time)} on time"
    if late:
        line += "; late: " + ", ".join(late)
    if missed:
        line += "; did not play, late: " + ", ".join(missed)
    return [line]
