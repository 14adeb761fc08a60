"""The health snapshot, its rules, percentiles, the Prometheus textfile and the reporter."""

from __future__ import annotations

import json
import os
import queue
import random
import re
from pathlib import Path
from typing import Any

import pytest

from agent import __version__
from agent.health.liveness import Liveness
from agent.health.prometheus import COUNTERS, GAUGES, MAX_REASON_CHARS, render, write_textfile
from agent.health.report import HealthReport
from agent.health.reporter import HealthReporter
from agent.health.sdnotify import Notifier
from agent.health.snapshot import Health, RequestStats, evaluate, percentile, summary_line
from agent.health.sysinfo import SystemProbe, decode_throttled
from agent.settings import Settings
from tests.support.notify_socket import NotifySocket


class FakeClock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def fake_sysroot(root: Path, *, zones: dict[str, int] | None = None,
                 throttled: str | None = None) -> Path:
    """A /proc + /sys tree with the given thermal zones (type -> millidegrees)."""
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/self/status").write_text(
        "Name:\tpython3\nVmPeak:\t  900000 kB\nVmHWM:\t  250000 kB\nVmRSS:\t  200000 kB\n")
    (root / "proc/loadavg").write_text("0.50 0.25 0.10 1/123 4567\n")
    for index, (kind, millideg) in enumerate((zones or {}).items()):
        zone = root / f"sys/class/thermal/thermal_zone{index}"
        zone.mkdir(parents=True)
        (zone / "type").write_text(kind + "\n")
        (zone / "temp").write_text(f"{millideg}\n")
    if throttled is not None:
        firmware = root / "sys/devices/platform/soc/soc:firmware"
        firmware.mkdir(parents=True)
        (firmware / "get_throttled").write_text(throttled + "\n")
    return root


def healthy_providers(health: Health) -> dict[str, dict[str, Any]]:
    """Register the sections the daemon provides, all healthy; tests then spoil one."""
    sections: dict[str, dict[str, Any]] = {
        "voices": {  # the shape of VoiceLibrary.status()
            "voices": [{"voice": "en_US-joe-medium", "version": "1.0.0", "variant": "fp32",
                        "sha256": "ab" * 32, "loaded_at": 1.7e9}],
            "default": "en_US-joe-medium",
            "last_reload": {"en_US-joe-medium": {"voice": "en_US-joe-medium",
                                                 "outcome": "loaded", "version": "1.0.0",
                                                 "reason": None, "at": 1.7e9}},
        },
        "audio": {"ok": True, "error": None, "device": "default", "underruns": 2},
        "mqtt": {"enabled": True, "connected": True, "reconnects": 1},
        "queue": {"depth": 0, "max": 32},
    }
    for name, section in sections.items():
        health.add_provider(name, lambda s=section: s)
    return sections


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(device_id="t1", cache={"dir": tmp_path / "cache"},
                    health={"disk_min_free_mb": 1})


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def health(settings: Settings, tmp_path: Path, clock: FakeClock) -> Health:
    probe = SystemProbe(tmp_path, sysroot=fake_sysroot(tmp_path / "root",
                                                       zones={"cpu-thermal": 48312}))
    return Health(settings, liveness=Liveness(stall_s=30, clock=clock), probe=probe, clock=clock)


# -- the snapshot --------------------------------------------------------------------------

def test_a_healthy_snapshot_has_every_field(health: Health, clock: FakeClock) -> None:
    healthy_providers(health)
    health.liveness.watch("synthesis", busy_since=lambda: None)  # type: ignore[union-attr]
    clock.now += 12.5
    snap = json.loads(json.dumps(health.snapshot()))
    assert snap["state"] == "ok" and snap["reasons"] == []
    assert snap["device_id"] == "t1"
    assert snap["version"] == __version__
    assert snap["uptime_s"] == 12.5
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", snap["time"])
    assert snap["workers"]["synthesis"]["state"] == "idle"
    system = snap["system"]
    assert system["rss_bytes"] == 200000 * 1024
    assert system["rss_peak_bytes"] == 250000 * 1024
    assert system["load_avg"] == [0.5, 0.25, 0.1]
    assert system["cpu_temp_c"] == 48.3
    assert system["thermal_zones"] == [{"type": "cpu-thermal", "temp_c": 48.3}]
    assert system["throttled"] is None
    assert system["disk"]["free_bytes"] > 0
    assert snap["requests"]["served"] == 0
    assert snap["audio"]["underruns"] == 2
    assert snap["queue"] == {"depth": 0, "max": 32}


