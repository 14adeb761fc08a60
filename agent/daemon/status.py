"""What the running agent says about itself in one message: its retained presence and the
small status a ``ping`` answers with."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Protocol

from agent import __version__
from agent.mqtt.protocol import PingStatus, Presence

if TYPE_CHECKING:
    import threading

    from agent.daemon.instance import InstanceWatch
    from agent.health.snapshot import Health
    from agent.library.voices import VoiceLibrary
    from agent.mqtt.client import MqttClient
    from agent.mqtt.tracker import RequestTracker
    from agent.settings import Settings

__all__ = ["StatusContext", "ping_status", "presence"]


class StatusContext(Protocol):
    """What presence and ``ping`` read of the running daemon."""

    @property
    def settings(self) -> Settings: ...

    @property
    def voices(self) -> VoiceLibrary: ...

    @property
    def profile_name(self) -> str | None: ...

    @property
    def site_id(self) -> str: ...

    @property
    def stopping(self) -> threading.Event: ...

    @property
    def started_at(self) -> float:
        """``time.monotonic()`` at start."""
        ...

    @property
    def tracker(self) -> RequestTracker: ...

    @property
    def volume(self) -> float: ...

    @property
    def client(self) -> MqttClient | None: ...

    @property
    def health(self) -> Health: ...

    @property
    def instance(self) -> InstanceWatch:
        """This process's instance id and who else uses the device id."""
        ...


def presence(service: StatusContext, state: str) -> Presence:
    """The retained ``{prefix}/{device}/status`` message for ``state`` (online, stopped,
    offline: the Last Will, which carries only the device's groups)."""
    settings = service.settings
    groups = list(settings.mqtt.groups) or None
    if state == "offline":
        return Presence(state="offline", device=settings.device_id, groups=groups,
                        instance=service.instance.id)
    return Presence(
        state=state,  # type: ignore[arg-type]
        device=settings.device_id, version=__version__, voices=service.voices.names(),
        default_voice=settings.models.default_voice, profile=service.profile_name,
        site_id=service.site_id if settings.mqtt.hermes else None, groups=groups,
        health_interval_s=settings.health.interval_s, ts=time.time(),
        instance=service.instance.id,
    )


def ping_status(service: StatusContext) -> PingStatus:
    """The small status ``ping`` answers with (dispatch thread)."""
    return PingStatus(
        state="stopping" if service.stopping.is_set() else "online",
        version=__version__,
        uptime_s=round(time.monotonic() - service.started_at, 3),
        voices=service.voices.names(),
        default_voice=service.settings.models.default_voice,
        pending=service.tracker.pending(),
        volume=service.volume,
        mqtt_reconnects=service.client.reconnects if service.client is not None else 0,
        groups=list(service.settings.mqtt.groups),
        health=dict(service.health.compact()),
    )
