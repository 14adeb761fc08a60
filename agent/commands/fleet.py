"""``tts-agent fleet``: a read-only view of the fleet from the retained status and health topics.

Collects the retained messages through :class:`agent.mqtt.fleet_view.FleetView` until none came
for ``--settle`` seconds and prints one line per device; ``--watch`` keeps following, ``--probe``
pings the fleet where the broker gives wildcards no retained messages; ``fleet forget ID``
retires devices (:mod:`agent.commands.fleet_forget`). Exit status 0 printed, 2 bad options, 3
no broker. Usage: docs/cli.md; design: docs/internals.md#tts-agent-fleet.
"""

from __future__ import annotations

import argparse
import json
import math
import secrets
import shutil
import sys
from typing import TYPE_CHECKING, Any

from agent.commands import USAGE, CommandError, add_config_argument, settings_from_args, shown

if TYPE_CHECKING:
    from agent.mqtt.fleet_view import DeviceRow, FleetView

__all__ = ["fit", "format_rows", "register", "run", "select"]

MAX_SETTLE_S = 60.0
MAX_READ_LIMIT_S = 3600.0
_STATES = ("online", "conflict", "silent", "stopped", "offline", "unknown")
"""fleet_view.STATES, without loading it."""
_CLEAR = "\x1b[H\x1b[J"
"""Cursor home, clear to the end of the screen: the table is redrawn in place."""


def register(subparsers: Any) -> None:
    from agent.commands.send import PROBE_HELP, PROBES, add_connection_arguments

    parser: argparse.ArgumentParser = subparsers.add_parser(
        "fleet", help="list the fleet's devices from their retained status and health",
        add_help=False)
    parser.add_argument("--help", action="help", default=argparse.SUPPRESS,
                        help="show this help and exit")
    add_config_argument(parser)
    parser.add_argument("action", nargs="*", metavar="forget ID",
                        help="forget ID [ID ...]: retire stopped devices, clearing their "
                             "retained status and health (refused for a device online)")
    parser.add_argument("--group", help="only the devices in this group")
    parser.add_argument("--state", action="append", choices=_STATES,
                        help="only devices in this state (repeatable)")
    parser.add_argument("--json", action="store_true",
                        help="one JSON document: {devices: [...], count, dropped, ...}")
    parser.add_argument("--watch", action="store_true",
                        help="keep following; redraw in place on a terminal (Ctrl-C ends)")
    parser.add_argument("--settle", type=float, default=1.0, metavar="S",
                        help="collect the retained messages until none came for S seconds "
                             "(default 1)")
    parser.add_argument("--read-limit", type=float, metavar="S",
                        help="read the retained messages for S seconds at most: a read cut off "
                             "there is said (default 20 x --settle, at least 10)")
    parser.add_argument("--interval", type=float, metavar="S",
                        help="health interval of devices whose status does not name theirs "
                             "(default: health.interval_s)")
    parser.add_argument("--probe", choices=PROBES, default="auto", help=PROBE_HELP)
    add_connection_arguments(parser)
    parser.set_defaults(handler=run)


def _positive(value: float, option: str, high: float) -> float:
    if not (math.isfinite(value) and 0 < value <= high):
        raise CommandError(f"{option} must be more than 0 and at most {high:g} seconds "
                           f"(got {value:g})", status=USAGE)
    return value


def run(args: argparse.Namespace) -> int:
    from agent.commands.send import connect, connection_settings
    from agent.logs import configure_logging
    from agent.mqtt.client import ClientConfigError, MqttClient
    from agent.mqtt.fleet_view import FleetView, read_fleet
    from agent.mqtt.topics import Namespace

    settings = settings_from_args(args, configure_logs=False)
    configure_logging("critical", settings.log.format)  # stdout: the view; stderr: one error
    settle = _positive(args.settle, "--settle", MAX_SETTLE_S)
    longest = None if args.read_limit is None else _positive(
        args.read_limit, "--read-limit", MAX_READ_LIMIT_S)
    interval = settings.health.interval_s if args.interval is None else _positive(
        args.interval, "--interval", 86_400.0)
    mqtt = connection_settings(args, settings.mqtt)
    if args.action:
        return _forget(args, mqtt, settle)
    view = FleetView(Namespace(mqtt.topic_prefix), default_interval_s=interval)
    filters = [*view.filters(), *([] if args.probe == "never" else [view.namespace.all_events()])]
    try:
        client = MqttClient(mqtt, f"tts-fleet-{secrets.token_hex(6)}",
                            subscriptions=filters, on_message=view.receive,
                            persistent=False)
    except ClientConfigError as exc:
        raise CommandError(str(exc), status=USAGE) from exc
    try:
        connect(client, mqtt)
        pinged = read_fleet(client, view, settle, args.probe, longest)
        if pinged and not args.json:
            print(f"tts-agent fleet: pinged the fleet; {view.answered} answered within the "
                  f"settle time (--probe {args.probe})", file=sys.stderr, flush=True)
        if args.watch:
            _say_incomplete(view)
            return _watch(view, args)
        _print_once(view, args)
        return 0
    finally:
        client.close(timeout=2)


