"""Every MQTT topic the agent uses, built and matched in this one module.

Topics are values: :class:`Topic` (a concrete name) and :class:`TopicFilter` (``+`` and ``#``
allowed) are frozen and validated when made; nothing else formats a topic string or routes on
``split("/")``. Home Assistant's discovery topics are :class:`DiscoveryTopics`. The layout under
the prefix: docs/internals.md#mqtt-topics (and docs/mqtt-protocol.md#topics).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from paho.mqtt.client import topic_matches_sub

__all__ = [
    "FLEET_LEVEL",
    "GROUP_LEVEL",
    "HERMES_ERROR",
    "HERMES_SAY",
    "HERMES_SAY_FINISHED",
    "MAX_TOPIC_BYTES",
    "CommandRoute",
    "DeviceTopics",
    "DiscoveryTopics",
    "Namespace",
    "Topic",
    "TopicError",
    "TopicFilter",
    "group_object_id",
]

MAX_TOPIC_BYTES = 512
"""Longest topic the agent builds or accepts (the protocol allows 65535; we need far less)."""

GROUP_LEVEL = "group"
FLEET_LEVEL = "all"
_RESERVED_DEVICE_IDS = frozenset({GROUP_LEVEL, FLEET_LEVEL, "reply"})
_FORBIDDEN_IN_LEVEL = frozenset("/+#\0")


class TopicError(ValueError):
    """A topic, filter or topic level is not valid."""


def _check_common(value: str, what: str) -> None:
    if not value:
        raise TopicError(f"{what} is empty")
    if len(value.encode("utf-8", errors="replace")) > MAX_TOPIC_BYTES:
        raise TopicError(f"{what} is longer than {MAX_TOPIC_BYTES} bytes")
    if "\0" in value:
        raise TopicError(f"{what} contains a NUL character")


def _level(value: str, what: str) -> str:
    """Validate one topic level that we insert into a topic (device id, group, command name)."""
    if not value or any(c in _FORBIDDEN_IN_LEVEL for c in value):
        raise TopicError(f"{what} {value!r} must be non-empty and free of '/', '+', '#'")
    return value


@dataclass(frozen=True, slots=True)
class Topic:
    """A concrete topic name (what a message is published to). No wildcards."""

    value: str

    def __post_init__(self) -> None:
        _check_common(self.value, "topic")
        if "+" in self.value or "#" in self.value:
            raise TopicError(f"topic {self.value!r} contains a wildcard")

    def __str__(self) -> str:
        return self.value

    def as_filter(self) -> TopicFilter:
        """A filter matching exactly this topic."""
        return TopicFilter(self.value)

    def child(self, *levels: str) -> Topic:
        """This topic with ``levels`` appended (each validated as a single level)."""
        parts = [self.value, *(_level(level, "topic level") for level in levels)]
        return Topic("/".join(parts))


@dataclass(frozen=True, slots=True)
class TopicFilter:
    """A subscription filter: ``+`` matches one level, a final ``#`` any number of levels."""

    value: str

    def __post_init__(self) -> None:
        _check_common(self.value, "topic filter")
        levels = self.value.split("/")
        for index, level in enumerate(levels):
            if level == "#" and index != len(levels) - 1:
                raise TopicError(f"filter {self.value!r}: '#' must be the last level")
            if level not in ("+", "#") and ("+" in level or "#" in level):
                raise TopicError(f"filter {self.value!r}: a wildcard must be a whole level")

    def __str__(self) -> str:
        return self.value

    def matches(self, topic: Topic) -> bool:
        """True when ``topic`` would be delivered to a subscriber of this filter."""
        return bool(topic_matches_sub(self.value, topic.value))

    def captures(self, topic: Topic) -> tuple[str, ...] | None:
        """The levels the wildcards stand for in ``topic`` (``#`` gives the joined rest).

        ``None`` when the topic does not match.
        """
        if not self.matches(topic):
            return None
        names = topic.value.split("/")
        captured: list[str] = []
        for index, level in enumerate(self.value.split("/")):
            if level == "+":
                captured.append(names[index])
            elif level == "#":
                captured.append("/".join(names[index:]))
        return tuple(captured)


HERMES_SAY = Topic("hermes/tts/say")
HERMES_SAY_FINISHED = Topic("hermes/tts/sayFinished")
HERMES_ERROR = Topic("hermes/error/tts")


