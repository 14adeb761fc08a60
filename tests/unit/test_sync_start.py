"""A synchronized start's arithmetic and its place in the play queue (#30): the silence that puts
the first sample at its time, lateness, and items held apart until shortly before it."""

from __future__ import annotations

import time

import pytest

from agent.audio.item import PRIORITY_URGENT, PlayItem
from agent.audio.queue import PlayQueue, QueueFull
from agent.audio.sync_start import SyncStart, frames_to_go, lead_ms, placed, prepare_s
from agent.mqtt.protocol import SpeakCommand
from agent.pipeline.admit import Ask, Code, Context, Refusal, admit


def test_frames_to_go_takes_what_the_device_holds_and_the_latency_off() -> None:
    # 0.5 s ahead at 22050 Hz; 2048 frames queued in ALSA; 441 (20 ms) after it.
    assert frames_to_go(10.5, 10.0, 22050, 2048, 441) == 11025 - 2048 - 441
    assert frames_to_go(10.0, 10.1, 22050, 0, 0) == -2205  # 100 ms late
    on_time, late = placed(300, 22050), placed(-2205, 22050)
    assert (on_time.silence, on_time.skip, on_time.late_ms) == (300, 0, 0.0)
    assert (late.silence, late.skip, late.late_ms) == (0, 2205, 100.0)


def test_the_lead_a_device_asks_for_covers_its_first_audio_and_its_buffer() -> None:
    assert prepare_s(0.1, 40.0) == pytest.approx(0.1 + 0.04 + 0.5)
    assert prepare_s(None, 0.0) == pytest.approx(1.0)  # closed: a buffer is assumed
    assert lead_ms(0.231, 0.093, 0.0) == 830  # rounded up to 10 ms
    assert lead_ms(None, None, 0.0) == 2000  # no request yet: a second of first audio


def test_the_two_clocks_agree_on_the_start() -> None:
    at = time.time() + 2.0
    start = SyncStart.from_unix(at, "skip")
    assert start.late == "skip"
    assert abs((start.at - time.monotonic()) - (at - time.time())) < 0.05
    assert start.release_at(0.75) == pytest.approx(start.at - 0.75)


def _sync(request_id: str, ahead_s: float, priority: int = 0) -> PlayItem:
    return PlayItem(request_id, priority=priority,
                    sync=SyncStart.from_unix(time.time() + ahead_s))


def test_a_held_item_is_invisible_until_its_release() -> None:
    queue = PlayQueue(3)
    held = _sync("sync", 5.0, priority=PRIORITY_URGENT)
    queue.push(held)
    queue.push(PlayItem("plain"))
    assert len(queue) == 2
    # An urgent synchronized item waiting for its time interrupts nothing and goes nowhere.
    assert queue.head() is not None and queue.head().request_id == "plain"
    wait = queue.release_due(time.monotonic(), prepare_s=1.0)
    assert wait is not None and 3.5 < wait < 4.5
    assert [queue.pop().request_id for _ in range(1)] == ["plain"]
    assert queue.pop() is None
    assert queue.release_due(time.monotonic() + 4.5, prepare_s=1.0) is None
    assert queue.pop() is held


def test_held_items_count_expire_and_flush_like_queued_ones() -> None:
    queue = PlayQueue(2)
    queue.push(_sync("a", 5.0))
    queue.push(_sync("b", 5.0))
    with pytest.raises(QueueFull):
        queue.push(_sync("c", 5.0))
    expiring = PlayItem("d", expires_at=time.monotonic() + 0.01,
                        sync=SyncStart.from_unix(time.time() + 5))
    queue = PlayQueue(4)
    queue.push(expiring)
    queue.push(_sync("e", 5.0))
    assert queue.take_expired(time.monotonic() + 0.02) == [expiring]
    assert [i.request_id for i in queue.take_all()] == ["e"]
    assert len(queue) == 0


def test_at_is_admitted_in_ms_and_refused_when_far_ahead() -> None:
    context = Context(max_text_chars=100)
    at_ms = (time.time() + 5) * 1000
    admitted = admit(Ask("Hello.", at_ms=at_ms), context)
    assert not isinstance(admitted, Refusal)
    assert admitted.request.start_at == pytest.approx(at_ms / 1000)
    past = admit(Ask("Hello.", at_ms=(time.time() - 5) * 1000), context)
    assert not isinstance(past, Refusal)  # a start already past is late, not wrong
    microseconds = admit(Ask("Hello.", at_ms=(time.time() + 5) * 1e6), context)
    assert isinstance(microseconds, Refusal) and microseconds.code is Code.BAD_REQUEST
    assert "more than 60 minutes ahead" in microseconds.reason
    with pytest.raises(ValueError, match="greater than 0"):
        SpeakCommand.model_validate({"text": "x", "at": -5})


def test_a_clock_offset_is_the_pong_time_less_the_midpoint_within_half_the_round_trip() -> None:
    from agent.mqtt.clock_offset import ClockOffset, clock_offset, disagreement_ms

    assert clock_offset(100.0, 100.010, 100.105) == ClockOffset(100.0, 10.0)
    assert clock_offset(100.0, 100.010, "soon") is None and clock_offset(1, 0, 0.5) is None
    assert clock_offset(100.0, 100.010, True) is None
    near = [ClockOffset(0.0, 10.0), ClockOffset(4.0, 10.0)]  # bounds overlap: could agree
    assert disagreement_ms(near) == 0.0
    apart = [ClockOffset(-30.0, 10.0), ClockOffset(40.0, 20.0)]
    assert disagreement_ms(apart) == 40.0 - 10.0 - (-30.0 + 5.0)  # 30 - (-25) = 55 ms


def test_sync_warns_when_the_members_clocks_disagree() -> None:
    import argparse

    from agent.commands.send_sync import choose_start
    from agent.mqtt.clock_offset import ClockOffset
    from agent.mqtt.fleet_view import DeviceRecord, FleetView
    from agent.mqtt.topics import Namespace

    view = FleetView(Namespace("tts"), default_interval_s=30)
    for device, offset in (("a", 0.0), ("b", 2.0), ("c", 80.0)):
        view._records[device] = record = DeviceRecord(device)
        record.status, record.groups, record.sync_lead_ms = "online", ("hall",), 900.0
        record.clock = ClockOffset(offset, 4.0)
    args = argparse.Namespace(sync=True, lead=None, group="hall", device=None, at=None,
                              sync_target=20.0)
    lines = choose_start(args, view)
    assert lines[0].startswith("synchronized start at") and "asks for 0.90 s" in lines[0]
    assert args.at is not None
    assert "disagree by at least 76 ms" in lines[1] and "c +80.0 ms" in lines[1], lines
    view._records["c"].clock = ClockOffset(5.0, 4.0)
    assert len(choose_start(args, view)) == 1  # within the target: no warning
