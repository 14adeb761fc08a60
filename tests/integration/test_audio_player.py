"""AudioPlayer through real alsa-lib into file PCMs: the bytes that reach the file."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from agent.audio.item import PRIORITY_NORMAL, PRIORITY_URGENT, PlayItem
from agent.audio.queue import QueueFull
from tests.support.alsa_sink import (
    VOICE_FORMAT,
    AlsaConfig,
    audio_settings,
    chunk,
    closed_item,
    read_samples,
    running_player,
    tone,
    trim_silence,
    wait_until,
)

pytestmark = pytest.mark.alsa


def test_sentences_reach_the_file_in_order_whole_and_followed_by_silence(
    alsa: AlsaConfig,
) -> None:
    out = alsa.add_file("spk")
    sentences = [tone(0.4, 440), tone(0.25, 660), tone(0.3, 330)]
    with running_player(audio_settings("spk")) as (player, events):
        player.submit(closed_item("r1", *sentences))
        finished = events.wait_for("finished", "r1")
        buffer_frames = player.stats()["device"]["buffer_frames"]
        assert events.kinds("r1") == ["started", "finished"]
    expected = np.concatenate(sentences)
    assert finished.audio_seconds == pytest.approx(len(expected) / 22050, abs=1e-3)

    played, _, trailing = trim_silence(read_samples(out)[:, 0])
    assert np.array_equal(played, expected)  # nothing clipped, reordered or altered
    assert trailing >= buffer_frames  # the end was pushed out of the buffer, not cut


def test_first_sentence_plays_while_the_next_is_still_being_synthesized(
    alsa: AlsaConfig,
) -> None:
    out = alsa.add_file("spk")
    first, second = tone(0.3, 440), tone(0.3, 550)
    item = PlayItem("r1", format=VOICE_FORMAT)
    assert item.put(chunk(first))
    with running_player(audio_settings("spk")) as (player, events):
        player.submit(item)
        events.wait_for("started", "r1")  # only the first sentence exists so far
        assert item.result is None
        assert item.put(chunk(second))
        item.close()
        events.wait_for("finished", "r1")

    played, _, _ = trim_silence(read_samples(out)[:, 0])
    assert np.array_equal(played[: len(first)], first)
    gap = played[len(first): len(played) - len(second)]
    assert not np.any(gap)  # while waiting, silence keeps the stream fed
    assert np.array_equal(played[len(played) - len(second):], second)


def test_request_and_device_volume_scale_the_samples(alsa: AlsaConfig) -> None:
    out = alsa.add_file("spk")
    samples = tone(0.3, 440, level=0.5, offset=0.3)
    with running_player(audio_settings("spk", volume=0.5)) as (player, events):
        player.submit(closed_item("quiet", samples, volume=0.5))
        events.wait_for("finished", "quiet")
    played, _, _ = trim_silence(read_samples(out)[:, 0])
    assert np.array_equal(played, np.rint(samples * 0.25).astype(np.int16))


def test_lead_in_silence_precedes_the_utterance(alsa: AlsaConfig) -> None:
    out = alsa.add_file("spk")
    with running_player(audio_settings("spk", lead_in_ms=100)) as (player, events):
        player.submit(closed_item("r1", tone(0.2, 440)))
        events.wait_for("finished", "r1")
        period = player.stats()["device"]["period_frames"]
    _, leading, _ = trim_silence(read_samples(out)[:, 0])
    assert leading == period + 2205  # start-up probe (one period) + 100 ms lead-in


def test_urgent_item_preempts_with_a_fade_and_plays_before_queued_normal_items(
    alsa: AlsaConfig,
) -> None:
    sink = alsa.add_fifo("spk")
    long_normal, urgent, queued = tone(10.0, 300), tone(0.3, 880), tone(0.2, 500)
    settings = audio_settings("spk", fade_ms=20)
    with running_player(settings) as (player, events):
        player.submit(closed_item("normal", long_normal))
        events.wait_for("started", "normal")  # blocked on the pipe, mid-utterance
        period = player.stats()["device"]["period_frames"]
        player.submit(closed_item("later", queued))
        player.submit(closed_item("alarm", urgent, priority=PRIORITY_URGENT))
        sink.release()
        interrupted = events.wait_for("interrupted", "normal")
        events.wait_for("finished", "later")
        order = [e.request_id for e in events.seen if e.kind == "started"]
    played, _, _ = trim_silence(read_samples(sink.finish())[:, 0])

    assert interrupted.reason == "preempted by alarm"
    assert order == ["normal", "alarm", "later"]
    # Untouched prefix of the normal item, cut on a period boundary.
    cut = int(np.argmax(played[: len(long_normal)] != long_normal[: len(played)]))
    cut -= cut % period
    assert 0 < cut < len(long_normal) - 22050
    assert np.array_equal(played[:cut], long_normal[:cut])
    # Then a 20 ms fade of the same audio down to silence: smooth, no step.
    fade = round(22050 * 0.020)
    ratio = played[cut:cut + fade] / long_normal[cut:cut + fade]
    assert ratio[0] > 0.99
    assert ratio[-1] == 0.0
    assert np.all(np.diff(ratio) <= 1e-3)
    assert np.max(np.abs(np.diff(ratio))) < 0.01
    # Then the urgent item whole, then the queued normal one, nothing else.
    rest = played[cut + fade:]
    assert np.array_equal(rest, np.concatenate([urgent, queued]))


def test_stop_cuts_at_once_and_flush_drops_the_queue(alsa: AlsaConfig) -> None:
    sink = alsa.add_fifo("spk")
    long_item, queued, after = tone(10.0, 300), tone(0.3, 500), tone(0.3, 700)
    with running_player(audio_settings("spk")) as (player, events):
        player.submit(closed_item("long", long_item))
        player.submit(closed_item("queued", queued))
        events.wait_for("started", "long")
        period = player.stats()["device"]["period_frames"]
        player.stop(flush=True)
        player.submit(closed_item("after", after))  # submitted after stop: plays
        sink.release()
        stopped = events.wait_for("interrupted", "long")
        flushed = events.wait_for("interrupted", "queued")
        events.wait_for("finished", "after")
        assert player.stats()["queue_depth"] == 0
    played, _, _ = trim_silence(read_samples(sink.finish())[:, 0])

    assert stopped.reason == "stopped"
    assert flushed.reason == "flushed by stop"
    assert "started" not in events.kinds("queued")
    cut = len(played) - len(after)
    assert np.array_equal(played[cut:], after)
    assert 0 < cut < len(long_item) - 22050 and cut % period == 0  # cut on a period, no tail
    assert np.array_equal(played[:cut], long_item[:cut])


def test_stop_without_flush_plays_the_next_item_and_refuses_more_audio(
    alsa: AlsaConfig,
) -> None:
    out = alsa.add_file("spk")
    first, nxt = tone(0.3, 440), tone(0.3, 660)
    open_item = PlayItem("open")
    assert open_item.put(chunk(first))  # synthesis still running: the item stays open
    with running_player(audio_settings("spk")) as (player, events):
        player.submit(open_item)
        player.submit(closed_item("next", nxt))
        events.wait_for("started", "open")
        player.stop()
        assert events.wait_for("interrupted", "open").reason == "stopped"
        events.wait_for("finished", "next")
        assert open_item.put(chunk(first)) is False  # the producer learns to stop
    played, _, _ = trim_silence(read_samples(out)[:, 0])
    cut = len(played) - len(nxt)
    assert 0 < cut <= len(first)  # stopped wherever it was, then the next item whole
    assert np.array_equal(played[:cut], first[:cut])
    assert np.array_equal(played[cut:], nxt)


def test_expired_items_are_dropped_not_played_late(alsa: AlsaConfig) -> None:
    out = alsa.add_file("spk")
    blocker, stale, fresh = tone(0.2, 440), tone(0.2, 990), tone(0.2, 660)
    holding = PlayItem("holding")
    assert holding.put(chunk(blocker))
    with running_player(audio_settings("spk")) as (player, events):
        player.submit(holding)
        events.wait_for("started", "holding")
        player.submit(closed_item("stale", stale, expires_at=time.monotonic() - 1))
        player.submit(closed_item("fresh", fresh, expires_at=time.monotonic() + 3600))
        expired = events.wait_for("expired", "stale")
        holding.close()
        events.wait_for("finished", "fresh")
    assert expired.audio_seconds == 0.0
    assert events.kinds("stale") == ["expired"]
    played, _, _ = trim_silence(read_samples(out)[:, 0])
    assert np.array_equal(played[: len(blocker)], blocker)
    assert not np.any(played[len(blocker): len(played) - len(fresh)])  # waited in silence
    assert np.array_equal(played[len(played) - len(fresh):], fresh)


def test_full_queue_raises_and_loses_nothing_already_queued(alsa: AlsaConfig) -> None:
    alsa.add_file("spk")
    holding = PlayItem("holding")
    assert holding.put(chunk(tone(0.1, 440)))
    with running_player(audio_settings("spk", queue_max=1)) as (player, events):
        player.submit(holding)
        events.wait_for("started", "holding")
        player.submit(closed_item("queued", tone(0.1, 550)))
        with pytest.raises(QueueFull, match="play queue full"):
            player.submit(closed_item("rejected", tone(0.1, 660)))
        holding.close()
        events.wait_for("finished", "queued")
        assert events.kinds("rejected") == []


def test_producer_failure_fades_out_and_reports_the_reason(alsa: AlsaConfig) -> None:
    alsa.add_file("spk")
    item = PlayItem("r1", priority=PRIORITY_NORMAL)
    assert item.put(chunk(tone(0.2, 440)))
    with running_player(audio_settings("spk")) as (player, events):
        player.submit(item)
        events.wait_for("started", "r1")
        item.fail("phonemizer crashed")
        failed = events.wait_for("failed", "r1")
        assert player.stats()["failed"] == 1
    assert failed.reason == "phonemizer crashed"
    assert 0 < failed.audio_seconds <= 0.2
    with pytest.raises(RuntimeError):
        item.put(chunk(tone(0.1, 440)))


def test_software_volume_change_ramps_smoothly(alsa: AlsaConfig) -> None:
    sink = alsa.add_fifo("spk")
    samples = tone(10.0, 300, level=0.25, offset=0.4)
    with running_player(audio_settings("spk", volume_ramp_ms=50)) as (player, events):
        player.submit(closed_item("r1", samples))
        events.wait_for("started", "r1")
        player.set_volume(0.25)
        sink.release()
        events.wait_for("finished", "r1")
        assert player.stats()["volume"] == 0.25
    played, _, _ = trim_silence(read_samples(sink.finish())[:, 0])
    assert len(played) == len(samples)
    ratio = played / samples
    start = int(np.argmax(ratio < 0.9999))
    assert start > 0 and np.all(np.abs(ratio[:start] - 1) < 1e-3)
    ramp_frames = 0.05 * 22050
    assert np.all(np.diff(ratio[start:]) <= 2e-4)  # only ever down
    assert np.max(np.abs(np.diff(ratio))) <= 1 / ramp_frames + 2e-4  # no step: a ramp
    assert np.all(np.abs(ratio[start + round(0.75 * ramp_frames) + 5:] - 0.25) < 2e-3)


def test_mono_voice_on_a_48k_stereo_device_resampled_in_software(alsa: AlsaConfig) -> None:
    out = alsa.add_file("spk")
    samples = tone(1.0, 440)
    settings = audio_settings("spk", rate=48000, channels=2)
    with running_player(settings) as (player, events):
        player.submit(closed_item("r1", samples))
        finished = events.wait_for("finished", "r1")
        device = player.stats()["device"]
    assert (device["rate"], device["channels"]) == (48000, 2)
    assert finished.audio_seconds == pytest.approx(1.0, abs=1e-3)

    played, _, _ = trim_silence(read_samples(out, channels=2))
    assert played.shape == (48000, 2)  # exactly one second at 48 kHz
    assert np.array_equal(played[:, 0], played[:, 1])
    left = played[:, 0].astype(np.float64)
    spectrum = np.abs(np.fft.rfft(left - left.mean()))
    assert abs(np.fft.rfftfreq(len(left), 1 / 48000)[np.argmax(spectrum)] - 440) <= 1.0


def test_mono_voice_through_alsa_plug_into_a_48k_stereo_file(alsa: AlsaConfig) -> None:
    alsa.add_file("raw48")
    out = alsa.directory / "raw48.raw"
    alsa.add_plug("spk", "raw48", 48000, 2)
    with running_player(audio_settings("spk")) as (player, events):
        player.submit(closed_item("r1", tone(1.0, 440)))
        events.wait_for("finished", "r1")
        device = player.stats()["device"]
    assert (device["rate"], device["channels"]) == (22050, 1)  # plug took the voice format

    played, _, _ = trim_silence(read_samples(out, channels=2))
    assert abs(len(played) - 48000) <= 48  # one second at 48 kHz, within 1 ms
    assert np.array_equal(played[:, 0], played[:, 1])


def test_bad_device_then_available_player_survives_and_recovers(alsa: AlsaConfig) -> None:
    settings = audio_settings("spk")
    with running_player(settings) as (player, events):
        wait_until(lambda: player.stats()["state"] == "degraded", "the player reports degraded")
        assert "spk" in player.stats()["reason"]
        player.submit(closed_item("early", tone(0.2, 440)))
        failed = events.wait_for("failed", "early")
        assert failed.reason is not None
        assert "cannot open ALSA device 'spk'" in failed.reason

        out = alsa.add_file("spk")  # the device appears
        wait_until(lambda: player.stats()["state"] == "ok", "the player recovers by itself")
        assert player.stats()["reason"] is None
        samples = tone(0.3, 550)
        player.submit(closed_item("late", samples))
        events.wait_for("finished", "late")
        assert player.stats()["device_errors"] >= 1
    played, _, _ = trim_silence(read_samples(out)[:, 0])
    assert np.array_equal(played, samples)


def test_file_device_in_a_missing_directory_recovers_when_it_appears(
    alsa: AlsaConfig, tmp_path: Path
) -> None:
    out = alsa.add_file("spk", tmp_path / "later" / "out.raw")
    with running_player(audio_settings("spk")) as (player, events):
        wait_until(lambda: player.stats()["state"] == "degraded", "the player reports degraded")
        (tmp_path / "later").mkdir()
        wait_until(lambda: player.stats()["state"] == "ok", "the player recovers by itself")
        samples = tone(0.2, 440)
        player.submit(closed_item("r1", samples))
        events.wait_for("finished", "r1")
    played, _, _ = trim_silence(read_samples(out)[:, 0])
    assert np.array_equal(played, samples)


def test_device_lost_between_utterances_then_back(alsa: AlsaConfig) -> None:
    out = alsa.add_file("spk")
    first, last = tone(0.2, 440), tone(0.2, 660)
    with running_player(audio_settings("spk", keep_open_s=0.0)) as (player, events):
        player.submit(closed_item("one", first))
        events.wait_for("finished", "one")
        wait_until(lambda: player.stats()["device"] is None, "the idle device is closed")

        alsa.remove("spk")  # unplugged
        player.submit(closed_item("two", tone(0.2, 550)))
        assert "spk" in (events.wait_for("failed", "two").reason or "")
        assert player.stats()["state"] == "degraded"

        alsa.add_file("spk", out)  # plugged back in
        wait_until(lambda: player.stats()["state"] == "ok", "the player recovers by itself")
        player.submit(closed_item("three", last))
        events.wait_for("finished", "three")
    played, _, _ = trim_silence(read_samples(out)[:, 0])
    assert np.array_equal(played[: len(first)], first)
    assert np.array_equal(played[len(played) - len(last):], last)


def test_device_failing_mid_utterance_fails_the_request_and_recovers(
    alsa: AlsaConfig,
) -> None:
    sink = alsa.add_fifo("spk")
    with running_player(audio_settings("spk")) as (player, events):
        player.submit(closed_item("doomed", tone(10.0, 300)))
        events.wait_for("started", "doomed")
        sink.unplug()  # the USB speaker goes away while the player writes
        failed = events.wait_for("failed", "doomed")
        assert "failed" in (failed.reason or "")
        assert player.stats()["state"] == "degraded"
        assert player.stats()["device_errors"] == 1

        sink.replug()
        wait_until(lambda: player.stats()["state"] == "ok", "the player recovers by itself")
        sink.release()
        samples = tone(0.3, 550)
        player.submit(closed_item("after", samples))
        events.wait_for("finished", "after")
    played, _, _ = trim_silence(read_samples(sink.finish())[:, 0])
    assert np.array_equal(played[len(played) - len(samples):], samples)


def test_stats_carry_exactly_the_typed_keys(alsa: AlsaConfig) -> None:
    from agent.audio.stats import DeviceInfo, PlayerStats

    alsa.add_file("spk")
    with running_player(audio_settings("spk")) as (player, events):
        player.submit(closed_item("r1", tone(0.2, 440)))
        events.wait_for("finished", "r1")
        stats = player.stats()
        assert list(stats) == list(PlayerStats.__annotations__)  # the health report's order
        device = stats["device"]
        assert device is not None and list(device) == list(DeviceInfo.__annotations__)
        assert (stats["started"], stats["finished"], stats["state"]) == (1, 1, "ok")
        assert stats["seconds_played"] == pytest.approx(0.2, abs=1e-3)
        assert stats["alive"] and stats["playing"] is None and stats["queue_depth"] == 0
    assert not player.stats()["alive"]