@dataclass(frozen=True, slots=True)
class CommandRoute:
    """Where an inbound command came from: its name and the scope of the topic."""

    name: str
    scope: Literal["device", "group", "fleet"]
    group: str | None = None


@dataclass(frozen=True, slots=True)
class Namespace:
    """All topics under one prefix; the fleet-wide and group parts need no device id."""

    prefix: str = "tts"

    def __post_init__(self) -> None:
        root = Topic(self.prefix)
        if root.value.startswith("$") or root.value.startswith("/") or root.value.endswith("/"):
            raise TopicError(f"topic prefix {self.prefix!r} must not start with '$' or '/' "
                             "nor end with '/'")

    @property
    def root(self) -> Topic:
        return Topic(self.prefix)

    def device(self, device_id: str) -> DeviceTopics:
        """The topics of device ``device_id``."""
        return DeviceTopics(self, device_id)

    def group_command(self, group: str, name: str) -> Topic:
        return self.root.child(GROUP_LEVEL, _level(group, "group"), "cmd", name)

    def fleet_command(self, name: str) -> Topic:
        return self.root.child(FLEET_LEVEL, "cmd", name)

    def reply(self, client_id: str) -> Topic:
        """A private reply topic for a controller client (``tts-agent send --wait``)."""
        return self.root.child("reply", _level(client_id, "client id"))

    def space(self) -> TopicFilter:
        """Every topic under the prefix (the prefix itself included)."""
        return TopicFilter(f"{self.prefix}/#")

    def reply_space(self) -> TopicFilter:
        """Every controller's reply topic (:meth:`reply` and any level below it)."""
        return TopicFilter(f"{self.prefix}/reply/#")

    def all_events(self) -> TopicFilter:
        """Events of every device (a controller's subscription)."""
        return TopicFilter(f"{self.prefix}/+/events")

    def all_status(self) -> TopicFilter:
        """Every device's retained presence (``tts-agent fleet``, ``send --wait``)."""
        return TopicFilter(f"{self.prefix}/+/status")

    def all_health(self) -> TopicFilter:
        """Every device's retained health report (``tts-agent fleet``, ``send --wait``)."""
        return TopicFilter(f"{self.prefix}/+/health")



