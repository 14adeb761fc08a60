"""The Wyoming server as one of the daemon's add-ons (:mod:`agent.daemon.addons`).

:func:`build` returns None while ``wyoming.uri`` is unset, so a daemon without it never imports
the ``wyoming`` library. Otherwise the add-on serves from the service's voice library and phrase
cache, counts every request in the health report's request window, and adds the report's
``wyoming`` section (:meth:`agent.wyoming.server.WyomingServer.stats`); a failure to listen is
that section's ``reason`` (state ``degraded``), never a failed start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from agent.health.snapshot import Health
    from agent.library.voices import VoiceLibrary
    from agent.pipeline.phrase_cache import PhraseCache
    from agent.settings import Settings
    from agent.wyoming.server import WyomingServer

__all__ = ["WyomingAddon", "WyomingContext", "build"]


class WyomingContext(Protocol):
    """What the ``wyoming`` add-on reads of the daemon that builds it (:func:`build`)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def voices(self) -> VoiceLibrary: ...

    @property
    def phrase_cache(self) -> PhraseCache | None: ...

    @property
    def health(self) -> Health:
        """Where requests are counted and the ``wyoming`` section is added."""
        ...


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


def build(context: WyomingContext) -> WyomingAddon | None:
    """The add-on, or None when ``wyoming.uri`` is unset."""
    settings = context.settings.wyoming
    if settings.uri is None:
        return None
    from agent.library.languages import SpeechCheck
    from agent.wyoming.catalog import Catalog
    from agent.wyoming.server import WyomingServer

    server = WyomingServer(settings, Catalog(context.voices), context.phrase_cache,
                           on_outcome=context.health.record_request,
                           check=SpeechCheck.for_settings(context.settings),
                           device_id=context.settings.device_id)
    context.health.add_provider("wyoming", server.stats)
    return WyomingAddon(server)
