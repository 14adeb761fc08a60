"""The daemon's composition root: builds the parts, wires them, starts and stops them in order.

Data flows one way: MQTT network thread -> intake -> dispatcher -> job queue -> synthesis
worker -> player -> ALSA, and events back through the request tracker. systemd hears
``READY=1`` once the default voice is warm, ``RELOADING=1`` ... ``READY=1`` around a SIGHUP
reload and ``STOPPING=1`` on a stop; the health sections and watched workers are wired in
:mod:`agent.daemon.health`, the add-ons in :mod:`agent.daemon.addons`. Threads and presence:
docs/internals.md#the-daemon-threads-and-start-up.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agent import __version__
from agent.audio.chimes import Chimes
from agent.audio.player import AudioPlayer
from agent.daemon.addons import AddonSet
from agent.daemon.health import add_sections, watch_workers
from agent.daemon.instance import InstanceWatch
from agent.daemon.reload import SettingsCheck, reload_all, reload_command, reload_settings
from agent.daemon.state import DeviceState, claim_state
from agent.daemon.status import ping_status, presence
from agent.daemon.volume_state import VolumeStore
from agent.hardware.effective import profile_or_reason
from agent.health.clock import PingClock
from agent.health.liveness import Liveness, Watchdog
from agent.health.reporter import HealthReporter
from agent.health.sdnotify import Notifier
from agent.health.snapshot import Health, summary_line
from agent.library.languages import SpeechCheck
from agent.library.voices import VoiceLibrary, VoiceNotFound
from agent.library.watch import ModelWatcher
from agent.logs import get_logger
from agent.mqtt.client import MqttClient, OutboundMessage
from agent.mqtt.dispatch import Dispatcher
from agent.mqtt.intake import Inbox, Intake
from agent.mqtt.journal import RequestJournal
from agent.mqtt.protocol import PingCommand, PingStatus, Presence, to_payload
from agent.mqtt.publisher import EventPublisher, OfflinePublisher
from agent.mqtt.recovery import answer_journalled
from agent.mqtt.topics import Namespace
from agent.mqtt.tracker import RequestTracker
from agent.outcomes import Outcome, VoiceEvent, VoiceEventKind
from agent.pipeline.jobs import JobQueue
from agent.pipeline.phrase_cache import open_phrase_cache
from agent.pipeline.phrase_warm import PhraseWarmer
from agent.pipeline.worker import SynthesisWorker
from agent.settings import Settings, effective_audio
from agent.voice.onnx_session import pin_current_thread
from agent.voice.voice import VoiceLoadError

if TYPE_CHECKING:
    from agent.hardware.effective import EffectiveProfile
    from agent.health.report import HealthReport
    from agent.mqtt.protocol import ReloadCommand

__all__ = ["SHUTDOWN_GRACE_S", "AgentService"]

log = get_logger(__name__)

SHUTDOWN_GRACE_S = 5.0
"""How long a shutdown lets the current utterance finish before cutting it (s)."""
_JOIN_S = 5.0
_START_POLL_S = 0.2
"""While the default voice loads at start, how often a stop request is looked for (s)."""


class AgentService:
    """The running agent. :meth:`start`, :meth:`notify_ready`, :meth:`reload` and :meth:`stop`
    from the main thread.

    ``voices`` and ``player`` may be given (tests, benchmarks, and ``tts-agent run``, which
    starts loading the default voice before it imports this module); by default they are built
    from ``settings`` (voices with the hardware profile's onnxruntime options). ``profile`` is
    :func:`agent.hardware.effective.profile_or_reason`'s answer when the caller already has it.
    ``notifier`` talks to systemd; by default it is taken from ``$NOTIFY_SOCKET`` (and the
    variables are removed from the environment so that child processes cannot notify in our
    name). ``preloading``: the ``voices.preload()`` thread, which :meth:`start` waits for.
    ``state``: this device's state, claimed (:func:`agent.daemon.state.claim_state`) or claimed
    here; ``load_settings`` reads the settings file again: the ``reload`` command checks it.
    """

    def __init__(self, settings: Settings, *, voices: VoiceLibrary | None = None,
                 player: AudioPlayer | None = None, notifier: Notifier | None = None,
                 profile: tuple[EffectiveProfile | None, str | None] | None = None,
                 preloading: threading.Thread | None = None,
                 state: DeviceState | None = None,
                 load_settings: Callable[[], Settings] | None = None) -> None:
        self.state = state or claim_state(settings)  # raises StateInUse: another agent has it
        self.settings = settings
        self.settings_check = SettingsCheck(load_settings)
        self.preloading = preloading
        self.started_at = time.monotonic()
        self.topics = Namespace(settings.mqtt.topic_prefix).device(settings.device_id)
        self.site_id = settings.mqtt.site_id or settings.device_id
        self.volume_store = VolumeStore.for_settings(settings)
        self.volume = self.volume_store.restore()  # the one set over MQTT, or audio.volume
        self.stopping = threading.Event()
        self.stopped_cleanly: bool | None = None  # after stop(); False: a worker is stuck
        self.notifier = notifier if notifier is not None else Notifier.from_environ(unset=True)
        self.liveness = Liveness(settings.health.stall_s)
        self.profile: EffectiveProfile | None  # the profile in force, None if unresolved
        self.profile_error: str | None  # why not (health's ``hardware`` says it)
        self.profile, self.profile_error = profile or profile_or_reason(settings)
        self.health = Health(settings, liveness=self.liveness, thermal_limit_c=(
            self.profile.thermal.limit_c if self.profile is not None else None))
        self.profile_name: str | None = (self.profile.name if self.profile is not None
                                         else settings.profile)
        self.instance = InstanceWatch(settings.device_id, on_change=self._instance_changed,
                                      announce=self._announce)
        self._build_library(voices)
        self._build_transport()
        self._build_pipeline(player)
        self.player.set_volume(self.volume)
        self.reporter = HealthReporter(
            self.health, publish=self._publish_health if self.client is not None else None,
            notifier=self.notifier,
        )
        self.watchdog = Watchdog(self.liveness, self.notifier)
        self.addons = AddonSet(self)
        add_sections(self.health, self)
        self.health.add_provider("instance", self.instance.section)
        self.health.add_provider("settings", self.settings_check.section)

    def _build_library(self, voices: VoiceLibrary | None) -> None:
        """The voice library (reporting its model events here) and its model watcher."""
        settings = self.settings
        if voices is None:
            voices = VoiceLibrary.for_settings(settings, self._on_model_event, self.profile)
        else:
            voices.on_event = self._on_model_event
        self.voices = voices
        self.watcher: ModelWatcher | None = None
        if settings.models.watch:
            self.watcher = ModelWatcher(voices, debounce_s=settings.models.debounce_s,
                                        polling=settings.models.watch_polling)

    def _build_transport(self) -> None:
        """The MQTT client (None when MQTT is off), the event publisher, the request tracker
        and the intake with its bounded queue."""
        settings, mqtt = self.settings, self.settings.mqtt
        self.client: MqttClient | None = None
        if mqtt.enabled:
            self.client = MqttClient(
                mqtt, mqtt.client_id or f"tts-agent-{settings.device_id}",
                subscriptions=(*Intake.subscriptions(self.topics, tuple(mqtt.groups), mqtt.hermes),
                               self.topics.status.as_filter()),  # another instance's presence
                on_message=self._on_message,
                on_refused_topic=self._on_refused_topic,
                on_connected=self._on_connected,
                will=OutboundMessage(self.topics.status, to_payload(self._presence("offline")),
                                     retain=True),
            )
        self.publisher = EventPublisher(self.client or OfflinePublisher(), self.topics,
                                        instance=self.instance.id)
        self.journal = RequestJournal.for_settings(settings)
        self.tracker = RequestTracker(self.publisher, recorder=self.health, observer=self.journal)
        self.requests = Inbox(mqtt.intake_queue)  # control commands in a lane of their own
        self.intake = Intake(
            topics=self.topics, groups=tuple(mqtt.groups), tracker=self.tracker,
            requests=self.requests, max_payload_bytes=mqtt.max_payload_bytes,
            max_text_chars=settings.synthesis.max_text_chars,
            hermes_site_id=self.site_id if mqtt.hermes else None,
        )
        self.intake.listen(self.topics.status, self.instance.on_presence)

    def _build_pipeline(self, player: AudioPlayer | None) -> None:
        """The player, phrase cache and warmer, job queue, synthesis worker and dispatcher."""
        settings, mqtt = self.settings, self.settings.mqtt
        audio = effective_audio(settings.audio, self.profile)
        self.player = player or AudioPlayer(audio, self.tracker)  # reports as the worker does
        self.ping_clock = PingClock()
        self.phrase_cache = open_phrase_cache(settings.cache.dir / "phrases", settings.cache.max_mb)
        self.warmer = (PhraseWarmer(self.phrase_cache, settings.cache.warm_phrases)
                       if self.phrase_cache is not None else None)
        self.jobs = JobQueue(mqtt.intake_queue)
        chimes = Chimes(settings.chimes.dir, settings.chimes.by_priority)
        self.worker = SynthesisWorker(
            self.jobs, self.voices, self.player, self.tracker, item_buffer_s=audio.item_buffer_s,
            phrase_cache=self.phrase_cache, chimes=chimes, buffering=audio.buffering,
            on_thread_start=self._pin_synthesis_thread, sync_late=audio.sync_late)
        self.dispatcher = Dispatcher(
            self.requests, self.jobs, self.tracker, self.player,
            voice_names=self.voices.names, default_voice=settings.models.default_voice,
            status=self.ping_status, reload=self._reload,
            on_volume=self._set_volume, on_ping=self._on_ping,
            progress_interval_s=mqtt.progress_interval_s,
            chime_names=chimes.names, chime_default=chimes.default_for,
            speakable=SpeechCheck.for_settings(settings),
        )

    # -- lifecycle (main thread) ----------------------------------------------------------

    def start(self, cancelled: Callable[[], bool] = lambda: False) -> None:
        """Start the systemd watchdog, warm the default voice, start the player and workers
        (each watched for liveness once it runs), connect, start the health reporter. Ends
        early when ``cancelled()`` says a stop came while the default voice still loads."""
        mqtt = self.settings.mqtt
        self.watchdog.start()
        log.info("agent_starting", device=self.settings.device_id, version=__version__,
                 broker=f"{mqtt.host}:{mqtt.port}" if mqtt.enabled else None, tls=mqtt.tls,
                 protocol=mqtt.protocol, profile=self.profile_name)
        self.notifier.status(f"starting: loading voice {self.settings.models.default_voice}")
        if self.warmer is not None:
            self.warmer.start()
        preloading = self.preloading  # the default voice loading: a stop may come meanwhile
        while preloading is not None and preloading.is_alive() and not cancelled():
            preloading.join(_START_POLL_S)  # timed: the main thread's signal handlers run
        if preloading is not None and preloading.is_alive():
            log.warning("start_abandoned", reason="stop requested while the default voice loads")
            return
        try:
            voice = self.voices.get(None)
            log.info("default_voice_ready", voice=voice.name, version=voice.version)
            self.worker.note_voice(voice)  # health says how it plays from READY on
        except (VoiceNotFound, VoiceLoadError) as exc:
            log.error("default_voice_unavailable", error=str(exc))
        # Before the dispatcher runs: answer (or queue again) what an earlier run left unfinished.
        answer_journalled(self.journal, self.tracker, self.jobs, self.settings,
                          reply_allowed=self.topics.reply_allowed)
        self.player.start()
        self.worker.start()
        self.dispatcher.start()
        if self.watcher is not None:
            self.watcher.start()
        if self.client is not None:
            self.client.start()
        else:
            log.warning("mqtt_disabled", hint="no commands can reach the agent")
        watch_workers(self.liveness, self)
        self.addons.start()
        self.reporter.start()

    def notify_ready(self) -> None:
        """``READY=1`` with the one-line health summary (main thread, after :meth:`start`).

        The default voice is loaded and warm by then. If it could not be loaded, READY is sent
        all the same with ``failing: no voice loaded`` as its status: the agent stays reachable
        over MQTT (health, ``reload``) so that the fleet can repair it, instead of being
        restarted in a loop by systemd.
        """
        snap = self.health.snapshot()
        log.info("agent_ready", state=snap["state"], reasons=snap["reasons"])
        self.notifier.ready(status=summary_line(snap))

    def reload(self, load_settings: Callable[[], Settings] | None = None) -> str:
        """SIGHUP (the main loop's reload thread): ``RELOADING=1``, re-read the settings where
        that is safe (:func:`agent.daemon.reload.reload_settings`), re-check every voice, then
        ``READY=1`` unless a stop came meanwhile. Returns the one-line result (also the STATUS);
        the voices are re-checked even when the settings file cannot be read."""
        self.notifier.reloading(status="reloading settings and voices")
        log.info("reload_started")
        change = None
        if load_settings is not None:
            self.settings, change = reload_settings(self.settings, load_settings)
            self.settings_check.problem = change.problem
            self.addons.on_reload()
        report = reload_all(self.voices, change)
        self.reporter.request()
        summary, snap = report.line(), self.health.snapshot()
        log.info("reload_finished", summary=summary, state=snap["state"])
        if not self.stopping.is_set():
            self.notifier.ready(status=f"{summary}; {summary_line(snap)}")
        return summary

    def stop(self, grace_s: float = SHUTDOWN_GRACE_S) -> bool:
        """``STOPPING=1``, refuse new work, let the current utterance finish (up to
        ``grace_s``), publish ``stopped``, disconnect. Every open request gets its final event.

        Returns whether every worker thread ended (also kept in :attr:`stopped_cleanly`).
        """
        if self.stopping.is_set():
            return bool(self.stopped_cleanly)
        self.stopping.set()
        self.notifier.stopping(status="stopping")
        self.liveness.clear()  # the watchdog keeps pinging while the workers wind down
        log.info("agent_stopping", pending=self.tracker.pending())
        self.intake.close()
        self.addons.stop(_JOIN_S)
        self.dispatcher.stop(_JOIN_S)
        for request in self.dispatcher.drain():
            self.tracker.answer(request.id, request.name, Outcome.REJECTED,
                                reason="agent is shutting down", reply=request.reply,
                                hermes=request.hermes)
        for job in self.jobs.take_all():
            self.tracker.finish(job.request_id, Outcome.INTERRUPTED, reason="agent stopping")
        if not self.tracker.wait_idle(grace_s):
            log.info("cutting_current_utterance", grace_s=grace_s)
        self.player.close(_JOIN_S)  # cuts what still plays: those requests end "interrupted"
        self.worker.stop(_JOIN_S)
        if self.watcher is not None:
            self.watcher.stop(_JOIN_S)
        self.voices.close()
        if self.warmer is not None:
            self.warmer.stop(_JOIN_S)
        for request_id in self.tracker.open_ids():
            self.tracker.finish(request_id, Outcome.INTERRUPTED, reason="agent stopping")
        self.journal.close()
        self.state.release()
        self.reporter.stop(_JOIN_S)
        if self.client is not None:
            self.client.close(_JOIN_S, final=self.publisher.presence_message(
                self._presence("stopped")))
        self.watchdog.stop(_JOIN_S)
        stuck = [name for name, alive in (("synthesis", self.worker.alive),
                                           ("audio", self.player.stats()["alive"]),
                                           ("dispatch", self.dispatcher.alive)) if alive]
        self.stopped_cleanly = not stuck
        if stuck:
            log.error("workers_did_not_stop", workers=stuck)
        log.info("agent_stopped", served=self.tracker.served, failed=self.tracker.failed)
        return self.stopped_cleanly

    # -- callbacks ------------------------------------------------------------------------

    def _on_message(self, message: Any) -> None:
        """MQTT network thread."""
        self.intake.on_message(message)

    def _on_refused_topic(self, message: Any) -> None:
        """Network thread: a command topic too long to route (answered ``rejected``)."""
        self.intake.on_refused_topic(message)

    def _on_connected(self, session_present: bool) -> None:
        """Network thread, after every connect: retained ``online``, a fresh health report."""
        self.publisher.presence(self._presence("online"))
        self.addons.on_connected()
        self.reporter.request()

    def _instance_changed(self) -> None:
        """Network thread: another instance with this device id came or went."""
        self.reporter.request()

    def _announce(self) -> None:
        """Network thread: another instance went away; the retained status names this one."""
        if not self.stopping.is_set():
            self.publisher.presence(self._presence("online"))

    def _on_ping(self, command: PingCommand, received_s: float) -> None:
        """Dispatch thread: a ``ping`` notes its ``sent_ms``, renews the retained report."""
        if command.sent_ms is not None:
            self.ping_clock.record(command.sent_ms, received_s)
        self.reporter.request()

    def _on_model_event(self, event: VoiceEvent) -> None:
        """Voice library (main, model watcher or dispatch thread): model_loaded /
        model_rejected, and a fresh health report with the voices as they are now."""
        self.publisher.model_event(event)
        if event.kind is VoiceEventKind.LOADED and self.warmer is not None:
            with contextlib.suppress(VoiceNotFound, VoiceLoadError):
                self.warmer.warm(self.voices.get(event.voice))
        self.reporter.request()

    def _pin_synthesis_thread(self) -> None:
        """Synthesis thread, once: onnxruntime pins its own pool threads to the profile's
        CPUs; the thread that calls ``run`` works too, so it is pinned the same way."""
        if self.profile is not None:
            pin_current_thread(self.profile.runtime.options)

    def _set_volume(self, volume: float) -> None:
        """Dispatch thread: the retained report shows the new volume at once; kept for later."""
        self.volume = volume
        self.volume_store.save(volume)
        self.reporter.request()

    # -- health ---------------------------------------------------------------------------

    def _publish_health(self, snap: HealthReport) -> None:
        """Health reporter thread: the snapshot, retained on ``{prefix}/{device}/health``.

        Only while connected: a report queued while the broker is away would arrive stale;
        every (re)connect asks for a fresh one instead (:meth:`_on_connected`).
        """
        client = self.client
        if client is None or not client.connected:
            log.debug("health_not_published", reason="mqtt not connected")
            return
        self.publisher.health(snap)

    # -- answers (agent.daemon.status) ---------------------------------------------------

    def _presence(self, state: str) -> Presence:
        return presence(self, state)

    def ping_status(self) -> PingStatus:
        """The small status ``ping`` answers with (dispatch thread)."""
        return ping_status(self)

    def _reload(self, command: ReloadCommand) -> list[str]:
        """Dispatch thread: the ``reload`` command, then a fresh health report."""
        try:
            return reload_command(self.voices, command, self.settings.models.default_voice,
                                  self.settings_check.check)
        finally:
            self.reporter.request()
