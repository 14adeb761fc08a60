"""The Wyoming server as one of the daemon's add-ons (:mod:`agent.daemon.addons`).

:func:`build` returns None while ``wyoming.uri`` is unset, so a daemon without it never imports
the ``wyoming`` library. Otherwise the add-on serves from the service's voice library and phrase
cache, counts every request in the health report's request window, and adds the report's
``wyoming`` section (:meth:`agent.wyoming.server.WyomingServer.stats`); a failure to listen is
that section's ``reason`` (state ``degraded``), never a failed start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent.daemon.service import AgentService
    from agent.wyoming.server import WyomingServer

__all__ = ["WyomingAddon", "build"]


class WyomingAddon:
    """Starts and stops a :class:`~agent.wyoming.server.WyomingServer`."""

    name = "wyoming"

    def __init__(self, server: WyomingServer) -> None:
        self.server = server

    def start(self) -> None:
        self.server.start()

    def stop(self, timeout: float) -> None:
        self.server.stop(timeout)

    def on_connected(self) -> None:
        """Nothing to do on an MQTT connect."""


def build(service: AgentService) -> WyomingAddon | None:
    """The add-on for ``service``, or None when ``wyoming.uri`` is unset."""
    settings = service.settings.wyoming
    if settings.uri is None:
        return None
    from agent.library.languages import SpeechCheck
    from agent.wyoming.catalog import Catalog
    from agent.wyoming.server import WyomingServer

    server = WyomingServer(settings, Catalog(service.voices), service.phrase_cache,
                           on_outcome=service.health.record_request,
                           check=SpeechCheck.for_settings(service.settings),
                           device_id=service.settings.device_id)
    service.health.add_provider("wyoming", server.stats)
    return WyomingAddon(server)
