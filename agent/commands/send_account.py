"""``tts-agent send --group G ... --wait`` and ``--all --wait``: the account, device by device.

Before the command is published the expected devices are read from the retained status
(:func:`agent.mqtt.fleet_view.read_fleet`); each final event is printed as it arrives, the wait
ends when every expected device answered or went silent, and a summary names who failed or did not
answer. A helper of :mod:`agent.commands.send`, no sub-command of its own. When the wait ends and
the exit status: docs/internals.md#the-account-of-a-group-send.
"""

from __future__ import annotations

import json
import queue
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent.commands import CONFLICT, FAILED, NO_ANSWER, OK, CommandError, shown
from agent.commands.send_sync import start_lines
from agent.commands.send_wait import (
    CONFLICT_GRACE_S,
    conflict_line,
    event_for,
    silence_for,
    succeeded,
)
from agent.outcomes import Outcome

if TYPE_CHECKING:
    from agent.mqtt.client import InboundMessage
    from agent.mqtt.fleet_view import FleetView
    from agent.mqtt.topics import Topic

__all__ = ["Account", "Inbox", "await_account", "incomplete", "register", "summary"]

_SLICE_S = 0.5
"""Longest wait on the inbox between looks at the devices' deadlines and presence."""
_NAMED = 50
"""Devices named at most per summary line (the rest are counted)."""


def register(subparsers: Any) -> None:
    """Nothing to register: ``send`` (:mod:`agent.commands.send`) owns the sub-command."""


class Inbox(queue.Queue["InboundMessage"]):
    """The bounded queue between the network thread and the wait; what did not fit is counted
    (:attr:`dropped`) and told in the summary, never silently lost."""

    dropped = 0

    def offer(self, message: InboundMessage) -> None:
        """Network thread: queue ``message``, or count it when the queue is full."""
        try:
            self.put_nowait(message)
        except queue.Full:
            self.dropped += 1