def test_the_real_system_is_read(settings: Settings) -> None:
    system = Health(settings).snapshot()["system"]
    assert system["rss_bytes"] > 10 * 1024 * 1024  # this very Python process
    assert system["rss_peak_bytes"] >= system["rss_bytes"]
    assert len(system["load_avg"]) == 3
    assert system["disk"]["path"] == str(settings.cache.dir)
    assert 0 < system["disk"]["free_bytes"] <= system["disk"]["total_bytes"]


@pytest.mark.parametrize(
    ("section", "change", "state", "reason"),
    [
        ("audio", {"ok": False, "error": "cannot open 'hw:5': No such device"}, "degraded",
         "audio device unavailable: cannot open 'hw:5': No such device"),
        ("voices", {"voices": []}, "failing",
         "no voice loaded: models.default_voice 'en_US-joe-medium' is not loaded yet"),
        ("mqtt", {"connected": False}, "degraded", "mqtt disconnected"),
        ("voices", {"last_reload": {"en_US-joe-medium": {
            "outcome": "rejected", "reason": "sha256 mismatch"}}}, "degraded",
         "last model reload rejected: en_US-joe-medium: sha256 mismatch"),
        ("queue", {"ok": False}, "degraded", "queue not ok"),
    ],
)
def test_rules_flip_the_state_with_a_reason(health: Health, section: str, change: dict[str, Any],
                                            state: str, reason: str) -> None:
    sections = healthy_providers(health)
    assert health.snapshot()["state"] == "ok"
    sections[section].update(change)
    snap = health.snapshot()
    assert (snap["state"], snap["reasons"]) == (state, [reason])


def test_mqtt_switched_off_is_not_a_problem(health: Health) -> None:
    sections = healthy_providers(health)
    sections["mqtt"].update(enabled=False, connected=False)
    assert health.snapshot()["state"] == "ok"


def test_a_hung_worker_is_failing_and_worst_comes_first(health: Health, clock: FakeClock) -> None:
    sections = healthy_providers(health)
    busy_since = clock.now
    health.liveness.watch("synthesis", busy_since=lambda: busy_since)  # type: ignore[union-attr]
    clock.now += 31
    sections["mqtt"]["connected"] = False
    snap = health.snapshot()
    assert snap["state"] == "failing"
    assert snap["reasons"] == [
        "worker synthesis hung: busy on one item for 31 s (limit 30 s)",
        "mqtt disconnected",
    ]
    assert snap["workers"]["synthesis"]["state"] == "hung"
    assert summary_line(snap) == ("failing: worker synthesis hung: busy on one item for 31 s "
                                  "(limit 30 s) (+1 more); served 0, failed 0")


def test_a_failing_provider_degrades_but_does_not_break_the_report(health: Health) -> None:
    healthy_providers(health)

    def broken() -> dict[str, Any]:
        raise OSError("device vanished")

    health.add_provider("hardware", broken)
    snap = health.snapshot()
    assert snap["state"] == "degraded"
    assert snap["reasons"] == ["hardware provider failed: OSError: device vanished"]
    assert snap["hardware"] == {"provider_error": "OSError: device vanished"}


def test_provider_names_are_checked(health: Health) -> None:
    for bad in ("system", "requests", "Audio", "a/b", ""):
        with pytest.raises(ValueError, match="section name"):
            health.add_provider(bad, dict)
    health.add_provider("audio", dict)
    with pytest.raises(ValueError, match="already registered"):
        health.add_provider("audio", dict)


def test_hot_throttled_and_full_disk_are_degraded(settings: Settings, tmp_path: Path) -> None:
    root = fake_sysroot(tmp_path / "root", zones={"acpitz": 30000, "x86_pkg_temp": 85250},
                        throttled="50005")
    probe = SystemProbe(tmp_path, sysroot=root)
    tight = settings.model_copy(update={"health": settings.health.model_copy(
        update={"disk_min_free_mb": 10_000_000})})
    snap = Health(tight, probe=probe, thermal_limit_c=80.0).snapshot()  # the profile's limit
    assert snap["system"]["cpu_temp_c"] == 85.2
    assert snap["system"]["throttled"] == {
        "raw": "0x50005", "now": ["under_voltage", "throttled"],
        "since_boot": ["under_voltage", "throttled"]}
    assert snap["state"] == "degraded"
    assert snap["reasons"][:2] == ["cpu temperature 85.2 C (limit 80 C)",
                                   "throttled now: under_voltage, throttled"]
    assert re.fullmatch(r"\d+ MiB free for .* \(limit 10000000 MiB\)", snap["reasons"][2])
    # an explicit setting wins over the profile; 90 C is not reached
    cool = tight.model_copy(update={"health": tight.health.model_copy(
        update={"thermal_limit_c": 90.0})})
    reasons = Health(cool, probe=probe, thermal_limit_c=80.0).snapshot()["reasons"]
    assert not any(r.startswith("cpu temperature") for r in reasons)