@dataclass(frozen=True, slots=True)
class DeviceTopics:
    """The topics one device publishes to and listens on."""

    namespace: Namespace
    device_id: str

    def __post_init__(self) -> None:
        _level(self.device_id, "device id")
        if self.device_id in _RESERVED_DEVICE_IDS:
            raise TopicError(f"device id {self.device_id!r} is reserved for topic routing")

    @property
    def base(self) -> Topic:
        return self.namespace.root.child(self.device_id)

    def command(self, name: str) -> Topic:
        return self.base.child("cmd", name)

    @property
    def events(self) -> Topic:
        return self.base.child("events")

    @property
    def status(self) -> Topic:
        return self.base.child("status")

    @property
    def health(self) -> Topic:
        return self.base.child("health")

    @property
    def ha_notify(self) -> Topic:
        """Plain text (or a speak command's JSON) from Home Assistant's notify entity."""
        return self.base.child("ha", "notify")

    def _device_filter(self) -> TopicFilter:
        return TopicFilter(f"{self.base.value}/cmd/+")

    def _group_filter(self, group: str) -> TopicFilter:
        group_root = self.namespace.root.child(GROUP_LEVEL, _level(group, "group"))
        return TopicFilter(f"{group_root}/cmd/+")

    def _fleet_filter(self) -> TopicFilter:
        return TopicFilter(f"{self.namespace.root.child(FLEET_LEVEL)}/cmd/+")

    def command_filters(self, groups: tuple[str, ...] = ()) -> tuple[TopicFilter, ...]:
        """What the device subscribes to for commands: its own, its groups', the fleet's."""
        return (
            self._device_filter(),
            *(self._group_filter(group) for group in groups),
            self._fleet_filter(),
        )

    def _scopes(self, groups: tuple[str, ...]) -> list[
            tuple[TopicFilter, Literal["device", "group", "fleet"], str | None]]:
        """The command filters with the scope each stands for."""
        return [(self._device_filter(), "device", None),
                *((self._group_filter(group), "group", group) for group in groups),
                (self._fleet_filter(), "fleet", None)]

    def route(self, topic: Topic, groups: tuple[str, ...] = ()) -> CommandRoute | None:
        """The command a message on ``topic`` carries, or ``None`` if it is not a command topic.

        A broker that delivers a ``.`` in a topic as ``/`` (RabbitMQ's MQTT plugin, which maps
        topics onto AMQP routing keys: ``tts/kiosk.1/cmd/ping`` arrives as
        ``tts/kiosk/1/cmd/ping``) is understood too: a filter with a dot in its device id or
        group is tried again with its dots as slashes. Only a message on one of our own
        subscriptions gets here, so no other broker delivers such a topic to this device.
        """
        scopes = self._scopes(groups)
        for topic_filter, scope, group in scopes:
            captured = topic_filter.captures(topic)
            if captured is not None:
                return CommandRoute(captured[0], scope, group)
        for topic_filter, scope, group in scopes:
            if "." in topic_filter.value:
                captured = TopicFilter(topic_filter.value.replace(".", "/")).captures(topic)
                if captured is not None:
                    return CommandRoute(captured[0], scope, group)
        return None

    def route_refused(self, topic: str, groups: tuple[str, ...] = ()) -> CommandRoute | None:
        """Like :meth:`route`, for a topic :class:`Topic` refused (longer than
        :data:`MAX_TOPIC_BYTES`: a command name that long): the route of its command topic, so
        its sender can be answered, or ``None`` if it is not one of this device's."""
        for topic_filter, scope, group in self._scopes(groups):
            if topic_matches_sub(topic_filter.value, topic):
                return CommandRoute(topic.rsplit("/", 1)[-1], scope, group)
        return None

    def reply_allowed(self, topic: Topic) -> bool:
        """Whether a command's MQTT 5 Response Topic may be published to.

        Under the prefix the agent publishes only to its own topics: of those a reply may go
        to the reply space ``{prefix}/reply/...`` (no device lives there: ``reply`` is a
        reserved device id) and to this device's own events topic. Everything else under the
        prefix is refused (other devices' topics, groups, the fleet, this device's retained
        ``status`` and ``health``, any command topic), and so are ``$``-topics and
        ``hermes/...``. Topics outside the prefix are the controller's own business.
        """
        if topic.value.startswith("$") or TopicFilter("hermes/#").matches(topic):
            return False
        if not self.namespace.space().matches(topic):
            return True
        return topic == self.events or self.namespace.reply_space().matches(topic)


def group_object_id(group: str) -> str:
    """A group's discovery object id: ``tts-agent-group-{group}``; a group with characters Home
    Assistant refuses there (only ``[A-Za-z0-9_-]``) has them as ``_`` and a hash of its name
    appended, so two groups never share one entity."""
    import hashlib

    _level(group, "group")
    safe = "".join(c if c.isascii() and (c.isalnum() or c in "_-") else "_" for c in group)
    if safe != group:
        safe += "-" + hashlib.sha256(group.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"tts-agent-group-{safe}"


@dataclass(frozen=True, slots=True)
class DiscoveryTopics:
    """Home Assistant's MQTT discovery topics for one device, under Home Assistant's prefix.

    Home Assistant allows only ``[A-Za-z0-9_-]`` in a discovery topic's node id, so the device
    id's dots become underscores there (:attr:`node_id`).
    """

    prefix: str
    device_id: str

    def __post_init__(self) -> None:
        Namespace(self.prefix)  # the same prefix rules as the agent's own
        _level(self.device_id, "device id")

    @property
    def node_id(self) -> str:
        return "".join(c if c.isascii() and (c.isalnum() or c in "_-") else "_"
                       for c in self.device_id)

    @property
    def config(self) -> Topic:
        """The device's one discovery message (retained)."""
        return Topic(self.prefix).child("device", self.node_id, "config")

    def group_config(self, group: str) -> Topic:
        """A group's notify entity (retained), the same topic from every member."""
        return Topic(self.prefix).child("notify", group_object_id(group), "config")

    @property
    def birth(self) -> Topic:
        """Home Assistant's status: ``online`` when it (re)starts, ``offline`` when it stops."""
        return Topic(self.prefix).child("status")
