"""The daemon's health wiring: one report section per running part, and the workers watched.

:func:`add_sections` registers the report's sections (their shapes: :mod:`agent.health.report`)
with the :class:`~agent.health.snapshot.Health` snapshot; :func:`watch_workers` names the
workers the systemd watchdog follows. Section functions run on the thread that takes a
snapshot and only read. The design: docs/internals.md#health-wiring.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, cast

if TYPE_CHECKING:

    from agent.audio.player import AudioPlayer
    from agent.hardware.effective import EffectiveProfile
    from agent.health.clock import PingClock
    from agent.health.liveness import Liveness
    from agent.health.report import (
        AudioSection,
        HardwareSection,
        JournalSection,
        MqttSection,
        PhraseCacheSection,
        QueueSection,
        SyncSection,
    )
    from agent.health.snapshot import Health
    from agent.library.voices import VoiceLibrary
    from agent.mqtt.client import MqttClient
    from agent.mqtt.journal import RequestJournal
    from agent.mqtt.tracker import RequestTracker
    from agent.pipeline.buffering import Buffering
    from agent.pipeline.phrase_cache import PhraseCache
    from agent.settings import MqttSettings, Settings

__all__ = ["MIN_BEAT_TIMEOUT_S", "ServiceParts", "add_sections", "journal_section",
           "watch_workers"]

MIN_BEAT_TIMEOUT_S = 5.0
"""The synthesis and MQTT loops turn at least every 0.5 s; one that has not turned for
``max(health.stall_s, MIN_BEAT_TIMEOUT_S)`` while idle counts as hung."""
_PROFILE_DETAILS = ("candidates", "why", "origins")
"""Parts of the profile description left out of the report's ``hardware``
(``tts-agent profile`` shows them)."""


class _Waiting(Protocol):
    """The intake queue as the report sees it (:class:`agent.mqtt.intake.Inbox`)."""

    def qsize(self) -> int: ...


class _Bounded(Protocol):
    """A bounded queue as the report sees it (the speak job queue)."""

    @property
    def maxsize(self) -> int: ...

    def __len__(self) -> int: ...


class _Stepping(Protocol):
    """A worker that keeps its own liveness marks (the synthesis worker)."""

    @property
    def busy_since(self) -> float | None: ...

    @property
    def steps(self) -> int: ...

    @property
    def alive(self) -> bool: ...

    @property
    def buffering(self) -> Buffering: ...


class ServiceParts(Protocol):
    """What the sections read from the daemon (:class:`agent.daemon.service.AgentService`)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def voices(self) -> VoiceLibrary: ...

    @property
    def player(self) -> AudioPlayer: ...

    @property
    def worker(self) -> _Stepping: ...

    @property
    def client(self) -> MqttClient | None: ...

    @property
    def jobs(self) -> _Bounded: ...

    @property
    def tracker(self) -> RequestTracker: ...

    @property
    def requests(self) -> _Waiting: ...

    @property
    def journal(self) -> RequestJournal: ...

    @property
    def profile(self) -> EffectiveProfile | None: ...

    @property
    def profile_error(self) -> str | None: ...

    @property
    def phrase_cache(self) -> PhraseCache | None: ...

    @property
    def ping_clock(self) -> PingClock: ...


def voices_section(voices: VoiceLibrary) -> dict[str, Any]:
    """The voice library's status and the espeak-ng build its voices phonemize with."""
    from agent.text.espeak import describe

    return {**voices.status(), "espeak": describe()}


def add_sections(health: Health, parts: ServiceParts) -> None:
    """Register one provider per section of the report (from the daemon's constructor)."""
    settings = parts.settings
    health.add_provider("voices", partial(voices_section, parts.voices))
    health.add_provider("audio", partial(audio_section, parts.player, parts.worker))
    health.add_provider("mqtt", partial(mqtt_section, parts.client, settings.mqtt))
    health.add_provider("queue", partial(queue_section, parts))
    health.add_provider("journal", partial(journal_section, parts.journal))
    health.add_provider("hardware", partial(hardware_section, parts.profile, settings.profile,
                                            parts.profile_error))
    health.add_provider("phrase_cache", partial(phrase_cache_section, parts.phrase_cache))
    health.add_provider("sync", partial(sync_section, parts.player, health, settings,
                                        parts.ping_clock))
    lexicon_status = getattr(parts.voices.options.text.lexicon, "status", None)
    if callable(lexicon_status):  # agent.library.lexicon.LexiconHolder (text.lexicon set)
        health.add_provider("lexicon", lexicon_status)