def _forget(args: argparse.Namespace, mqtt: Any, settle: float) -> int:
    from agent.commands.fleet_forget import forget

    verb, ids = args.action[0], args.action[1:]
    if verb != "forget" or not ids:
        raise CommandError("fleet takes no argument but 'forget ID [ID ...]' (got "
                           f"{shown(' '.join(args.action))!r})", status=USAGE)
    if args.watch or args.group or args.state:
        raise CommandError("fleet forget takes no --watch, --group or --state", status=USAGE)
    return forget(mqtt, ids, settle, as_json=args.json)


def select(rows: list[DeviceRow], group: str | None, states: list[str] | None) -> list[DeviceRow]:
    """The rows ``--group`` and ``--state`` keep."""
    return [r for r in rows if (group is None or group in r.groups)
            and (not states or r.state in states)]


def _document(view: FleetView, rows: list[DeviceRow]) -> dict[str, Any]:
    return {"devices": [r.as_json() for r in rows], "count": len(rows), "known": len(view),
            "dropped": view.counts(), "answered_ping": view.answered,
            "complete": view.complete, "read": view.read, "cut_off_s": view.cut_off_s,
            "max_devices": view.max_devices,
            "max_message_bytes": view.max_message_bytes}


def _dropped_line(view: FleetView) -> str | None:
    counts = view.counts()
    parts = [f"{counts['over_cap']} about devices past the cap of {view.max_devices}",
             f"{counts['oversize']} over {view.max_message_bytes} bytes",
             f"{counts['invalid']} not the agent's JSON"]
    kept = [p for p, n in zip(parts, counts.values(), strict=True) if n]
    return f"tts-agent fleet: messages not kept: {'; '.join(kept)}" if kept else None


def _print_once(view: FleetView, args: argparse.Namespace) -> None:
    rows = select(view.rows(), args.group, args.state)
    if args.json:
        print(json.dumps(_document(view, rows)), flush=True)
    else:
        for line in format_rows(rows):
            print(line)
        if not rows:
            print("tts-agent fleet: no device matches" if len(view)
                  else "tts-agent fleet: no device has a retained status or health here",
                  file=sys.stderr)
    dropped = _dropped_line(view)
    if dropped:
        print(dropped, file=sys.stderr)
    _say_incomplete(view)


def _say_incomplete(view: FleetView) -> None:
    """A cut-off read (or devices past the cap) told on stderr, also with ``--json``."""
    from agent.commands.send_account import incomplete

    why = incomplete(view)
    if why:
        print(f"tts-agent fleet: the list is incomplete: {why}", file=sys.stderr, flush=True)


def _watch(view: FleetView, args: argparse.Namespace) -> int:
    """Redraw on every change and every second (the ages grow); Ctrl-C ends with 0."""
    tty = sys.stdout.isatty()
    printed: dict[str, tuple[Any, ...]] = {}
    seen, shown = -1, -2
    if not tty and not args.json:
        print(format_rows([])[0], flush=True)
    try:
        while True:
            rows = select(view.rows(), args.group, args.state)
            if args.json:
                if shown != seen:  # a document per change
                    print(json.dumps(_document(view, rows)), flush=True)
                    shown = seen
            elif tty:
                lines = fit(format_rows(rows), shutil.get_terminal_size().lines)
                sys.stdout.write(_CLEAR + "\n".join(lines) + "\n")
                sys.stdout.flush()
            else:  # plain lines: a device's line again when it changed (its age aside)
                for row, line in zip(rows, format_rows(rows)[1:], strict=True):
                    key = (row.state, row.groups, row.voice, row.version, row.health,
                           row.queue, row.pending, row.last_error)
                    if printed.get(row.device) != key:
                        printed[row.device] = key
                        print(line, flush=True)
            seen = view.wait_change(seen, 1.0)
    except KeyboardInterrupt:
        return 0


def fit(lines: list[str], height: int) -> list[str]:
    """The table cut to a terminal of ``height`` lines (the header and a last line saying how
    many more there are)."""
    if len(lines) < height or height < 4:
        return lines
    keep = height - 2
    return [*lines[:keep], f"... {len(lines) - keep} more (narrow with --group/--state; "
                           "--json lists all)"]


_COLUMNS = ("DEVICE", "STATE", "GROUPS", "VOICE", "VERSION", "QUEUE", "HEALTH", "AGE",
            "CLOCK", "LAST ERROR")


def _cells(row: DeviceRow) -> tuple[str, ...]:
    """The row's cells, every string from the broker :func:`~agent.commands.shown` escaped."""
    queue = "-" if row.queue is None else f"{row.queue}/{row.pending or 0}"
    age = "-" if row.health_age_s is None else _age(row.health_age_s)
    clock = "-" if row.clock_offset_ms is None else f"{row.clock_offset_ms:+.1f}ms"
    return tuple(shown(cell) for cell in (
        row.device, row.state, ",".join(row.groups) or "-", row.voice or "-",
        row.version or "-", queue, row.health or "-", age, clock, row.last_error or "-"))


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.0f}h" if seconds < 172_800 else f"{seconds / 86_400:.0f}d"


def format_rows(rows: list[DeviceRow]) -> list[str]:
    """The table: a header, then one line per device (columns padded to the widest cell;
    QUEUE is jobs waiting / requests pending, AGE the health report's age, CLOCK the device's
    clock less this one's when a ping measured it)."""
    table = [_COLUMNS, *(_cells(r) for r in rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(_COLUMNS) - 1)]
    return ["  ".join([*(c.ljust(w) for c, w in zip(line, widths, strict=False)), line[-1]])
            .rstrip() for line in table]
