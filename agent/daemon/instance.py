"""Another agent using this device id: each process makes a random instance id at start and puts
it in its presence and answers; the agent reads its own retained status topic, and a presence
``online`` with another instance id is a conflict (health ``failing``, one log line per
episode) until that instance's presence says ``offline`` or ``stopped`` (its clean stop or its
Last Will), when the survivor announces itself ``online`` again.
Design: docs/operations.md#device-id-conflict.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from agent import jsonbound
from agent.logs import get_logger

if TYPE_CHECKING:
    from agent.health.report import InstanceSection
    from agent.mqtt.client import InboundMessage

__all__ = ["InstanceWatch", "new_instance_id"]

log = get_logger(__name__)

_MAX_PRESENCE_BYTES = 64 * 1024
"""A presence is a few hundred bytes; a larger one is not read."""
_MAX_ID_CHARS = 64


def new_instance_id() -> str:
    """A random id for this process (8 hex characters)."""
    return secrets.token_hex(4)


class InstanceWatch:
    """Notices another instance online with this device id (see the module docstring).

    ``on_change`` runs (network thread) when a conflict starts or ends (a fresh health report);
    ``announce`` when the other instance went away (publish our own presence again)."""

    def __init__(self, device_id: str, instance_id: str | None = None, *,
                 on_change: Callable[[], None] = lambda: None,
                 announce: Callable[[], None] = lambda: None) -> None:
        self.device_id = device_id
        self.id = instance_id or new_instance_id()
        self.on_change = on_change
        self.announce = announce
        self._lock = threading.Lock()
        self._others: set[str] = set()
        self.episodes = 0
        """Conflicts seen since start."""

    @property
    def others(self) -> list[str]:
        """The other instances online with this device id now."""
        with self._lock:
            return sorted(self._others)

    def on_presence(self, message: InboundMessage) -> None:
        """Network thread: a message on this device's status topic."""
        try:
            data = jsonbound.loads(message.payload, max_bytes=_MAX_PRESENCE_BYTES)
        except jsonbound.JsonError:
            return
        if not isinstance(data, dict):
            return
        other, state = data.get("instance"), data.get("state")
        if not isinstance(other, str) or not other or other == self.id:
            return
        other = other[:_MAX_ID_CHARS]
        with self._lock:
            before = bool(self._others)
            if state == "online":
                self._others.add(other)
            elif state in ("offline", "stopped"):
                self._others.discard(other)
            after, others = bool(self._others), sorted(self._others)
        if state in ("offline", "stopped"):
            self.announce()  # the retained status must name the instance still running
        if before == after:
            return
        if after:
            self.episodes += 1
            log.error("device_id_conflict", device=self.device_id, instance=self.id,
                      others=others, reason=self.reason())
        else:
            log.warning("device_id_conflict_ended", device=self.device_id, instance=self.id)
        self.on_change()

    def reason(self) -> str | None:
        """Why health is failing, or None."""
        others = self.others
        if not others:
            return None
        return (f"another agent instance (id {', '.join(others)}) is using device id "
                f"{self.device_id}")

    def section(self) -> InstanceSection:
        """The health report's ``instance`` section."""
        reason = self.reason()
        return {"id": self.id, "others": self.others, "conflicts": self.episodes,
                "state": "failing" if reason else "ok", "reason": reason}
