"""The shape of the health report: what :meth:`agent.health.snapshot.Health.snapshot` returns,
what is retained on ``{prefix}/{device}/health`` and what the reporters read.

TypedDicts, so the dict that is built is the dict that is serialized, key for key. At run time
this module imports nothing from the agent, so any part may name its section type here; no
``from __future__ import annotations`` (``NotRequired`` must be seen at run time).
The design: docs/internals.md#the-health-reports-shape.
"""

from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict

from agent.outcomes import SpeakOutcome

if TYPE_CHECKING:
    from agent.audio.stats import DeviceInfo, PlayerState, VolumeControl

__all__ = ["AudioSection", "ClockReport", "ControllerClock", "DiskUsage", "HardwareSection",
           "HealthReport", "HealthSummary", "InstanceSection", "JournalSection", "LexiconSection",
           "LoadedVoice", "MqttSection", "PhraseCacheSection", "ProviderError", "Quantiles",
           "QueueSection", "ReloadRecord", "RequestWindow", "RequestsSection", "SettingsSection",
           "State", "SyncSection", "SystemReading", "SystemSection", "ThermalZone", "Throttled",
           "VoicesSection", "WorkerReport", "WorkerState", "WyomingSection"]

State = Literal["ok", "degraded", "failing"]
"""The overall verdict, best first."""
WorkerState = Literal["idle", "busy", "hung", "dead"]


class Quantiles(TypedDict):
    """Nearest-rank percentiles over the request window."""

    p50: float
    p95: float


class RequestWindow(TypedDict):
    requests: int
    failed: int
    finished: int


class RequestsSection(TypedDict):
    """Counters since start and percentiles over the last ``health.window`` requests."""

    served: int
    failed: int
    total: dict[SpeakOutcome, int]
    """By how a speak request ended (:data:`agent.outcomes.SpeakOutcome`)."""
    window: RequestWindow
    synthesis_s: Quantiles | None
    rtf: Quantiles | None
    first_audio_s: Quantiles | None
    last_synthesis_s: float | None
    """How long the most recent request that was synthesized took to synthesize (s)."""


class WorkerReport(TypedDict):
    """One watched worker (``synthesis``, ``audio``, ``mqtt``); durations in seconds."""

    state: WorkerState
    busy_s: float | None
    since_beat_s: float
    problem: str | None


class ThermalZone(TypedDict):
    type: str
    temp_c: float


class Throttled(TypedDict):
    """The Raspberry Pi firmware's throttling word, decoded."""

    raw: str
    now: list[str]
    since_boot: list[str]


class DiskUsage(TypedDict):
    path: str
    free_bytes: int
    total_bytes: int


class SystemReading(TypedDict):
    """What :meth:`agent.health.sysinfo.SystemProbe.read` finds (``None``: not available)."""

    load_avg: list[float] | None
    rss_bytes: int | None
    rss_peak_bytes: int | None
    cpu_temp_c: float | None
    thermal_zones: list[ThermalZone]
    throttled: Throttled | None
    disk: DiskUsage | None


class SystemSection(SystemReading):
    cpu_temp_limit_c: float
    """The limit the temperature rule uses (settings, else the hardware profile's)."""


class ProviderError(TypedDict):
    """A section whose provider raised."""

    provider_error: str


class ReloadRecord(TypedDict):
    """The last reload result of one voice."""

    voice: str
    outcome: str
    version: str | None
    reason: str | None
    at: float
    signed_by: str | None
    """Of a loaded voice: the trusted key that signed it (None: unsigned)."""


class LoadedVoice(TypedDict):
    voice: str
    version: str
    variant: str
    sha256: str
    loaded_at: float
    provider: str
    sample_rate: int
    streaming: dict[str, float] | None
    """The streamed first sentence's window figures; ``None`` when the voice decodes whole."""
    session_cache: Literal["hit", "stored", "unsaved", "off"]
    """What the optimised-model cache did when the voice loaded: ``hit`` (nothing built or
    measured: a fast start), ``stored`` (built now, saved for the next start), ``unsaved``
    (built, could not be saved), ``off`` (no cache for it). docs/operations.md, "First boot"."""
    signed_by: str | None  # the trusted key that signed it (docs/voices.md); None: unsigned
    text_rules: str | None  # its normalizer's language (en, de, fr, es); None: espeak-ng alone
    problems: list[str]
    """What is wrong around the voice (each one makes the state ``degraded``): the stale variant
    it stands in for, damaged files of its bundle that it does not serve (docs/voices.md)."""


