"""Synchronized starts through the real player and alsa-lib (#30): the first sample reaches the
"speaker" at its time, a late device joins at the sample due or does not play, and a start
waiting for its time blocks nothing.

The card is :mod:`tests.support.clock_card`: an alsa-lib I/O plugin that plays in real time, so
ALSA's delay is true as on a sound card, and records the moment each frame was due. The audio
counts (sample value ``n`` is the utterance's frame ``n - 1``), so what was played, and when,
can be read back exactly. How far off a start is, is measured by ``bench/sync_start.py``; the
bounds here only tell a placed start from one off by a buffer or more.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from agent.audio.player import AudioPlayer
from agent.audio.sync_start import SyncStart
from agent.outcomes import Outcome, Progress
from tests.support.alsa_sink import (
    VOICE_RATE,
    AlsaConfig,
    Events,
    audio_settings,
    closed_item,
    running_player,
    tone,
)
from tests.support.clock_card import ClockCard

pytestmark = pytest.mark.alsa

PLACED_S = 0.015  # a start placed by ALSA's delay is within this; one ignoring it is a buffer off
JOINED_S = 0.05
"""A late join is placed when its skip is decided: a player thread held up by a busy machine
between the decision and the write puts it later (46 ms once, under a 12-worker suite); one
that ignored the delay or played from the beginning is a buffer (93 ms) or the whole lateness
(300 ms) off."""


def counting(seconds: float) -> np.ndarray:
    """Mono int16 samples 1, 2, 3, ...: a played value names its frame in the utterance."""
    return np.arange(1, round(seconds * VOICE_RATE) + 1, dtype=np.int16)


@pytest.fixture()
def card(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ClockCard:
    return AlsaConfig(tmp_path, monkeypatch).add_clock("card")


@pytest.fixture()
def player(card: ClockCard) -> Iterator[tuple[AudioPlayer, Events]]:
    with running_player(audio_settings("card", period_frames=512, buffer_periods=4)) as pair:
        yield pair


def first_played(card: ClockCard, after: int) -> tuple[int, int]:
    """(index in the card's record, counting value) of the first counting frame played after
    record index ``after``."""
    frames = card.frames()[:, 0]
    loud = np.flatnonzero(frames[after:] > 0) + after
    assert len(loud), "nothing of the utterance was played"
    return int(loud[0]), int(frames[loud[0]])


def test_on_time_the_first_sample_plays_at_its_time_and_waiting_blocks_nothing(
        card: ClockCard, player: tuple[AudioPlayer, Events]) -> None:
    audio, events = player
    at = time.time() + 1.5
    audio.submit(closed_item("sync", counting(0.5), sync=SyncStart.from_unix(at)))
    audio.submit(closed_item("plain", tone(0.2, 440)))
    events.wait_for(Outcome.FINISHED, "plain")
    started = events.wait_for(Progress.STARTED, "sync")
    events.wait_for(Outcome.FINISHED, "sync")
    order = [(e.kind, e.request_id) for e in events.seen]
    assert order.index((Outcome.FINISHED, "plain")) < order.index((Progress.STARTED, "sync"))
    assert started.detail is not None
    assert started.detail["late_by_ms"] == 0.0 and started.detail["skipped_ms"] == 0.0
    assert started.detail["start_at_ms"] == pytest.approx(at * 1000, abs=0.01)
    frames = card.frames()[:, 0]
    first = int(np.flatnonzero(frames == 1)[0])  # the utterance's first sample
    assert abs(card.due(first) - at) < PLACED_S, card.due(first) - at
    played = frames[first:first + len(counting(0.5))]
    assert np.array_equal(played, counting(0.5)), "the utterance was not played whole, in order"


def test_a_late_start_joins_at_the_sample_due_now(
        card: ClockCard, player: tuple[AudioPlayer, Events]) -> None:
    audio, events = player
    at = time.time() - 0.3  # already past when it reaches the player
    audio.submit(closed_item("late", counting(1.2), sync=SyncStart.from_unix(at)))
    started = events.wait_for(Progress.STARTED, "late")
    events.wait_for(Outcome.FINISHED, "late")
    assert started.detail is not None
    late_ms = started.detail["late_by_ms"]
    assert late_ms >= 300 and started.detail["skipped_ms"] == pytest.approx(late_ms, abs=0.1)
    index, value = first_played(card, 0)
    assert value > 1, "a late start played the announcement from its beginning"
    # The frame it joined at plays when it would have, had the device been on time.
    assert abs(card.due(index) - (at + (value - 1) / VOICE_RATE)) < JOINED_S


def test_late_with_skip_does_not_play_and_all_past_does_not_either(
        card: ClockCard, player: tuple[AudioPlayer, Events]) -> None:
    audio, events = player
    skip = SyncStart.from_unix(time.time() - 0.2, "skip")
    audio.submit(closed_item("skip", counting(1.0), sync=skip))
    final = events.wait_for(Outcome.EXPIRED, "skip")
    assert final.reason is not None and "audio.sync_late = skip" in final.reason
    past = SyncStart.from_unix(time.time() - 5.0)
    audio.submit(closed_item("past", counting(0.5), sync=past))
    final = events.wait_for(Outcome.EXPIRED, "past")
    assert final.reason is not None and "all of it was past" in final.reason
    assert Progress.STARTED not in events.kinds("skip") + events.kinds("past")
    assert not np.any(card.frames() > 0), "a start that does not play played something"


def test_a_waiting_start_is_flushed_by_stop(card: ClockCard,
                                            player: tuple[AudioPlayer, Events]) -> None:
    audio, events = player
    audio.submit(closed_item("held", counting(0.5),
                             sync=SyncStart.from_unix(time.time() + 30)))
    audio.stop(flush=True)
    final = events.wait_for(Outcome.INTERRUPTED, "held")
    assert final.reason == "flushed by stop"
