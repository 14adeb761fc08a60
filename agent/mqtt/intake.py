"""Network-thread intake: inbound message -> validated :class:`Request` on a bounded queue.

Runs on the MQTT network thread, so it only parses, checks and hands on; it never waits. A
message it cannot accept is answered with a ``rejected`` event right here; a repeat of an id
in use is answered by the tracker (:meth:`agent.mqtt.tracker.RequestTracker.admit`) and not
queued. :class:`Inbox` keeps control commands (ping, stop, volume) off the speaks' queue, so
a flood of speaks never makes them ``busy``. The design: docs/internals.md#the-intake.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from agent.logs import get_logger
from agent.mqtt.client import InboundMessage
from agent.mqtt.hermes import HermesOrigin, HermesRejected, parse_say
from agent.mqtt.protocol import (
    Command,
    CommandRejected,
    PingCommand,
    StopCommand,
    VolumeCommand,
    new_request_id,
    parse_command,
    salvage_id,
)
from agent.mqtt.publisher import ReplyRoute
from agent.mqtt.refused import RefusedTopicMessage
from agent.mqtt.topics import HERMES_SAY, CommandRoute, DeviceTopics, Topic, TopicError, TopicFilter
from agent.mqtt.tracker import RequestTracker
from agent.outcomes import Outcome

__all__ = ["CONTROL_QUEUE", "RETAINED_REASON", "Inbox", "InboxFull", "Intake", "Request"]

log = get_logger(__name__)

RETAINED_REASON = "retained commands are not executed; publish without the retain flag"
CONTROL_QUEUE = 64
"""Length of :class:`Inbox`'s control lane (ping, stop, volume)."""


@dataclass(frozen=True, slots=True)
class Request:
    """A validated command on its way to the dispatcher."""

    command: Command
    name: str
    route: CommandRoute | None
    reply: ReplyRoute | None
    hermes: HermesOrigin | None
    deadline: float | None
    """``time.monotonic()`` after which the command must not start (MQTT Message Expiry)."""
    received: float

    @property
    def id(self) -> str:
        return self.command.id or ""


class InboxFull(queue.Full):
    """A lane of the :class:`Inbox` is full; the message is the ``busy:`` reason."""


class Inbox:
    """The intake queue in two bounded lanes, network thread -> dispatcher: ``ping``, ``stop``
    and ``volume`` in a control lane (:data:`CONTROL_QUEUE` long) served first; speaks,
    ``reload`` and the rest in the speak lane (``maxsize``, ``mqtt.intake_queue``), in order.
    A ``stop`` still comes after every request queued before it (so that it cuts them); the
    other control commands overtake speaks and a waiting stop, in their order. Same calls as
    the :class:`queue.Queue` it replaces."""

    def __init__(self, maxsize: int, controls: int = CONTROL_QUEUE) -> None:
        self.maxsize = maxsize
        self.control_maxsize = controls
        self._speaks: deque[tuple[int, Request]] = deque()
        self._controls: deque[tuple[int, Request]] = deque()
        self._order = itertools.count()
        self._ready = threading.Condition()

    def put_nowait(self, request: Request) -> None:
        """Queue ``request`` in its lane; raises :class:`InboxFull` when that lane is full."""
        control = isinstance(request.command, (PingCommand, StopCommand, VolumeCommand))
        lane, size = ((self._controls, self.control_maxsize) if control
                      else (self._speaks, self.maxsize))
        with self._ready:
            if len(lane) >= size:
                raise InboxFull(f"busy: {'control' if control else 'intake'} queue full "
                                f"({size})")
            lane.append((next(self._order), request))
            self._ready.notify()

    put = put_nowait

    def get(self, block: bool = True, timeout: float | None = None) -> Request:
        """The next request (a control one first); raises :class:`queue.Empty`."""
        with self._ready:
            if not self._ready.wait_for(lambda: self._speaks or self._controls,
                                        timeout if block else 0):
                raise queue.Empty
            first = self._speaks[0][0] if self._speaks else None
            for index, (order, control) in enumerate(self._controls):
                if first is None or first > order or not isinstance(control.command,
                                                                    StopCommand):
                    del self._controls[index]
                    return control
            return self._speaks.popleft()[1]

    def get_nowait(self) -> Request:
        return self.get(block=False)

    def qsize(self) -> int:
        with self._ready:
            return len(self._speaks) + len(self._controls)

    def empty(self) -> bool:
        return self.qsize() == 0