def test_throttled_in_the_past_only_is_reported_not_degraded() -> None:
    assert decode_throttled(0x80000) == {"raw": "0x80000", "now": [],
                                         "since_boot": ["soft_temp_limit"]}


def test_cpu_zone_is_preferred_else_the_hottest(tmp_path: Path) -> None:
    root = fake_sysroot(tmp_path / "a", zones={"acpitz": 70000, "iwlwifi_1": 90000})
    assert SystemProbe(tmp_path, sysroot=root).read()["cpu_temp_c"] == 90.0
    root = fake_sysroot(tmp_path / "b", zones={"acpitz": 70000, "cpu-thermal": 41000})
    assert SystemProbe(tmp_path, sysroot=root).read()["cpu_temp_c"] == 41.0
    root = fake_sysroot(tmp_path / "c")
    read = SystemProbe(tmp_path, sysroot=root).read()
    assert (read["cpu_temp_c"], read["thermal_zones"]) == (None, [])


def test_many_failed_requests_degrade(health: Health) -> None:
    healthy_providers(health)
    for _ in range(4):
        health.record_request("failed")
    assert health.snapshot()["state"] == "ok"  # too few to judge
    health.record_request("finished", synthesis_s=0.2, audio_s=1.0)
    health.record_request("failed")
    snap = health.snapshot()
    assert (snap["state"], snap["reasons"]) == ("degraded", ["5 of the last 6 requests failed"])
    assert (snap["requests"]["served"], snap["requests"]["failed"]) == (1, 5)


# -- requests and percentiles --------------------------------------------------------------

def test_percentile_is_nearest_rank() -> None:
    assert percentile([7.0], 50) == 7.0
    assert percentile([7.0], 95) == 7.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 95) == 4.0
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 50), percentile(values, 95)) == (50.0, 95.0)
    with pytest.raises(ValueError):
        percentile([], 50)


def test_request_percentiles_over_a_bounded_window() -> None:
    stats = RequestStats(window=100)
    rng = random.Random(8)
    old = list(range(1000, 1050))
    for v in old:  # pushed out of the window by the next 100
        stats.record("finished", synthesis_s=float(v), audio_s=1.0, first_audio_s=float(v))
    latencies = list(range(1, 101))
    rng.shuffle(latencies)
    for v in latencies:
        stats.record("finished", synthesis_s=v / 100, audio_s=2.0, first_audio_s=v / 1000)
    snap = stats.snapshot()
    assert snap["window"] == {"requests": 100, "failed": 0, "finished": 100}
    assert snap["synthesis_s"] == {"p50": 0.5, "p95": 0.95}
    assert snap["rtf"] == {"p50": 0.25, "p95": 0.475}
    assert snap["first_audio_s"] == {"p50": 0.05, "p95": 0.095}
    assert snap["served"] == 150


def test_outcomes_are_counted_and_partial_figures_allowed() -> None:
    stats = RequestStats(window=10)
    stats.record("rejected")
    stats.record("expired")
    stats.record("interrupted", first_audio_s=0.3)
    stats.record("finished", audio_s=1.5, first_audio_s=0.1)  # a cached phrase
    stats.record("failed", synthesis_s=0.4)
    snap = stats.snapshot()
    assert snap["total"] == {"finished": 1, "failed": 1, "rejected": 1, "expired": 1,
                             "interrupted": 1}
    assert snap["synthesis_s"] == {"p50": 0.4, "p95": 0.4}
    assert snap["rtf"] is None  # no request had both synthesis time and audio
    assert snap["first_audio_s"] == {"p50": 0.1, "p95": 0.3}
    with pytest.raises(ValueError, match="unknown outcome"):
        stats.record("spoken")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="finite"):
        stats.record("finished", synthesis_s=float("nan"))
    with pytest.raises(ValueError, match=">= 0"):
        stats.record("finished", audio_s=-1.0)


