"""A failing sink keeps the player degraded until a real write gets through (#15 item 9).

alsa-lib's ``file`` PCM (truncating, as the system's ``file:`` PCM) opens without an error
when its directory is gone and fails only when it writes to the file, which it does once more
than a buffer of frames is queued. A recovery probe that wrote one period of silence and
stopped never reached the file, so health went back to ``ok`` between speak requests that
all failed. Real alsa-lib into a real file PCM; the directory is really deleted.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agent.mqtt.topics import Namespace
from tests.support.alsa_sink import (
    AlsaConfig,
    audio_settings,
    closed_item,
    read_samples,
    running_player,
    tone,
    trim_silence,
    wait_until,
)
from tests.support.broker import (
    Broker,
    Recorder,
    agent_settings,
    alsa_file_device,
    running_agent,
)

pytestmark = pytest.mark.alsa

DEV = Namespace("tts").device("t1")

FAILED_SPEAKS = 3
PROBES_PER_CHECK = 2


def test_a_sink_whose_directory_was_deleted_stays_degraded_until_a_write_lands(
    alsa: AlsaConfig, tmp_path: Path,
) -> None:
    sink_dir = tmp_path / "sink"
    sink_dir.mkdir()
    out = alsa.add_file("spk", sink_dir / "out.raw", truncate=True)
    # keep_open_s 0: every request opens the PCM again, as after an idle pause.
    with running_player(audio_settings("spk", keep_open_s=0.0)) as (player, events):
        player.submit(closed_item("before", tone(0.2, 440)))
        events.wait_for("finished", "before")
        assert player.stats()["state"] == "ok"

        shutil.rmtree(sink_dir)
        for n in range(FAILED_SPEAKS):
            player.submit(closed_item(f"lost-{n}", tone(0.2, 440)))
            failed = events.wait_for("failed", f"lost-{n}")
            assert failed.reason, "a failed request says why"
            probes = player.stats()["recovery_probes"]

            def probed_or_ok(p: int = probes) -> bool:
                stats = player.stats()
                return stats["recovery_probes"] >= p + PROBES_PER_CHECK or stats["state"] == "ok"

            wait_until(probed_or_ok, "the lost device is probed again (or called healthy)")
            stats = player.stats()
            assert stats["state"] == "degraded", (
                f"reported ok again while the sink still fails (after speak {n} failed)")
            assert stats["reason"]

        sink_dir.mkdir()  # the sink is back: the next probe's silence reaches the file
        wait_until(lambda: player.stats()["state"] == "ok", "the player recovers by itself")
        assert player.stats()["reason"] is None
        samples = tone(0.3, 550)
        player.submit(closed_item("after", samples))
        events.wait_for("finished", "after")
    played, _, _ = trim_silence(read_samples(out)[:, 0])
    assert np.array_equal(played, samples)


def test_probes_while_healthy_are_not_counted(alsa: AlsaConfig) -> None:
    alsa.add_file("spk")
    with running_player(audio_settings("spk")) as (player, events):
        player.submit(closed_item("r1", tone(0.2, 440)))
        events.wait_for("finished", "r1")
        stats = player.stats()
    assert (stats["state"], stats["recovery_probes"], stats["device_errors"]) == ("ok", 0, 0)


@pytest.mark.broker
def test_the_agent_reports_degraded_between_speaks_that_fail_on_a_deleted_sink(
    mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path,
) -> None:
    sink_dir = tmp_path / "sink"
    sink_dir.mkdir()
    settings = agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent", audio={
        "device": alsa_file_device(sink_dir / "out.raw"), "keep_open_s": 0.0,
        "reopen_interval_s": 0.05})

    def final(rec: Recorder, request_id: str) -> dict[str, Any]:
        return rec.wait_json(DEV.events, lambda e: e["id"] == request_id and e["final"], 30)

    with running_agent(settings) as service, Recorder(
            mqtt_broker.settings(), [DEV.events.as_filter(), DEV.status.as_filter()],
            "controller") as ctl:
        ctl.wait_json(DEV.status, lambda p: p["state"] == "online")
        ctl.publish(DEV.command("speak"), {"id": "before", "text": "Hello."})
        assert final(ctl, "before")["event"] == "finished"

        shutil.rmtree(sink_dir)
        for n in range(FAILED_SPEAKS):
            ctl.publish(DEV.command("speak"), {"id": f"lost-{n}", "text": "Is anyone there?"})
            assert final(ctl, f"lost-{n}")["event"] == "failed"
            probes = service.player.stats()["recovery_probes"]

            def probed_or_ok(p: int = probes) -> bool:
                stats = service.player.stats()
                return stats["recovery_probes"] >= p + PROBES_PER_CHECK or stats["state"] == "ok"

            wait_until(probed_or_ok, "the lost device is probed again (or called healthy)")
            snap = service.health.snapshot()
            assert snap["state"] == "degraded", f"health {snap['state']} after speak {n} failed"
            assert snap["audio"]["state"] == "degraded" and snap["audio"]["reason"]

        sink_dir.mkdir()
        wait_until(lambda: service.health.snapshot()["state"] == "ok", "health is ok again")
        ctl.publish(DEV.command("speak"), {"id": "after", "text": "Back again."})
        assert final(ctl, "after")["event"] == "finished"