@dataclass
class Account:
    """Who should answer, who did, and how."""

    expected: set[str]
    timeout: float
    finals: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The final events of members (expected, or not online when sent), by device."""
    extra: dict[str, dict[str, Any]] = field(default_factory=dict)
    lost: dict[str, str] = field(default_factory=dict)
    """Expected devices whose presence went offline/stopped during the wait."""
    not_online: dict[str, str] = field(default_factory=dict)
    """Known members that were stopped or offline when the command was sent (state by id)."""
    returned: set[str] = field(default_factory=set)
    """:attr:`not_online` members that came back during the wait (their presence says online,
    or an event for the command came from them): waited for as the expected ones are."""
    online_only: bool = False
    """True (``--online-only``): :attr:`not_online` members do not make the status 3 (without
    it, only those not cleanly stopped do: :meth:`missing`)."""
    silent_when_sent: set[str] = field(default_factory=set)
    """Expected devices whose last health report was already stale (``fleet``'s ``silent``)."""
    incomplete: str | None = None
    """Why the membership may miss members (the retained read cut off, the cap): status 3."""
    deadline: dict[str, float] = field(default_factory=dict)
    linger_until: float | None = None
    """When everyone answered: until when a second instance's answer is waited for."""
    silences: dict[str, float] = field(default_factory=dict)
    """Devices whose ``accepted`` named a progress interval: the silence waited for each."""
    conflicts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Devices that answered from more than one agent instance: every final, by device."""

    def start(self, now: float) -> None:
        self.deadline = dict.fromkeys(self.expected, now + self.timeout)

    def heard(self, device: str, now: float, event: dict[str, Any] | None = None) -> None:
        """An event of ``device``: its silence starts again (at least twice the progress
        interval its ``accepted`` names: :func:`~agent.commands.send_wait.silence_for`)."""
        self.come_back(device, now)
        silence = self.silences.get(device, self.timeout)
        if event is not None:
            silence = self.silences[device] = silence_for(event, silence)
        if device in self.deadline:
            self.deadline[device] = now + silence

    def come_back(self, device: str, now: float) -> None:
        """A :attr:`not_online` member is back: wait for it from now on."""
        if device in self.not_online and device not in self.returned:
            self.returned.add(device)
            self.deadline[device] = now + self.timeout

    def waited(self) -> set[str]:
        return self.expected | self.returned

    def member(self, device: str) -> bool:
        return device in self.expected or device in self.not_online

    def open(self, now: float) -> set[str]:
        """Devices still worth waiting for."""
        return {d for d in self.waited() if d not in self.finals and d not in self.lost
                and self.deadline[d] > now}

    def silent(self) -> list[str]:
        return sorted(self.waited() - self.finals.keys())

    def absent(self) -> dict[str, str]:
        """Members not online when sent that neither came back nor answered."""
        return {d: s for d, s in self.not_online.items()
                if d not in self.finals and d not in self.returned}

    def missing(self) -> list[str]:
        """:meth:`absent` members that make the status 3: not those cleanly ``stopped`` (taken
        out of service on purpose), only those ``offline`` (their Last Will: they died) or
        ``unknown``."""
        return sorted(d for d, s in self.absent().items() if s != "stopped")

    def failed(self) -> list[str]:
        return sorted(d for d, e in self.finals.items() if not succeeded(e))

    def status(self) -> int:
        if self.conflicts:
            return CONFLICT
        if self.silent() or self.incomplete or (self.missing() and not self.online_only):
            return NO_ANSWER
        everyone = [*self.finals.values(), *self.extra.values()]
        return OK if all(succeeded(e) for e in everyone) else FAILED


def incomplete(view: FleetView) -> str | None:
    """Why ``view`` may not hold every device (a cut-off read, devices past the cap), for a
    line on stderr; ``None`` when it is :attr:`~FleetView.complete`."""
    parts = []
    if view.cut_off_s is not None:
        parts.append(f"the retained read was cut off at {view.cut_off_s:g} s (--read-limit) "
                     f"after {view.read} messages, before a quiet --settle")
    counts = view.counts()
    if counts["over_cap"]:
        parts.append(f"{counts['over_cap']} messages about devices past the cap of "
                     f"{view.max_devices} were not kept")
    return "; ".join(parts) or None


def _account(view: FleetView, group: str | None, timeout: float,
             online_only: bool) -> Account:
    """The account as the membership read (:func:`~agent.mqtt.fleet_view.read_fleet`) says."""
    account = Account(view.members(group), timeout, online_only=online_only,
                      incomplete=incomplete(view))
    account.not_online = {d: s for d, s in view.known_members(group).items()
                          if d not in account.expected}
    account.silent_when_sent = {r.device for r in view.rows() if r.state == "silent"
                                and r.device in account.expected}
    return account


def await_account(inbox: Inbox, request_id: str, timeout: float, *,
                  reply: Topic | None, correlation: bytes | None, progress: bool,
                  view: FleetView, group: str | None, online_only: bool = False) -> int:
    """Collect the finals of the devices ``view`` expects; print them and the summary; the
    exit status (see the module docstring)."""
    account = _account(view, group, timeout, online_only)
    now = time.monotonic()
    account.start(now)
    quiet_until = now + timeout  # with nobody expected: the old wait, until a silence
    while True:
        now = time.monotonic()
        _note_presence(account, view, now)
        if _done(account, now, quiet_until):
            break
        try:
            message = inbox.get(timeout=_SLICE_S)
        except queue.Empty:
            continue
        event = event_for(message, request_id, reply, correlation)
        if event is None:
            continue
        device = str(event.get("device", "?"))
        now = time.monotonic()
        account.heard(device, now, event)
        quiet_until = now + account.silences.get(device, timeout)
        if not event.get("final"):
            if progress:
                print(json.dumps(event), flush=True)
        elif reply is None or message.topic == reply:  # MQTT 5: the final from the reply topic
            _take_final(account, device, event)
    if not account.expected and not account.finals and not account.extra:
        raise CommandError(f"no answer to {request_id}: no device answered within {timeout:g} s "
                           "and none is online in the retained status (--timeout)",
                           status=NO_ANSWER)
    lines = summary(account, group, account.absent())
    if inbox.dropped:
        lines.append(f"{inbox.dropped} events not read: the queue of {inbox.maxsize} "
                     "between the network and this command was full")
    for line in lines:
        print(f"tts-agent send: {line}", file=sys.stderr, flush=True)
    return account.status()


def _done(account: Account, now: float, quiet_until: float) -> bool:
    """Whether the wait is over: everyone answered (then a second agent instance with one's
    device id is given :data:`~agent.commands.send_wait.CONFLICT_GRACE_S` more) or went silent;
    with nobody expected, a silence."""
    if not account.waited():
        return now >= quiet_until
    if account.open(now):
        return False
    if account.linger_until is None:
        named = any(isinstance(e.get("instance"), str) for e in account.finals.values())
        account.linger_until = now + (CONFLICT_GRACE_S if named else 0.0)
    return now >= account.linger_until


def _take_final(account: Account, device: str, event: dict[str, Any]) -> None:
    """Print and keep a final event; a redelivery is dropped, a second instance's kept."""
    if device in account.finals or device in account.extra:
        if _second_instance(account, device, event):
            print(json.dumps(event), flush=True)
        return
    print(json.dumps(event), flush=True)
    (account.finals if account.member(device) else account.extra)[device] = event


def _second_instance(account: Account, device: str, event: dict[str, Any]) -> bool:
    """Whether ``event`` is a final from another agent instance with ``device``'s id (kept in
    :attr:`Account.conflicts`)."""
    first = account.finals.get(device) or account.extra[device]
    finals = account.conflicts.get(device, [first])
    instance = event.get("instance")
    if not isinstance(instance, str) or any(f.get("instance") == instance for f in finals):
        return False
    account.conflicts[device] = [*finals, event]
    return True


def _note_presence(account: Account, view: FleetView, now: float) -> None:
    """Expected devices whose presence turned offline or stopped: no answer will come; members
    not online when sent whose presence turned online: they came back, an answer may come."""
    for device in account.expected - account.finals.keys() - account.lost.keys():
        record = view.record(device)
        if record is not None and record.status in ("offline", "stopped"):
            account.lost[device] = record.status
    for device in account.not_online.keys() - account.returned:
        record = view.record(device)
        if record is not None and record.status == "online":
            account.come_back(device, now)


def _names(devices: list[str], why: dict[str, str] | None = None) -> str:
    shown = [f"{d} ({why[d]})" if why and d in why else d for d in devices[:_NAMED]]
    more = len(devices) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def _reason(event: dict[str, Any]) -> str:
    kind = str(event.get("event"))
    if kind == Outcome.DUPLICATE:
        kind = f"duplicate of {event.get('outcome')}"
    reason = event.get("reason")
    return f"{kind}: {str(reason)[:200]}" if reason else kind


def summary(account: Account, group: str | None, not_online: dict[str, str]) -> list[str]:
    """The summary's lines (stderr): the count line, then failed, no answer, come back, extra
    and not online devices by name, and an incomplete membership; device ids and reasons come
    from the broker: escaped (:func:`~agent.commands.shown`)."""
    who = f"group {group}" if group is not None else "the fleet"
    answered = len(account.finals)
    failed = account.failed()
    silent = account.silent()
    back = f" + {len(account.returned)} back online" if account.returned else ""
    lines = [f"{who}: {len(account.expected)} expected (online){back}, {answered} answered: "
             f"{answered - len(failed)} succeeded, {len(failed)} failed, {len(silent)} no answer "
             f"within {account.timeout:g} s" + (f"; {len(account.extra)} extra"
                                                if account.extra else "")]
    if failed:
        lines.append("failed: " + _names(failed, {d: _reason(account.finals[d]) for d in failed}))
    if silent:
        why = {d: "silent when sent" for d in account.silent_when_sent}
        why.update({d: f"{account.not_online[d]} when sent, came back"
                    for d in account.returned})
        why.update({d: f"went {s}" for d, s in account.lost.items()})
        lines.append("no answer: " + _names(silent, why))
    came = sorted(account.not_online.keys() & account.finals.keys())
    if came:
        lines.append("answered after not online when sent: " + _names(
            came, {d: f"{account.not_online[d]} when sent; {_reason(account.finals[d])}"
                   for d in came}))
    if account.extra:
        extra = sorted(account.extra)
        lines.append("extra (not online in the retained status when sent): " + _names(
            extra, {d: _reason(account.extra[d]) for d in extra}))
    if not_online:
        lines.append("not online when sent: " + _names(sorted(not_online), not_online))
    lines.extend(start_lines(account.finals))
    for device in sorted(account.conflicts):
        lines.append(conflict_line(account.conflicts[device]))
    if account.incomplete:
        lines.append(f"membership incomplete: {account.incomplete}; members not read were "
                     "not expected (--read-limit, --settle)")
    return [shown(line) for line in lines]