def test_evaluate_is_the_one_place_for_rules(settings: Settings) -> None:
    snap = {"requests": RequestStats(10).snapshot(), "system": {}, "workers": {},
            "voices": {"ok": False, "error": "model file unreadable", "voices": []}}
    assert evaluate(snap, settings.health) == (
        "failing", ["voices unusable: model file unreadable", "no voice loaded"])


# -- Prometheus ----------------------------------------------------------------------------

_SAMPLE = re.compile(
    r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)'
    r'(?:\{(?P<labels>[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
    r'(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*")*)\})?'
    r' (?P<value>[-+]?(?:\d+(?:\.\d*)?(?:e[-+]?\d+)?|NaN|Inf))$'
)


def exposition_types(text: str) -> dict[str, str]:
    """Each family's ``# TYPE``."""
    return {name: kind for _, _, name, kind in
            (line.split() for line in text.splitlines() if line.startswith("# TYPE "))}


def parse_exposition(text: str) -> dict[str, float]:
    """A strict reader of the text format: HELP/TYPE before samples, one block per family."""
    assert text.endswith("\n")
    samples: dict[str, float] = {}
    typed: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("# HELP "):
            current = line.split()[2]
            assert current not in typed, f"family {current} split in two blocks"
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            assert name == current and kind in {"gauge", "counter"}
            typed[name] = kind
        else:
            match = _SAMPLE.match(line)
            assert match, f"not a sample line: {line!r}"
            assert match["name"] == current, f"{line!r} outside its family block"
            key = match["name"] + ("{" + match["labels"] + "}" if match["labels"] else "")
            assert key not in samples, f"duplicate sample {key}"
            samples[key] = float(match["value"])
    return samples


def degraded_snapshot(health: Health, clock: FakeClock) -> HealthReport:
    sections = healthy_providers(health)
    sections["audio"].update(ok=False, error='no "card" here\nat all')
    busy_since = clock.now  # busy on an item since now
    health.liveness.watch("synthesis", busy_since=lambda: busy_since)  # type: ignore[union-attr]
    for v in (0.2, 0.4):
        health.record_request("finished", synthesis_s=v, audio_s=2.0, first_audio_s=v / 2)
    health.record_request("failed")
    return health.snapshot()


def test_prometheus_text_parses_and_carries_the_figures(health: Health,
                                                        clock: FakeClock) -> None:
    text = render(degraded_snapshot(health, clock), written_at=1_790_000_000.25)
    samples = parse_exposition(text)
    assert samples["tts_agent_last_write_timestamp_seconds"] == 1_790_000_000.25
    assert samples[f'tts_agent_info{{version="{__version__}",device_id="t1"}}'] == 1
    assert samples['tts_agent_health_state{state="degraded"}'] == 1
    assert samples['tts_agent_health_state{state="ok"}'] == 0
    assert samples['tts_agent_requests_total{outcome="finished"}'] == 2
    assert samples['tts_agent_requests_total{outcome="failed"}'] == 1
    assert samples['tts_agent_synthesis_seconds{quantile="0.5"}'] == 0.2
    assert samples['tts_agent_synthesis_seconds{quantile="0.95"}'] == 0.4
    assert samples['tts_agent_real_time_factor{quantile="0.95"}'] == 0.2
    assert samples['tts_agent_worker_alive{worker="synthesis"}'] == 1
    assert samples["tts_agent_resident_memory_bytes"] == 200000 * 1024
    assert samples["tts_agent_cpu_temperature_celsius"] == 48.3
    assert samples["tts_agent_audio_ok"] == 0
    assert samples["tts_agent_audio_underruns_total"] == 2
    assert samples["tts_agent_mqtt_reconnects_total"] == 1
    assert samples["tts_agent_mqtt_connected"] == 1
    assert samples["tts_agent_queue_max"] == 32
    assert not any(k.startswith("tts_agent_voices") for k in samples)  # lists are left out
    # each reason is a series of its own, its text escaped (quote, newline)
    assert samples["tts_agent_health_reasons"] == 1
    reasons = [k for k in samples if k.startswith("tts_agent_health_reason{")]
    assert reasons == ['tts_agent_health_reason{reason="audio device unavailable: no \\"card\\" '
                       'here\\nat all"}'], reasons
    types = exposition_types(text)
    assert {name for name, kind in types.items() if kind == "counter"} == {
        "tts_agent_requests_total", "tts_agent_audio_underruns_total",
        "tts_agent_mqtt_reconnects_total"}
    assert all(kind == "gauge" for name, kind in types.items() if not name.endswith("_total"))


