"""Optional parts of the daemon that run beside the core (lexicon watcher, Wyoming server,
Home Assistant discovery): one seam so that each wires itself in without growing
:mod:`agent.daemon.service`.

An add-on is built by a factory, ``build(context) -> Addon | None``, in the feature's own module:
``context`` is a protocol of that module naming only what it reads of the daemon (never the
service class), and ``None`` means its settings switch it off. To add one, list its factory in
:data:`FACTORIES` and its context in :class:`AddonContext`. Life cycle:
docs/internals.md#add-ons.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from agent.library.lexicon import LexiconContext
from agent.library.lexicon import build as lexicon_addon
from agent.logs import get_logger
from agent.mqtt.ha_addon import HaContext
from agent.mqtt.ha_addon import build as ha_discovery_addon
from agent.wyoming.addon import WyomingContext
from agent.wyoming.addon import build as wyoming_addon

__all__ = ["FACTORIES", "Addon", "AddonContext", "AddonSet"]

log = get_logger(__name__)


class Addon(Protocol):
    """What the service needs of an add-on."""

    name: str

    def start(self) -> None: ...

    def stop(self, timeout: float) -> None: ...

    def on_connected(self) -> None:
        """MQTT network thread, after every successful connect (must not block)."""
        ...


class AddonContext(LexiconContext, WyomingContext, HaContext, Protocol):
    """Everything the add-ons read of the daemon: the union of their own contexts, which
    :class:`agent.daemon.service.AgentService` satisfies structurally."""


Factory = Callable[[AddonContext], "Addon | None"]

FACTORIES: list[Factory] = [lexicon_addon, wyoming_addon, ha_discovery_addon]
"""Every add-on's factory, in start order."""


class AddonSet:
    """The add-ons a service runs (built once, in :data:`FACTORIES` order)."""

    def __init__(self, context: AddonContext, factories: Sequence[Factory] = ()) -> None:
        self.running: list[Addon] = []
        self.addons: list[Addon] = []
        for factory in factories or FACTORIES:
            addon = factory(context)
            if addon is not None:
                self.addons.append(addon)

    def start(self) -> None:
        for addon in self.addons:
            try:
                addon.start()
            except Exception as exc:  # an optional part never stops the agent
                log.error("addon_start_failed", addon=addon.name, error=str(exc))
                continue
            self.running.append(addon)

    def stop(self, timeout: float) -> None:
        for addon in reversed(self.running):
            try:
                addon.stop(timeout)
            except Exception as exc:
                log.error("addon_stop_failed", addon=addon.name, error=str(exc))
        self.running.clear()

    def on_connected(self) -> None:
        for addon in self.running:
            try:
                addon.on_connected()
            except Exception as exc:
                log.error("addon_connect_hook_failed", addon=addon.name, error=str(exc))

    def on_reload(self) -> None:
        """After a SIGHUP re-read the settings: each add-on with an ``on_reload()`` applies
        what it can of them (reload thread)."""
        for addon in self.running:
            hook = getattr(addon, "on_reload", None)
            try:
                if callable(hook):
                    hook()
            except Exception as exc:
                log.error("addon_reload_failed", addon=addon.name, error=str(exc))

    def get(self, name: str) -> Addon | None:
        """The running add-on called ``name`` (tests, health)."""
        return next((a for a in self.running if a.name == name), None)