def sync_section(player: AudioPlayer, health: Health, settings: Settings,
                 ping_clock: PingClock | None = None) -> SyncSection:
    """What a controller needs for a synchronized group speak (docs/fleet.md): the least lead
    this device asks for (:func:`agent.audio.sync_start.lead_ms`), the output latency it adds
    to ALSA's delay, what it does when late, the kernel's clock discipline and the last
    ping's bound on this clock less the controller's."""
    from agent.audio.sync_start import lead_ms
    from agent.health.clock import read_clock

    device = player.stats()["device"]
    buffer_s = None if device is None else device["buffer_frames"] / device["rate"]
    first = health.requests.snapshot()["first_audio_s"]
    audio = settings.audio
    return {"lead_ms": lead_ms(None if first is None else first["p95"], buffer_s,
                               audio.output_latency_ms),
            "output_latency_ms": audio.output_latency_ms, "late": audio.sync_late,
            "clock": read_clock(),
            "controller": None if ping_clock is None else ping_clock.report()}


def watch_workers(liveness: Liveness, parts: ServiceParts) -> None:
    """Watch the running workers for progress (once they run, so a long voice load is not
    mistaken for a silent loop)."""
    beat_s = max(parts.settings.health.stall_s, MIN_BEAT_TIMEOUT_S)
    worker, player, client = parts.worker, parts.player, parts.client
    liveness.watch("synthesis", busy_since=lambda: worker.busy_since,
                   alive=lambda: worker.alive, progress=lambda: worker.steps,
                   beat_timeout_s=beat_s)
    # The player waits without a timeout when idle: only its ALSA calls are timed.
    liveness.watch("audio", busy_since=lambda: player.stats()["busy_since"],
                   alive=lambda: bool(player.stats()["alive"]))
    if client is not None:
        liveness.watch("mqtt", busy_since=lambda: client.busy_since,
                       alive=lambda: client.alive, progress=lambda: client.turns,
                       beat_timeout_s=beat_s)


def audio_section(player: AudioPlayer, worker: _Stepping) -> AudioSection:
    """The player's stats (first ``pcm``, the PCM it opens) without their ``busy_since`` (a
    monotonic stamp; the worker's state is in ``workers``); then how the synthesis worker
    hands sentences to the player (``buffering``, :mod:`agent.pipeline.buffering`) and why."""
    section: dict[str, object] = dict(player.stats())
    section.pop("busy_since", None)  # a TypedDict cannot say "PlayerStats less one key"
    buffering = worker.buffering
    section.update(buffering=buffering.mode, buffering_reason=buffering.reason)
    return cast("AudioSection", section)


def mqtt_section(client: MqttClient | None, mqtt: MqttSettings) -> MqttSection:
    if client is None:
        return {"enabled": False, "connected": False}
    problem = client.monitor.problem  # a session taken over again and again
    return {"enabled": True, "connected": client.connected,
            "reconnects": client.reconnects, "last_error": client.last_error,
            "broker": f"{mqtt.host}:{mqtt.port}", "tls": mqtt.tls,
            "protocol": mqtt.protocol, "takeovers": client.monitor.watch.takeovers,
            "state": "degraded" if problem else "ok", "reason": problem}


def queue_section(parts: ServiceParts) -> QueueSection:
    return {"depth": len(parts.jobs), "max": parts.jobs.maxsize,
            "pending": parts.tracker.pending(), "intake": parts.requests.qsize()}


def journal_section(journal: RequestJournal) -> JournalSection:
    """The request journal: ``degraded`` while its file cannot be written (speak requests are
    then accepted with ``journaled: false``), the reason naming the path and the error."""
    problem = journal.problem
    return {"enabled": journal.enabled, "path": str(journal.path),
            "writable": journal.active, "requests": journal.count(),
            "unjournaled": journal.unjournaled, "refused": journal.refused,
            "state": "degraded" if problem else "ok", "reason": problem}


def hardware_section(profile: EffectiveProfile | None, setting: str | None,
                     error: str | None) -> HardwareSection:
    """The profile in force without its verbose parts, or why none could be resolved."""
    if profile is None:
        return {"ok": False, "profile": setting,
                "error": error or "hardware profile not resolved"}
    section: dict[str, Any] = dict(profile.as_dict())
    for verbose in _PROFILE_DETAILS:
        section.pop(verbose, None)
    # EffectiveProfile.as_dict() is an untyped dict; HardwareSection names its stable keys.
    return cast("HardwareSection", section)


def phrase_cache_section(cache: PhraseCache | None) -> PhraseCacheSection:
    if cache is None:
        return {"enabled": False}
    # PhraseCache.stats() is a dict[str, int]; PhraseCacheSection spells out its keys.
    return cast("PhraseCacheSection", {"enabled": True, **cache.stats()})