class VoicesSection(TypedDict):
    """:meth:`agent.library.voices.VoiceLibrary.status`."""

    voices: list[LoadedVoice]
    default: str
    installed: list[str]
    """The voices installed in ``models.dir`` (and any live one whose files went missing)."""
    last_reload: dict[str, ReloadRecord]
    espeak: str  # the espeak-ng build the voices phonemize with (agent.text.espeak.describe)


class AudioSection(TypedDict):
    """The player's stats (:class:`agent.audio.stats.PlayerStats`) without their
    ``busy_since`` stamp, then how sentences are buffered."""

    pcm: str
    """The ALSA PCM the player opens: ``audio.device``, or the hardware profile's
    ``alsa_device`` when that setting is not set (:func:`agent.settings.effective_audio`)."""
    underruns: int
    device_errors: int
    recovery_probes: int
    seconds_played: float
    started: int
    finished: int
    interrupted: int
    failed: int
    expired: int
    internal_errors: int
    state: "PlayerState"
    """The player's own verdict, read by the rules."""
    reason: str | None
    device: "DeviceInfo | None"
    queue_depth: int
    playing: str | None
    volume: float
    volume_control: "VolumeControl"
    alive: bool
    buffering: Literal["stream", "sentence"]
    """How sentences reach the player (docs/operations.md, "Slow boards"): ``stream`` as audio
    comes, ``sentence`` each one whole once synthesized (the voice's warm-up ran slower than
    real time on this board: speech starts late, never cut inside a sentence)."""
    buffering_reason: str | None
    """Why: the voice and the real-time factor its warm-up measured."""


class MqttSection(TypedDict):
    """The MQTT client's state; only ``enabled`` and ``connected`` when MQTT is off."""

    enabled: bool
    connected: bool
    reconnects: NotRequired[int]
    last_error: NotRequired[str | None]
    broker: NotRequired[str]
    tls: NotRequired[bool]
    protocol: NotRequired[str]
    takeovers: NotRequired[int]
    """Connections another client with the same client id took from this one, since start."""
    state: NotRequired[Literal["ok", "degraded"]]
    """``degraded`` while the session is being taken over again and again (read by the rules;
    a plain disconnect is ``connected: false``)."""
    reason: NotRequired[str | None]


class QueueSection(TypedDict):
    depth: int
    """Speak jobs waiting for the synthesis worker."""
    max: int
    pending: int
    """Requests accepted and not finished yet."""
    intake: int
    """Commands received and not dispatched yet."""


class JournalSection(TypedDict):
    """The request journal (:meth:`agent.mqtt.journal.RequestJournal.status`): ``degraded``
    while its file cannot be written (speak requests are then accepted ``journaled: false``)."""

    enabled: bool
    path: str
    writable: bool
    """The file is open for appending (false with the journal off, too)."""
    requests: int
    """Unfinished requests it knows of."""
    unjournaled: int
    """Requests accepted, since start, while the file could not be written."""
    refused: int
    """Requests refused, since start, because it was full."""
    state: Literal["ok", "degraded"]
    reason: str | None
    """Why it is degraded: the path and the error."""


class InstanceSection(TypedDict):
    """This agent process and others with its device id (:mod:`agent.daemon.instance`)."""

    id: str
    others: list[str]
    """Instance ids of other agents online with this device id now."""
    conflicts: int
    state: Literal["ok", "failing"]
    reason: str | None


class SettingsSection(TypedDict):
    """The settings file as the last reload read it (:class:`agent.daemon.reload.SettingsCheck`):
    ``degraded`` while it would not start the agent (the settings read before stay in force)."""

    state: Literal["ok", "degraded"]
    reason: str | None
    """Why: the file (its name only) and each problem, as ``check-config`` says them."""


class HardwareSection(TypedDict, total=False):
    """The hardware profile in force (:meth:`~agent.hardware.effective.EffectiveProfile.as_dict`
    without its ``candidates``, ``why`` and ``origins``), or ``ok: false`` with the ``error`` when
    no profile could be resolved. ``profile``, ``intra_op_num_threads``, ``inter_op_num_threads``
    and ``model_variant`` are the stable interface; the other keys are reported as they are."""

    ok: bool
    error: str
    profile: str | None
    description: str
    profile_file: str
    forced: bool
    intra_op_num_threads: int
    inter_op_num_threads: int
    model_variant: str
    providers: list[str]
    audio: dict[str, Any]
    thermal: dict[str, Any]
    tune: dict[str, Any]
    hardware: dict[str, Any]


