"""Home Assistant MQTT discovery as an add-on of the daemon (:mod:`agent.daemon.addons`): the
retained discovery message published on every connect and Home Assistant birth, removed when
discovery is switched off (at start or a SIGHUP reload), and the notify entity's messages turned
into speak requests. Its own thread, ``ha-discovery``, publishes; the MQTT network thread only
checks and hands on. See docs/home-assistant.md#when-it-is-published-and-removed.
"""

from __future__ import annotations

import contextlib
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from agent import __version__, jsonbound
from agent.fsutil import atomic_write, open_regular
from agent.logs import get_logger
from agent.mqtt.client import InboundMessage, MqttClient, OutboundMessage
from agent.mqtt.ha_discovery import (
    DiscoveryInfo,
    discovery_payload,
    group_payload,
    notify_request,
)
from agent.mqtt.protocol import CommandRejected, salvage_id
from agent.mqtt.topics import DeviceTopics, DiscoveryTopics, Topic, TopicError
from agent.settings.paths import device_state_dir

if TYPE_CHECKING:
    from collections.abc import Callable

    from agent.hardware.effective import EffectiveProfile
    from agent.mqtt.intake import Intake
    from agent.mqtt.publisher import ReplyRoute
    from agent.settings import MqttSettings, Settings

__all__ = ["MARKER_NAME", "MIN_INTERVAL_S", "HaContext", "HaDiscovery", "HaOptions", "build",
           "discovery_info", "marker_path", "published_topic"]

log = get_logger(__name__)

MIN_INTERVAL_S = 1.0
"""Shortest time between two publications of the discovery message (s)."""
MAX_BIRTH_BYTES = 64
"""A birth message longer than this is not Home Assistant's and is ignored."""
MARKER_NAME = "ha-discovery.json"
_MARKER_MAX_BYTES = 4096
_ACK_S = 5.0
_JOIN_S = 5.0


class HaContext(Protocol):
    """What the ``ha_discovery`` add-on reads of the daemon that builds it (:func:`build`)."""

    @property
    def settings(self) -> Settings:
        """Read again after a SIGHUP reload (:meth:`HaDiscovery.on_reload`)."""
        ...

    @property
    def client(self) -> MqttClient | None: ...

    @property
    def intake(self) -> Intake: ...

    @property
    def topics(self) -> DeviceTopics: ...

    @property
    def profile(self) -> EffectiveProfile | None:
        """The hardware profile in force (the device's ``hw_version`` in discovery)."""
        ...


@dataclass(frozen=True, slots=True)
class HaOptions:
    """The ``mqtt.ha_*`` settings (the part a SIGHUP reload may change)."""

    enabled: bool
    prefix: str
    name: str | None
    priority: str
    group_lead_s: float

    @classmethod
    def of(cls, mqtt: MqttSettings) -> HaOptions:
        return cls(mqtt.ha_discovery, mqtt.ha_prefix, mqtt.ha_device_name, mqtt.ha_priority,
                   mqtt.ha_group_lead_s)


def marker_path(settings: Settings) -> Path:
    """Where this device remembers the discovery topic it published to: beside its own request
    journal, so agents side by side on one ``cache.dir`` never remove each other's message."""
    return device_state_dir(settings.cache.dir, settings.device_id) / MARKER_NAME


def published_topic(marker: Path) -> Topic | None:
    """The discovery topic the marker file says this agent published to, if it is readable and
    has a discovery config topic's shape (``.../device/<node>/config``)."""
    try:
        with open_regular(marker) as handle:  # never waits on a FIFO or follows a link
            data = jsonbound.loads(handle.read(_MARKER_MAX_BYTES), max_bytes=_MARKER_MAX_BYTES)
        value = data["topic"] if isinstance(data, dict) else None
        topic = Topic(value if isinstance(value, str) else "")
    except (OSError, ValueError, KeyError, TypeError, TopicError):
        return None
    levels = topic.value.split("/")
    if len(levels) < 4 or levels[-3] != "device" or levels[-1] != "config":
        return None
    return topic