def test_reason_series_are_bounded_and_unique(health: Health) -> None:
    snap = health.snapshot()
    long = "x" * (MAX_REASON_CHARS + 50)
    snap["reasons"] = [long, long + "y", "a\\b", *(f"r{i}" for i in range(20))]
    samples = parse_exposition(render(snap))
    reasons = [k for k in samples if k.startswith("tts_agent_health_reason{")]
    assert reasons[:2] == ['tts_agent_health_reason{reason="' + "x" * (MAX_REASON_CHARS - 3)
                           + '..."}', 'tts_agent_health_reason{reason="a\\\\b"}']
    assert len(reasons) == 10 and samples["tts_agent_health_reasons"] == 23


def test_every_number_of_a_typed_section_is_a_counter_or_a_gauge() -> None:
    """A new field must be classified: a count since start is a counter, the rest gauges."""
    from typing import get_args, get_type_hints

    from agent.health import report

    def numeric(hint: Any) -> bool:
        return hint in (int, float, bool) or any(numeric(arg) for arg in get_args(hint))

    from agent.audio import stats
    from agent.health.snapshot import FIXED_KEYS

    names = {name: getattr(stats, name) for name in ("DeviceInfo", "PlayerState", "VolumeControl")}
    hints = get_type_hints(HealthReport)
    sections = set(hints) - FIXED_KEYS
    assert {"audio", "mqtt", "wyoming"} <= sections
    for section in sections:
        typed = get_args(hints[section])[0]  # X | ProviderError
        assert typed.__module__ == report.__name__, section
        for key, hint in get_type_hints(typed, localns=names).items():
            if numeric(hint):
                known = COUNTERS.get(section, frozenset()) | GAUGES.get(section, frozenset())
                assert key in known, f"{section}.{key}: add it to COUNTERS or GAUGES"


def test_textfile_is_replaced_atomically(tmp_path: Path) -> None:
    target = tmp_path / "textfile" / "tts_agent.prom"
    write_textfile(target, "a 1\n")
    write_textfile(target, "a 2\n")
    assert target.read_text() == "a 2\n"
    assert target.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in target.parent.iterdir()] == ["tts_agent.prom"]


# -- the reporter --------------------------------------------------------------------------

def test_reporter_publishes_at_once_on_a_change_and_on_request(
    settings: Settings, tmp_path: Path,
) -> None:
    fast = settings.model_copy(update={"health": settings.health.model_copy(update={
        "interval_s": 3600.0, "state_check_s": 0.5,
        "prometheus_file": tmp_path / "prom" / "tts_agent.prom"})})
    probe = SystemProbe(tmp_path, sysroot=fake_sysroot(tmp_path / "root"))
    health = Health(fast, probe=probe)
    sections = healthy_providers(health)
    notify = NotifySocket(tmp_path / "notify")
    published: queue.Queue[HealthReport] = queue.Queue()
    reporter = HealthReporter(health, publish=published.put, notifier=Notifier(notify.address))
    reporter.start()
    try:
        first = published.get(timeout=10)
        assert first["state"] == "ok"
        status = notify.receive()
        assert status is not None and status.fields == {"STATUS": "ok; served 0, failed 0"}

        sections["mqtt"]["connected"] = False  # the interval is an hour away
        changed = published.get(timeout=10)
        assert (changed["state"], changed["reasons"]) == ("degraded", ["mqtt disconnected"])
        status = notify.receive()
        assert status is not None
        assert status.fields == {"STATUS": "degraded: mqtt disconnected; served 0, failed 0"}
        prom = parse_exposition(fast.health.prometheus_file.read_text())  # type: ignore[union-attr]
        assert prom['tts_agent_health_state{state="degraded"}'] == 1

        reporter.request()
        again = published.get(timeout=10)
        assert again["state"] == "degraded"
    finally:
        reporter.stop()
        notify.close()
    assert reporter.published == 3
    assert published.empty()
    assert os.listdir(tmp_path / "prom") == []  # a clean stop deletes the textfile


