"""The daemon's composition root: builds the parts, wires them, starts and stops them in order.

Data flows one way::

    MQTT network thread --Intake--> intake queue --Dispatcher--> job queue --SynthesisWorker-->
    PlayItem --AudioPlayer--> ALSA            events <--RequestTracker <-- player / worker

Threads: ``mqtt-network`` (paho; parse and hand on only), ``dispatch`` (commands),
``synthesis`` (onnxruntime), the player thread (ALSA), and the main thread, which waits for
SIGTERM/SIGINT in :func:`run_until_signal`. Presence is retained on ``{prefix}/{device}/status``:
``online`` on every connect, ``offline`` as the Last Will, ``stopped`` on a clean shutdown.
"""

from __future__ import annotations

import queue
import signal
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agent import __version__
from agent.audio.player import AudioPlayer
from agent.hardware import ProfileError, resolve_profile
from agent.logs import get_logger
from agent.model_watch import ModelWatcher
from agent.mqtt.client import MqttClient, OutboundMessage, Publication
from agent.mqtt.dispatch import Dispatcher, ReloadError
from agent.mqtt.intake import Intake, Request
from agent.mqtt.protocol import (
    ModelEvent,
    PingStatus,
    Presence,
    ReloadCommand,
    new_request_id,
    to_payload,
)
from agent.mqtt.publisher import EventPublisher
from agent.mqtt.speech import JobQueue, SynthesisWorker
from agent.mqtt.topics import Namespace
from agent.mqtt.tracker import RequestTracker
from agent.settings import Settings
from agent.voice import VoiceLoadError
from agent.voices import VoiceLibrary, VoiceNotFound

if TYPE_CHECKING:
    from agent.audio.item import PlaybackEvent

__all__ = ["SHUTDOWN_GRACE_S", "AgentService", "run_until_signal"]

log = get_logger(__name__)

SHUTDOWN_GRACE_S = 5.0
"""How long a shutdown lets the current utterance finish before cutting it (s)."""
_JOIN_S = 5.0


class _Offline:
    """Publisher used when MQTT is disabled: events only go to the log."""

    def publish(self, message: OutboundMessage) -> Publication:
        log.debug("event_not_published", topic=message.topic.value)
        acked = threading.Event()
        acked.set()
        return Publication(None, acked)


def _hardware_profile(settings: Settings) -> Any:
    """The effective hardware profile, or None when it cannot be resolved (logged)."""
    try:
        return resolve_profile(settings)
    except (ProfileError, OSError) as exc:
        log.warning("hardware_profile_unavailable", error=str(exc))
        return None