class PhraseCacheSection(TypedDict):
    """``enabled`` and, when the cache is open, its counters
    (:meth:`agent.pipeline.phrase_cache.PhraseCache.stats`)."""

    enabled: bool
    entries: NotRequired[int]
    bytes: NotRequired[int]
    max_bytes: NotRequired[int]
    hits: NotRequired[int]
    misses: NotRequired[int]
    evictions: NotRequired[int]
    corrupt: NotRequired[int]
    exact_entries: NotRequired[int]
    exact_hits: NotRequired[int]


class LexiconSection(TypedDict):
    """The device lexicon (:meth:`agent.library.lexicon.LexiconHolder.status`): the one in
    service, and why the file on disk is refused (then ``degraded``; the previous lexicon, or
    none, stays in service)."""

    path: str
    loaded: bool
    """Whether a lexicon from the file is in service."""
    entries: int
    sha256: str | None
    """The first hex digits of the file in service's sha256."""
    loaded_at: float | None
    """When it was loaded (Unix time)."""
    last_error: str | None
    state: Literal["ok", "degraded"]
    reason: str | None


class WyomingSection(TypedDict):
    """The Wyoming TTS server (:mod:`agent.wyoming`; present while ``wyoming.uri`` is set).
    Counts are since the start; ``clients`` are connected now."""

    enabled: bool
    uri: str | None
    listening: bool
    port: int | None
    clients: int
    max_clients: int
    max_syntheses: int
    connections: int
    refused_clients: int
    """Connections answered ``busy`` (over ``wyoming.max_clients``, every one serving a
    request) and closed."""
    replaced_clients: int
    """Idle connections closed (``replaced``) to make room for a newcomer."""
    requests: int
    dropped_clients: int
    """Clients dropped for not reading within ``wyoming.write_timeout_s``."""
    cancelled_syntheses: int
    """Syntheses stopped before their end (client dropped or gone, time limit, stop)."""
    finished: int
    failed: int
    rejected: int
    interrupted: int
    last_error: str | None
    zeroconf: str
    """``off``, ``announced`` (``_wyoming._tcp`` over mDNS) or ``failed: why``."""
    state: Literal["ok", "degraded"]
    reason: str | None
    """Why it is degraded: it cannot listen on ``wyoming.uri``."""


class HealthSummary(TypedDict):
    """The overall verdict alone (what ``pong`` carries)."""

    state: State
    reasons: list[str]


class ClockReport(TypedDict):
    """:func:`agent.health.clock.read_clock`; only ``error`` is set when it cannot read."""
    synchronized: bool | None
    est_error_ms: float | None
    max_error_ms: float | None
    error: str | None


class ControllerClock(TypedDict):
    """The last ping's bound (:meth:`agent.health.clock.PingClock.report`)."""
    offset_at_most_ms: float  # this clock less the controller's is at most this (ms)
    age_s: float


class SyncSection(TypedDict):
    """:func:`agent.daemon.health.sync_section`: what a synchronized start needs (fleet.md)."""
    lead_ms: int
    output_latency_ms: float
    late: Literal["join", "skip"]
    clock: ClockReport
    controller: ControllerClock | None  # None until a ping carrying ``sent_ms`` came


class HealthReport(TypedDict):
    """The full report, in the order it is serialized. The provider sections follow
    ``system`` in the order they were registered."""

    schema: int
    state: State
    reasons: list[str]
    """Worst first."""
    device_id: str
    version: str
    time: str
    """ISO 8601, UTC, whole seconds."""
    uptime_s: float
    requests: RequestsSection
    workers: dict[str, WorkerReport]
    system: SystemSection
    voices: NotRequired[VoicesSection | ProviderError]
    audio: NotRequired[AudioSection | ProviderError]
    mqtt: NotRequired[MqttSection | ProviderError]
    queue: NotRequired[QueueSection | ProviderError]
    journal: NotRequired[JournalSection | ProviderError]
    instance: NotRequired[InstanceSection | ProviderError]
    settings: NotRequired[SettingsSection | ProviderError]
    hardware: NotRequired[HardwareSection | ProviderError]
    phrase_cache: NotRequired[PhraseCacheSection | ProviderError]
    sync: NotRequired[SyncSection | ProviderError]
    lexicon: NotRequired[LexiconSection | ProviderError]
    wyoming: NotRequired[WyomingSection | ProviderError]