def test_the_voice_library_status_is_a_provider(tiny_voice_dir: Path, tmp_path: Path) -> None:
    from agent.daemon.health import voices_section
    from agent.library.voices import VoiceLibrary

    settings = Settings(device_id="t1", cache={"dir": tmp_path / "cache"},
                        models={"dir": tiny_voice_dir.parent,
                                "default_voice": tiny_voice_dir.name},
                        health={"disk_min_free_mb": 1})
    probe = SystemProbe(tmp_path, sysroot=fake_sysroot(tmp_path / "root"))
    health = Health(settings, probe=probe)
    library = VoiceLibrary(settings)
    health.add_provider("voices", lambda: voices_section(library))
    snap = health.snapshot()
    assert (snap["state"], snap["reasons"]) == ("failing", [
        "no voice loaded: models.default_voice 'tiny-test' is not loaded yet "
        "(installed: tiny-test)"])
    library.load_all()
    snap = json.loads(json.dumps(health.snapshot()))
    assert (snap["state"], snap["reasons"]) == ("ok", [])
    assert [v["voice"] for v in snap["voices"]["voices"]] == [tiny_voice_dir.name]
    from agent.health.report import LoadedVoice, ReloadRecord, VoicesSection

    assert set(snap["voices"]) == set(VoicesSection.__required_keys__)
    # the build the voice phonemizes with, named (agent.text.espeak.describe)
    assert snap["voices"]["espeak"].startswith("espeak-ng 1.")
    assert " build" in snap["voices"]["espeak"]
    assert set(snap["voices"]["voices"][0]) == set(LoadedVoice.__required_keys__)
    assert set(snap["voices"]["last_reload"][tiny_voice_dir.name]) == set(
        ReloadRecord.__required_keys__)


def test_a_section_may_give_its_own_verdict(health: Health) -> None:
    sections = healthy_providers(health)
    sections["audio"] = {"state": "degraded", "reason": "device busy", "underruns": 0}
    health.remove_provider("audio")
    health.add_provider("audio", lambda: sections["audio"])
    snap = health.snapshot()
    assert (snap["state"], snap["reasons"]) == ("degraded",
                                                ["audio device unavailable: device busy"])
    sections["audio"] = {"state": "failing", "reason": "no output at all"}
    assert health.snapshot()["state"] == "failing"


# -- the typed report matches what is built ------------------------------------------------

def keys_of(typed: Any) -> set[str]:
    """Every key a TypedDict declares, required or not."""
    return set(typed.__required_keys__ | typed.__optional_keys__)


def test_the_report_types_name_every_key_the_snapshot_has(health: Health) -> None:
    from agent.health.report import (
        HealthReport,
        Quantiles,
        RequestsSection,
        RequestWindow,
        SystemSection,
        ThermalZone,
        WorkerReport,
    )

    health.liveness.watch("synthesis", busy_since=lambda: None)  # type: ignore[union-attr]
    health.record_request("finished", synthesis_s=0.2, audio_s=1.0, first_audio_s=0.1)
    snap = health.snapshot()
    assert set(snap) == set(HealthReport.__required_keys__)
    assert set(snap["requests"]) == keys_of(RequestsSection)
    assert set(snap["requests"]["window"]) == keys_of(RequestWindow)
    assert set(snap["requests"]["synthesis_s"] or {}) == keys_of(Quantiles)
    assert set(snap["workers"]["synthesis"]) == keys_of(WorkerReport)
    assert set(snap["system"]) == keys_of(SystemSection)
    assert set(snap["system"]["thermal_zones"][0]) == keys_of(ThermalZone)
    assert set(health.compact()) == {"state", "reasons"}


def test_the_daemon_sections_have_the_keys_their_types_name(
    settings: Settings, tmp_path: Path,
) -> None:
    from agent.daemon.health import mqtt_section, phrase_cache_section
    from agent.health.report import MqttSection, PhraseCacheSection
    from agent.pipeline.phrase_cache import PhraseCache

    off = mqtt_section(None, settings.mqtt)
    assert off == {"enabled": False, "connected": False}
    assert set(off) == set(MqttSection.__required_keys__)
    assert phrase_cache_section(None) == {"enabled": False}
    section = phrase_cache_section(PhraseCache(tmp_path / "phrases", 1 << 20))
    assert set(section) == keys_of(PhraseCacheSection)
    assert section["enabled"] is True and section["entries"] == 0