class Intake:
    """Turns inbound MQTT messages into requests. :meth:`on_message` runs on the network thread."""

    def __init__(
        self,
        *,
        topics: DeviceTopics,
        groups: tuple[str, ...],
        tracker: RequestTracker,
        requests: Inbox | queue.Queue[Request],
        max_payload_bytes: int,
        max_text_chars: int,
        hermes_site_id: str | None,
    ) -> None:
        self.topics = topics
        self.groups = groups
        self.tracker = tracker
        self.requests = requests
        self.max_payload_bytes = max_payload_bytes
        self.max_text_chars = max_text_chars
        self.hermes_site_id = hermes_site_id
        self._closed = threading.Event()
        self._listeners: dict[Topic, Callable[[InboundMessage], None]] = {}
        self.duplicates = 0
        """Repeated ids answered without queueing the command again."""

    @staticmethod
    def subscriptions(topics: DeviceTopics, groups: tuple[str, ...],
                      hermes: bool) -> tuple[TopicFilter, ...]:
        """What a device subscribes to: its commands, its groups', the fleet's, Hermes say."""
        filters = topics.command_filters(groups)
        return (*filters, HERMES_SAY.as_filter()) if hermes else filters

    def close(self) -> None:
        """Refuse everything from now on (shutdown). Any thread."""
        self._closed.set()

    def listen(self, topic: Topic, handler: Callable[[InboundMessage], None]) -> None:
        """Hand every non-empty message on ``topic`` to ``handler`` (network thread; it must
        not block) instead of routing it as a command; an add-on's own topic (Home Assistant's
        birth message and notify entity). Call before the client starts or from its thread."""
        self._listeners = {**self._listeners, topic: handler}

    def submit(self, request: Request) -> None:
        """Network thread: queue a request an add-on built (deduplicated, bounded, answered
        ``rejected`` when the queue is full or the agent is stopping), like a command's."""
        self._enqueue(request)

    def refuse(self, exc: CommandRejected, name: str, reply: ReplyRoute | None = None) -> None:
        """Network thread: answer a message an add-on could not turn into a request (also on
        its Response Topic, ``reply``)."""
        if exc.request_id is None:
            exc.request_id = new_request_id()
        self._reject(exc, name, reply, None)

    def on_message(self, message: InboundMessage) -> None:
        """Network thread: validate, dedupe, enqueue, or answer with ``rejected``."""
        if message.retain and not message.payload:
            log.debug("retained_message_cleared", topic=message.topic.value)
            return
        listener = self._listeners.get(message.topic)
        if listener is not None:
            listener(message)
            return
        if message.topic == HERMES_SAY:
            if self.hermes_site_id is not None:
                self._hermes(message, self.hermes_site_id)
            return
        route = self.topics.route(message.topic, self.groups)
        if route is None:
            log.debug("message_ignored", topic=message.topic.value)
            return
        reply: ReplyRoute | None = None
        try:
            reply = self.reply_route(message)
            if message.retain:
                raise CommandRejected(RETAINED_REASON, command=route.name)
            command = parse_command(route.name, message.payload,
                                    max_payload_bytes=self.max_payload_bytes,
                                    max_text_chars=self.max_text_chars)
        except CommandRejected as exc:
            if exc.request_id is None:
                exc.request_id = salvage_id(message.payload, max_bytes=self.max_payload_bytes)
            self._reject(exc, route.name, reply, None)
            return
        self._enqueue(Request(command, route.name, route, reply, None,
                              self._deadline(message), message.received))

    def on_refused_topic(self, message: RefusedTopicMessage) -> None:
        """Network thread: a message on one of our command filters whose topic is too long to
        be a :class:`Topic` (its command name is): answered with ``rejected`` under its
        salvaged id (or a generated one), on the events topic and its Response Topic."""
        route = self.topics.route_refused(message.topic, self.groups)
        if route is None or (message.retain and not message.payload):
            log.debug("message_ignored", topic=message.topic[:64])
            return
        name = route.name if len(route.name) <= 64 else route.name[:64] + "..."
        try:
            reply = self.reply_route(message)
        except CommandRejected:
            reply = None  # the rejection below answers it on the events topic alone
        self._reject(CommandRejected(f"command topic refused: {message.error}",
                                     salvage_id(message.payload,
                                                max_bytes=self.max_payload_bytes), name),
                     name, reply, None)

    def _hermes(self, message: InboundMessage, site_id: str) -> None:
        try:
            parsed = parse_say(message.payload, site_id=site_id,
                               max_payload_bytes=self.max_payload_bytes,
                               max_text_chars=self.max_text_chars)
        except HermesRejected as exc:
            self._reject(exc, "hermes/tts/say", None, exc.origin)
            return
        if parsed is None:
            return  # another site's say
        command, origin = parsed
        if message.retain:
            self._reject(HermesRejected(RETAINED_REASON, origin), "hermes/tts/say", None, origin)
            return
        self._enqueue(Request(command, "speak", None, None, origin, self._deadline(message),
                              message.received))

    def reply_route(self, message: InboundMessage | RefusedTopicMessage) -> ReplyRoute | None:
        """The message's Response Topic and Correlation Data, or None without one; raises
        :class:`CommandRejected` for a Response Topic that may not be used."""
        if message.response_topic is None:
            return None
        try:
            topic = Topic(message.response_topic)
        except TopicError as exc:
            raise CommandRejected(f"invalid response topic: {exc}") from None
        if not self.topics.reply_allowed(topic):
            prefix = self.topics.namespace.prefix
            raise CommandRejected(
                f"response topic {topic.value!r} is not allowed: under {prefix!r} only "
                f"{prefix}/reply/... and this device's {self.topics.events.value} may be used; "
                "'$' and hermes/ topics are refused")
        return ReplyRoute(topic, message.correlation_data)

    @staticmethod
    def _deadline(message: InboundMessage) -> float | None:
        return None if message.expiry_s is None else message.received + message.expiry_s

    def _reject(self, exc: CommandRejected, name: str, reply: ReplyRoute | None,
                hermes: HermesOrigin | None) -> None:
        """Refuse a message before it was admitted: its id (if any) stays free for a retry."""
        self.tracker.answer(exc.request_id or new_request_id(), exc.command or name,
                            Outcome.REJECTED, reason=exc.reason, reply=reply, hermes=hermes,
                            admitted=False)

    def _enqueue(self, request: Request) -> None:
        if not self.tracker.admit(request.id, request.name, reply=request.reply,
                                  hermes=request.hermes):
            self.duplicates += 1
            log.info("duplicate_command_answered", id=request.id, command=request.name)
            return
        if self._closed.is_set():
            self._answer_rejected(request, "agent is shutting down")
            return
        try:
            self.requests.put_nowait(request)
        except queue.Full as exc:
            self._answer_rejected(request, str(exc) if isinstance(exc, InboxFull)
                                  else f"busy: intake queue full ({self.requests.maxsize})")

    def _answer_rejected(self, request: Request, reason: str) -> None:
        self.tracker.answer(request.id, request.name, Outcome.REJECTED, reason=reason,
                            reply=request.reply, hermes=request.hermes)
