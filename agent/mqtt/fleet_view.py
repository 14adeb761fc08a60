"""A controller's view of the fleet, read from the retained presence and health topics.

:class:`FleetView` follows two wildcard filters (``{prefix}/+/status``, ``{prefix}/+/health``) and
keeps one bounded :class:`DeviceRecord` per device: what ``tts-agent fleet`` lists and what ``send
--group/--all --wait`` expects. Where the broker gives wildcards no retained messages,
:func:`read_fleet` pings the fleet. :meth:`FleetView.offer` runs on the MQTT network thread.
Device states, bounds and the probe: docs/internals.md#the-fleet-view.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from agent import jsonbound
from agent.mqtt.clock_offset import ClockOffset, clock_offset
from agent.mqtt.topics import TopicError
from agent.outcomes import Outcome

if TYPE_CHECKING:
    from agent.mqtt.client import InboundMessage, MqttClient
    from agent.mqtt.topics import Namespace, TopicFilter

__all__ = ["DEFAULT_SETTLE_S", "MAX_DEVICES", "MAX_MESSAGE_BYTES", "SILENT_INTERVALS", "STATES",
           "DeviceRecord", "DeviceRow", "FleetView", "read_fleet", "read_limit"]

MAX_DEVICES = 100_000
"""Devices tracked at most; messages about more are counted, not kept."""
MAX_MESSAGE_BYTES = 128 * 1024
"""Largest presence or health payload read (AWS IoT Core's payload limit); larger: counted."""
SILENT_INTERVALS = 3
"""A health report older than this many health intervals makes an online device ``silent``."""
DEFAULT_SETTLE_S = 1.0
"""How long the retained messages are collected when no more come (``--settle``)."""
MAX_TEXT = 200  # the longest string kept from a message (a device id, a version, an error)
STATES = ("online", "conflict", "silent", "stopped", "offline", "unknown")  # State's words
PROBES = ("auto", "always", "never")
"""When :func:`read_fleet` pings the fleet: no device in the retained topics, always, never."""

State = Literal["online", "conflict", "silent", "stopped", "offline", "unknown"]


def _text(value: Any) -> str | None:
    return value[:MAX_TEXT] if isinstance(value, str) else None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@dataclass(slots=True)
class DeviceRecord:
    """What the view knows of one device (the parts of its two retained messages it uses)."""

    device: str
    status: str | None = None
    """``online``, ``offline``, ``stopped`` as the presence says; ``None``: no presence."""
    groups: tuple[str, ...] = ()
    version: str | None = None
    voice: str | None = None
    health_interval_s: float | None = None
    health: str | None = None
    """The health report's overall state (ok, degraded, failing); ``None``: no report."""
    health_time: float | None = None
    """Unix time the health report was made (its ``time``)."""
    queue: int | None = None
    pending: int | None = None
    sync_lead_ms: float | None = None  # the health's sync.lead_ms (send --sync)
    clock: ClockOffset | None = None  # from the probe's ping (agent.mqtt.clock_offset)
    last_error: str | None = None
    """The worst reason of a health report that is not ``ok``."""
    conflict: bool = False  # the health report: another agent instance uses this device id


@dataclass(frozen=True, slots=True)
class DeviceRow:
    """One line of ``tts-agent fleet`` (also its ``--json`` object, key for key)."""

    device: str
    state: State
    groups: tuple[str, ...]
    voice: str | None
    version: str | None
    health: str | None
    """As the report says; ``stale`` when the device is stopped, offline or silent."""
    queue: int | None
    pending: int | None
    last_error: str | None
    health_age_s: float | None
    clock_offset_ms: float | None = None  # its clock less ours, when a ping measured it

    def as_json(self) -> dict[str, Any]:
        return {"device": self.device, "state": self.state, "groups": list(self.groups),
                "voice": self.voice, "version": self.version, "health": self.health,
                "queue": self.queue, "pending": self.pending, "last_error": self.last_error,
                "health_age_s": self.health_age_s, "clock_offset_ms": self.clock_offset_ms}


class FleetView:
    """The fleet as its retained topics describe it (see the module docstring)."""

    def __init__(self, namespace: Namespace, *, default_interval_s: float = 30.0,
                 max_devices: int = MAX_DEVICES,
                 max_message_bytes: int = MAX_MESSAGE_BYTES) -> None:
        self.namespace = namespace
        self.default_interval_s = default_interval_s
        self.max_devices = max_devices
        self.max_message_bytes = max_message_bytes
        self.over_cap = 0
        self.oversize = 0
        self.invalid = 0
        self._records: dict[str, DeviceRecord] = {}
        self._cond = threading.Condition()
        self._last_message = time.monotonic()
        self._changes = 0
        self._probe_id: str | None = None
        self._probe_sent = 0.0
        self.answered = 0
        """Devices that answered the probe's ping."""
        self.cut_off_s: float | None = None
        """A read (:meth:`settle`) cut off at its ``longest_s``: that; ``None``: none was."""

    def filters(self) -> tuple[TopicFilter, TopicFilter]:
        """The two subscriptions the view needs, whatever the size of the fleet."""
        return self.namespace.all_status(), self.namespace.all_health()

    # -- intake (network thread) ----------------------------------------------------------

    def receive(self, message: InboundMessage) -> None:
        """:meth:`offer` as a client's ``on_message`` (a view's own client)."""
        self.offer(message)

    def offer(self, message: InboundMessage) -> bool:
        """Take ``message`` if it is a presence or health message (True), else leave it."""
        for kind, topic_filter in zip(("status", "health"), self.filters(), strict=True):
            captured = topic_filter.captures(message.topic)
            if captured is not None:
                self._take(kind, captured[0], message.payload)
                return True
        if self._probe_id is not None:
            captured = self.namespace.all_events().captures(message.topic)
            if captured is not None:
                return self._take_pong(captured[0], message.payload)
        return False

    def probe(self, request_id: str) -> None:
        """From now on, :meth:`offer` takes the ``pong`` answers to the ping ``request_id``."""
        with self._cond:
            self._probe_id, self._probe_sent = request_id, time.time()

    def _take_pong(self, device: str, payload: bytes) -> bool:
        if len(payload) > self.max_message_bytes or b'"pong"' not in payload:
            return False  # not an answer to the probe: the caller's to handle
        data = _json_object(payload, self.max_message_bytes)
        if (data is None or data.get("id") != self._probe_id or data.get("event") != Outcome.PONG
                or data.get("device") != device):
            return False
        with self._cond:
            self._last_message = time.monotonic()
            self._changes += 1
            self._cond.notify_all()
            record = self._records.get(device)
            if record is None:
                if len(self._records) >= self.max_devices:
                    self.over_cap += 1
                    return True
                record = self._records[device] = DeviceRecord(device[:MAX_TEXT])
            self.answered += 1
            status = data.get("status")
            _read_pong(record, status if isinstance(status, dict) else {})
            record.clock = clock_offset(self._probe_sent, time.time(), data.get("ts"))
        return True

    def _take(self, kind: str, device: str, payload: bytes) -> None:
        with self._cond:
            self._last_message = time.monotonic()
            self._changes += 1
            self._cond.notify_all()
            if len(payload) > self.max_message_bytes:
                self.oversize += 1
                return
            try:
                self.namespace.device(device)
            except TopicError:
                self.invalid += 1
                return
            record = self._records.get(device)
            if not payload:
                if record is not None:
                    self._forget(record, kind)
                return
            data = _json_object(payload, self.max_message_bytes)
            if data is None:
                self.invalid += 1
                return
            if record is None:
                if len(self._records) >= self.max_devices:
                    self.over_cap += 1
                    return
                record = self._records[device] = DeviceRecord(device[:MAX_TEXT])
            if kind == "status":
                _read_status(record, data)
            else:
                _read_health(record, data)

    def _forget(self, record: DeviceRecord, kind: str) -> None:
        if kind == "status":
            record.status = None
        else:
            record.health = record.health_time = record.queue = record.pending = None
            record.last_error = None
        if record.status is None and record.health is None:
            del self._records[record.device]

    # -- reading (any thread) -------------------------------------------------------------

    def settle(self, quiet_s: float, *, longest_s: float) -> bool:
        """Wait until no presence or health message has come for ``quiet_s`` (the retained
        ones arrive right after the subscription), at most ``longest_s``. Whether the quiet
        came; when not, the read was cut off (:attr:`cut_off_s`, :attr:`complete`)."""
        start = time.monotonic()
        deadline = start + longest_s
        with self._cond:
            while True:
                now = time.monotonic()
                quiet_until = max(self._last_message, start) + quiet_s
                if quiet_until <= now:
                    return True
                if deadline <= now:
                    self.cut_off_s = longest_s
                    return False
                self._cond.wait(min(quiet_until, deadline) - now)

    @property
    def read(self) -> int:
        """Presence, health and probe messages read so far (kept or counted)."""
        with self._cond:
            return self._changes

    @property
    def complete(self) -> bool:
        """Whether the view holds every device the read saw: no read was cut off
        (:attr:`cut_off_s`) and no device was past the cap (``over_cap``)."""
        with self._cond:
            return self.cut_off_s is None and not self.over_cap

    def wait_change(self, seen: int, timeout: float) -> int:
        """Wait up to ``timeout`` for a message after change number ``seen``; the latest."""
        with self._cond:
            self._cond.wait_for(lambda: self._changes != seen, timeout)
            return self._changes

    def __len__(self) -> int:
        with self._cond:
            return len(self._records)

    def record(self, device: str) -> DeviceRecord | None:
        with self._cond:
            return self._records.get(device)

    def members(self, group: str | None) -> set[str]:
        """The devices whose presence says ``online`` (and, with ``group``, in it)."""
        with self._cond:
            return {r.device for r in self._records.values() if r.status == "online"
                    and (group is None or group in r.groups)}

    def known_members(self, group: str | None) -> dict[str, str]:
        """Every device known in ``group`` (any device when None): its presence state."""
        with self._cond:
            return {r.device: r.status or "unknown" for r in self._records.values()
                    if group is None or group in r.groups}

    def rows(self, now: float | None = None) -> list[DeviceRow]:
        """One row per device, sorted by device id (``now``: Unix time, default the clock)."""
        now = time.time() if now is None else now
        with self._cond:
            records = sorted(self._records.values(), key=lambda r: r.device)
            return [self._row(r, now) for r in records]

    def _row(self, record: DeviceRecord, now: float) -> DeviceRow:
        age = None if record.health_time is None else round(max(0.0, now - record.health_time), 1)
        interval = record.health_interval_s or self.default_interval_s
        stale = age is not None and age > SILENT_INTERVALS * interval
        state: State
        if record.status in ("offline", "stopped"):
            state = record.status  # type: ignore[assignment]
        elif record.status == "online":
            state = "silent" if stale else "conflict" if record.conflict else "online"
        else:
            state = "silent" if stale else "unknown"
        gone = record.health is not None and state in ("stopped", "offline", "silent")
        return DeviceRow(record.device, state, record.groups, record.voice, record.version,
                         "stale" if gone else record.health,  # the report of an agent gone
                         record.queue, record.pending, record.last_error, age,
                         None if record.clock is None else record.clock.offset_ms)

    def counts(self) -> dict[str, int]:
        """What was not kept: ``over_cap``, ``oversize``, ``invalid`` messages."""
        with self._cond:
            return {"over_cap": self.over_cap, "oversize": self.oversize,
                    "invalid": self.invalid}


def _json_object(payload: bytes, max_bytes: int) -> dict[str, Any] | None:
    try:
        data = jsonbound.loads(payload, max_bytes=max_bytes)
    except jsonbound.JsonError:  # deep, huge or malformed: the device is shown unreadable
        return None
    return data if isinstance(data, dict) else None


def _read_status(record: DeviceRecord, data: dict[str, Any]) -> None:
    state = data.get("state")
    record.status = state if state in ("online", "offline", "stopped") else None
    groups = data.get("groups")
    if isinstance(groups, list):  # the Last Will of an older agent has none: keep them
        record.groups = tuple(g[:MAX_TEXT] for g in groups[:32] if isinstance(g, str))
    record.version = _text(data.get("version")) or record.version
    record.voice = _text(data.get("default_voice")) or record.voice
    interval = _number(data.get("health_interval_s"))
    record.health_interval_s = interval if interval and interval > 0 else None


def _read_pong(record: DeviceRecord, status: dict[str, Any]) -> None:
    """A ping's answer fills what the retained messages did not say."""
    if record.status is None:
        record.status = "online" if status.get("state") == "online" else "stopped"
    groups = status.get("groups")
    if not record.groups and isinstance(groups, list):
        record.groups = tuple(g[:MAX_TEXT] for g in groups[:32] if isinstance(g, str))
    record.version = record.version or _text(status.get("version"))
    record.voice = record.voice or _text(status.get("default_voice"))
    pending = _number(status.get("pending"))
    if record.pending is None and pending is not None:
        record.pending = int(pending)
    health = status.get("health")
    if record.health is None and isinstance(health, dict):
        record.health = _text(health.get("state")) or "unknown"
        record.health_time = time.time()
        reasons = health.get("reasons")
        worst = reasons[0] if isinstance(reasons, list) and reasons else None
        record.last_error = _text(worst) if record.health != "ok" else None


def read_limit(settle_s: float) -> float:
    """The longest retained read by default (``--read-limit``): 20 × ``settle_s``, 10 s at
    least."""
    return max(10.0, 20 * settle_s)


def read_fleet(client: MqttClient, view: FleetView, settle_s: float, probe: str,
               longest_s: float | None = None) -> bool:
    """Collect the retained messages until none came for ``settle_s`` (at most ``longest_s``,
    default :func:`read_limit`; a read cut off there: :attr:`FleetView.complete` False);
    then, when ``probe`` says so (``always``, or ``auto`` and no device known), ping every
    device (with ``sent_ms``) and collect the answers the same way. ``client`` follows
    :meth:`FleetView.filters` and the events wildcard. Whether the ping was sent."""
    from agent.mqtt.client import OutboundMessage
    from agent.mqtt.protocol import PingCommand, new_request_id
    longest = read_limit(settle_s) if longest_s is None else longest_s
    view.settle(settle_s, longest_s=longest)
    if probe == "never" or (probe == "auto" and len(view)):
        return False
    request_id = new_request_id()
    view.probe(request_id)
    payload = PingCommand(id=request_id, sent_ms=round(time.time() * 1000, 3)).model_dump_json(
        exclude_none=True).encode("utf-8")
    sent = client.publish(OutboundMessage(view.namespace.fleet_command("ping"), payload))
    if sent.dropped or not sent.wait(longest):
        return False
    view.settle(settle_s, longest_s=longest)
    return True


def _read_health(record: DeviceRecord, data: dict[str, Any]) -> None:
    record.health = _text(data.get("state")) or "unknown"
    instance = data.get("instance")
    record.conflict = isinstance(instance, dict) and instance.get("state") == "failing"
    record.version = _text(data.get("version")) or record.version
    stamp = _text(data.get("time"))
    try:
        record.health_time = datetime.fromisoformat(stamp).timestamp() if stamp else None
    except ValueError:
        record.health_time = None
    queue = data.get("queue")
    if isinstance(queue, dict):
        depth, pending = _number(queue.get("depth")), _number(queue.get("pending"))
        record.queue = int(depth) if depth is not None else None
        record.pending = int(pending) if pending is not None else None
    sync = data.get("sync")
    record.sync_lead_ms = _number(sync.get("lead_ms")) if isinstance(sync, dict) else None
    voices = data.get("voices")
    if isinstance(voices, dict) and record.voice is None:
        record.voice = _text(voices.get("default"))
    reasons = data.get("reasons")
    worst = reasons[0] if isinstance(reasons, list) and reasons else None
    record.last_error = _text(worst) if record.health != "ok" else None