class AgentService:
    """The running agent. :meth:`start` and :meth:`stop` from the main thread.

    ``voices`` and ``player`` may be given (tests, benchmarks); by default they are built from
    ``settings`` (voices with the hardware profile's onnxruntime options).
    """

    def __init__(self, settings: Settings, *, voices: VoiceLibrary | None = None,
                 player: AudioPlayer | None = None) -> None:
        self.settings = settings
        mqtt = settings.mqtt
        self.started_at = time.monotonic()
        self.topics = Namespace(mqtt.topic_prefix).device(settings.device_id)
        self.site_id = mqtt.site_id or settings.device_id
        self.volume = settings.audio.volume
        self.stopping = threading.Event()
        self.profile_name: str | None = settings.profile
        if voices is None:
            profile = _hardware_profile(settings)
            if profile is not None:
                self.profile_name = profile.name
            voices = VoiceLibrary(
                settings,
                runtime=profile.runtime_options() if profile is not None else None,
                variant=profile.runtime.model_variant if profile is not None else None,
                on_event=self._on_model_event,
            )
        else:
            voices.on_event = self._on_model_event
        self.voices = voices
        self.watcher: ModelWatcher | None = None
        if settings.models.watch:
            self.watcher = ModelWatcher(voices, debounce_s=settings.models.debounce_s,
                                        polling=settings.models.watch_polling)
        self.reload_handler: Callable[[ReloadCommand], list[str]] = self._reload
        """What the ``reload`` command runs; the model lifecycle replaces it."""

        self.client: MqttClient | None = None
        if mqtt.enabled:
            self.client = MqttClient(
                mqtt, mqtt.client_id or f"tts-agent-{settings.device_id}",
                subscriptions=Intake.subscriptions(self.topics, tuple(mqtt.groups), mqtt.hermes),
                on_message=self._on_message,
                on_connected=self._on_connected,
                will=OutboundMessage(self.topics.status, to_payload(self._presence("offline")),
                                     retain=True),
            )
        self.publisher = EventPublisher(self.client or _Offline(), self.topics)
        self.tracker = RequestTracker(self.publisher)
        self.requests: queue.Queue[Request] = queue.Queue(maxsize=mqtt.intake_queue)
        self.intake = Intake(
            topics=self.topics, groups=tuple(mqtt.groups), tracker=self.tracker,
            requests=self.requests, max_payload_bytes=mqtt.max_payload_bytes,
            max_text_chars=settings.synthesis.max_text_chars,
            hermes_site_id=self.site_id if mqtt.hermes else None,
        )
        self.player = player or AudioPlayer(settings.audio, self._on_playback)
        self.jobs = JobQueue(mqtt.intake_queue)
        self.worker = SynthesisWorker(self.jobs, self.voices, self.player, self.tracker,
                                      item_buffer_s=settings.audio.item_buffer_s)
        self.dispatcher = Dispatcher(
            self.requests, self.jobs, self.tracker, self.player,
            voice_names=self.voices.names, default_voice=settings.models.default_voice,
            status=self.ping_status, reload=self._run_reload,
            on_volume=self._set_volume,
        )

    # -- lifecycle (main thread) ----------------------------------------------------------

    def start(self) -> None:
        """Warm the default voice, start the player and workers, then connect."""
        mqtt = self.settings.mqtt
        log.info("agent_starting", device=self.settings.device_id, version=__version__,
                 broker=f"{mqtt.host}:{mqtt.port}" if mqtt.enabled else None, tls=mqtt.tls,
                 protocol=mqtt.protocol, profile=self.profile_name)
        try:
            voice = self.voices.get(None)
            log.info("default_voice_ready", voice=voice.name, version=voice.version)
        except (VoiceNotFound, VoiceLoadError) as exc:
            log.error("default_voice_unavailable", error=str(exc))
        self.player.start()
        self.worker.start()
        self.dispatcher.start()
        if self.watcher is not None:
            self.watcher.start()
        if self.client is not None:
            self.client.start()
        else:
            log.warning("mqtt_disabled", hint="no commands can reach the agent")

    def stop(self, grace_s: float = SHUTDOWN_GRACE_S) -> None:
        """Refuse new work, let the current utterance finish (up to ``grace_s``), publish
        ``stopped``, disconnect. Every open request gets its final event."""
        if self.stopping.is_set():
            return
        self.stopping.set()
        log.info("agent_stopping", pending=self.tracker.pending())
        self.intake.close()
        self.dispatcher.stop(_JOIN_S)
        for request in self.dispatcher.drain():
            self.tracker.answer(request.id, request.name, "rejected",
                                reason="agent is shutting down", reply=request.reply,
                                hermes=request.hermes)
        for job in self.jobs.take_all():
            self.tracker.finish(job.request_id, "interrupted", reason="agent stopping")
        if not self.tracker.wait_idle(grace_s):
            log.info("cutting_current_utterance", grace_s=grace_s)
        self.player.close(_JOIN_S)  # cuts what still plays: those requests end "interrupted"
        self.worker.stop(_JOIN_S)
        if self.watcher is not None:
            self.watcher.stop(_JOIN_S)
        for request_id in self.tracker.open_ids():
            self.tracker.finish(request_id, "interrupted", reason="agent stopping")
        if self.client is not None:
            self.client.close(_JOIN_S, final=self.publisher.presence_message(
                self._presence("stopped")))
        log.info("agent_stopped", served=self.tracker.served, failed=self.tracker.failed)

    # -- callbacks ------------------------------------------------------------------------

    def _on_message(self, message: Any) -> None:
        """MQTT network thread."""
        self.intake.on_message(message)

    def _on_connected(self, session_present: bool) -> None:
        """MQTT network thread, after every successful connect: retained ``online``."""
        self.publisher.presence(self._presence("online"))

    def _on_playback(self, event: PlaybackEvent) -> None:
        """Player thread: playback progress becomes request events."""
        if event.kind == "started":
            self.tracker.progress(event.request_id, "started")
        else:
            self.tracker.finish(event.request_id, event.kind, reason=event.reason,
                                audio_s=round(event.audio_seconds, 3))

    def _on_model_event(self, event: dict[str, Any]) -> None:
        """Voice library (model watcher or dispatch thread): model_loaded / model_rejected."""
        self.publisher.event(ModelEvent(id=new_request_id(), device=self.settings.device_id,
                                        **event))

    def _set_volume(self, volume: float) -> None:
        """Dispatch thread."""
        self.volume = volume

    # -- answers --------------------------------------------------------------------------

    def _presence(self, state: str) -> Presence:
        if state == "offline":
            return Presence(state="offline", device=self.settings.device_id)
        return Presence(
            state=state,  # type: ignore[arg-type]
            device=self.settings.device_id, version=__version__, voices=self.voices.names(),
            default_voice=self.settings.models.default_voice, profile=self.profile_name,
            site_id=self.site_id if self.settings.mqtt.hermes else None, ts=time.time(),
        )

    def ping_status(self) -> PingStatus:
        """The small status ``ping`` answers with (dispatch thread)."""
        return PingStatus(
            state="stopping" if self.stopping.is_set() else "online",
            version=__version__,
            uptime_s=round(time.monotonic() - self.started_at, 3),
            voices=self.voices.names(),
            default_voice=self.settings.models.default_voice,
            pending=self.tracker.pending(),
            volume=self.volume,
            mqtt_reconnects=self.client.reconnects if self.client is not None else 0,
        )

    def _run_reload(self, command: ReloadCommand) -> list[str]:
        return self.reload_handler(command)

    def _reload(self, command: ReloadCommand) -> list[str]:
        """Re-check the models directory now, or switch a staged voice to ``version``
        (dispatch thread). Raises :class:`ReloadError` when a voice was rejected."""
        if command.voice is not None and command.voice not in self.voices.names():
            raise ReloadError(f"no voice named {command.voice!r} is installed")
        try:
            if command.version is not None:
                results = [self.voices.activate(command.voice or self.settings.models.default_voice,
                                                command.version)]
            else:
                results = self.voices.reload(command.voice)
        except VoiceNotFound as exc:
            raise ReloadError(str(exc)) from exc
        rejected = [r for r in results if r.outcome == "rejected"]
        if rejected:
            raise ReloadError("; ".join(f"{r.voice}: {r.reason}" for r in rejected))
        return self.voices.names()


def run_until_signal(service: AgentService) -> int:
    """Start ``service``, wait for SIGTERM or SIGINT, stop it gracefully; exit status 0."""
    stop = threading.Event()

    def request_stop(signum: int, frame: object) -> None:
        log.info("signal_received", signal=signal.Signals(signum).name)
        stop.set()

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        service.start()
        stop.wait()
    finally:
        service.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