class HaDiscovery:
    """The add-on. See the module docstring."""

    name = "ha_discovery"

    def __init__(self, *, client: MqttClient, intake: Intake, topics: DeviceTopics,
                 info: DiscoveryInfo, marker: Path, settings: Callable[[], Settings]) -> None:
        self.client = client
        self.intake = intake
        self.topics = topics
        self.info = info
        self.marker = marker
        self._settings = settings
        self.options = HaOptions.of(settings().mqtt)
        self.published = 0
        """Discovery messages published (tests, health)."""
        self._followed: set[str] = set()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if self.options.enabled:
            self._follow(self.options.prefix)

    def _follow(self, prefix: str) -> None:
        """Subscribe to Home Assistant's birth topic under ``prefix`` and the notify topic."""
        if prefix in self._followed:
            return
        birth = DiscoveryTopics(prefix, self.topics.device_id).birth
        self.intake.listen(birth, self._on_birth)
        self.intake.listen(self.topics.ha_notify, self._on_notify)
        self.client.add_subscriptions([birth.as_filter(), self.topics.ha_notify.as_filter()])
        self._followed.add(prefix)

    # -- add-on life cycle (main thread) ----------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="ha-discovery", daemon=True)
        self._thread.start()
        self._wake.set()  # the client may have connected before this add-on started

    def stop(self, timeout: float) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def on_reload(self) -> None:
        """Reload thread, after a SIGHUP re-read the settings: apply changed ``mqtt.ha_*``."""
        options = HaOptions.of(self._settings().mqtt)
        if options == self.options:
            return
        if options.enabled:
            self._follow(options.prefix)
        self.options = options
        log.info("ha_discovery_settings_applied", enabled=options.enabled, prefix=options.prefix)
        self._wake.set()

    # -- MQTT network thread ----------------------------------------------------------------

    def on_connected(self) -> None:
        self._wake.set()

    def _on_birth(self, message: InboundMessage) -> None:
        options = self.options
        if not options.enabled or message.topic != DiscoveryTopics(
                options.prefix, self.topics.device_id).birth:
            return
        if len(message.payload) <= MAX_BIRTH_BYTES and message.payload.strip() == b"online":
            log.info("ha_birth_seen", topic=message.topic.value)
            self._wake.set()

    def _on_notify(self, message: InboundMessage) -> None:
        """Answered like a command: on the events topic and the Response Topic, if any."""
        options, settings = self.options, self._settings()
        reply: ReplyRoute | None = None
        try:
            reply = self.intake.reply_route(message)  # the command topics' rules
            if not options.enabled:  # switched off at a reload: still answered, never lost
                raise CommandRejected(
                    "Home Assistant discovery is off on this device (mqtt.ha_discovery)",
                    command="speak")
            request = notify_request(message, priority=options.priority, reply=reply,
                                     max_payload_bytes=settings.mqtt.max_payload_bytes,
                                     max_text_chars=settings.synthesis.max_text_chars)
        except CommandRejected as exc:
            if exc.request_id is None:
                exc.request_id = salvage_id(message.payload,
                                            max_bytes=settings.mqtt.max_payload_bytes)
            self.intake.refuse(exc, "speak", reply)
            return
        self.intake.submit(request)

    # -- ha-discovery thread ----------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait()
            if self._stop.is_set():
                break
            self._wake.clear()
            try:
                self._sync()
            except Exception as exc:  # keep serving births after a broken marker or the like
                log.error("ha_discovery_failed", error=str(exc))
            self._stop.wait(MIN_INTERVAL_S)

    def _sync(self) -> None:
        """Make the broker hold what the options say: this device's message, or none."""
        if not self.client.connected:
            return  # the next connect wakes this thread again
        options = self.options
        target = (DiscoveryTopics(options.prefix, self.topics.device_id).config
                  if options.enabled else None)
        before = published_topic(self.marker)
        if before is not None and before != target and self._remove(before):
            with contextlib.suppress(FileNotFoundError):
                self.marker.unlink()
            log.info("ha_discovery_removed", topic=before.value)
        if target is None:
            return
        self.info.name = options.name or self.info.device_id
        payload = discovery_payload(self.info, self.topics)
        self.marker.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.marker, json.dumps({"topic": target.value}).encode() + b"\n")
        self.client.publish(OutboundMessage(target, payload, retain=True))
        self.published += 1
        log.info("ha_discovery_published", topic=target.value, bytes=len(payload))
        self._publish_groups(options)

    def _publish_groups(self, options: HaOptions) -> None:
        """Each followed group's shared notify entity (never removed here: other members
        may still serve it; ``tts-agent ha-discovery --remove --group G`` clears one)."""
        discovery = DiscoveryTopics(options.prefix, self.topics.device_id)
        for group in self.intake.groups:
            payload = group_payload(self.topics.namespace, group, lead_s=options.group_lead_s,
                                    priority=options.priority)
            topic = discovery.group_config(group)
            self.client.publish(OutboundMessage(topic, payload, retain=True))
            log.info("ha_group_discovery_published", topic=topic.value, group=group)

    def _remove(self, topic: Topic) -> bool:
        """Publish the empty retained message that removes a discovery message; True once the
        broker has it."""
        publication = self.client.publish(OutboundMessage(topic, b"", retain=True))
        return not publication.dropped and publication.wait(_ACK_S)


def discovery_info(settings: Settings, profile: EffectiveProfile | None) -> DiscoveryInfo:
    """What the discovery message says of this device: the one builder for the agent and for
    ``tts-agent ha-discovery`` (``hw_version``: the board and the hardware profile in force)."""
    hardware = None
    if profile is not None:
        board = (profile.hardware.device_tree_model or profile.hardware.cpu_model
                 or profile.hardware.arch)
        hardware = f"{board} (profile {profile.name})"
    return DiscoveryInfo(device_id=settings.device_id, name=settings.mqtt.ha_device_name,
                         version=__version__, hardware=hardware)


def build(context: HaContext) -> HaDiscovery | None:
    """The add-on (:data:`agent.daemon.addons.FACTORIES`), whenever MQTT is on: switched off it
    still removes a discovery message published before."""
    if context.client is None:
        return None
    settings = context.settings
    info = discovery_info(settings, context.profile)
    return HaDiscovery(client=context.client, intake=context.intake, topics=context.topics,
                       info=info, marker=marker_path(settings),
                       settings=lambda: context.settings)
