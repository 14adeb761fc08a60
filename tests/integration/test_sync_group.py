"""A synchronized group speak (#30) end to end: ``tts-agent send --group G speak ... --sync
--wait`` over a real Mosquitto to three real agent processes, each playing into its own clock
card (:mod:`tests.support.clock_card`: real alsa-lib, real time, when each frame was due). Each
member's utterance begins with a chime whose first sample is loud: it marks the start. One test
checks, on one fleet: the lead chosen from the members' health; every member starts its first
sample at the shared time (within what tells a placed start from one a buffer off; the figures
are ``bench/sync_start.py``'s); the account says so; ``fleet --probe always`` shows each
member's clock offset; Home Assistant's group notify entity (one retained config from all, its
template rendered as Home Assistant does) starts the members together; with a lead too short,
members join at the sample due rather than from the beginning, and the one with
``audio.sync_late = skip`` does not play and says why. That a waiting start blocks nothing is
the player's test (``test_sync_start.py``)."""

from __future__ import annotations

import json
import re
import tempfile
import time
import wave
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agent.mqtt.topics import DiscoveryTopics, Namespace, Topic
from agent.settings.chimes import ChimeSettings
from tests.support.broker import Broker, Recorder, agent_env, agent_settings, daemon
from tests.support.cli import agent_cli
from tests.support.clock_card import ClockCard, build_plugin

pytestmark = [pytest.mark.broker, pytest.mark.alsa]

NS = Namespace("tts")
PLACED_S = 0.05
"""A start placed by the card's delay is within this here even on a loaded machine (members are
processes competing for two cores); one that ignored the delay is a buffer (80 ms) or more off.
The player's own test holds the placement to 15 ms; bench/sync_start.py measures it."""
MEMBERS = ("hall-1", "hall-2", "hall-3")
HA_LEAD_S = 2.0
"""``mqtt.ha_group_lead_s`` of every member: the lead of the Home Assistant group entity."""


def _member(stack: ExitStack, broker: Broker, models: Path, work: Path, device: str, *,
            late: str) -> ClockCard:
    work.mkdir(parents=True)
    chimes = work / "chimes"
    chimes.mkdir()
    with wave.open(str(chimes / "gong.wav"), "wb") as gong:  # a loud first sample marks the start
        gong.setnchannels(1)
        gong.setsampwidth(2)
        gong.setframerate(16000)
        gong.writeframes((np.sin(np.arange(3200) / 3.0) * 20000 + 2000).astype("<i2").tobytes())
    card = ClockCard(build_plugin(Path(tempfile.gettempdir()) / "tts-agent-tests"),
                     work / "card.raw", 22050)
    (work / "asound.conf").write_text(card.config("card"))
    settings = agent_settings(broker, models, work, device_id=device,
                              mqtt={"groups": ["hall"], "ha_discovery": True,
                                    "ha_group_lead_s": HA_LEAD_S},
                              audio={"device": "card", "keep_open_s": 30, "sync_late": late})
    settings = settings.model_copy(update={"chimes": ChimeSettings(dir=chimes)})
    stack.enter_context(daemon(settings, work / "agent.log",
                               env={"ALSA_CONFIG_PATH": str(work / "asound.conf")}))
    return card


@pytest.fixture()
def hall(mqtt_broker: Broker, tiny_voice_dir: Path,
         tmp_path: Path) -> Iterator[tuple[dict[str, ClockCard], dict[str, str]]]:
    """Three members of group ``hall`` (hall-3 with ``sync_late = skip``), online with a
    health report; the cards and the controller's environment."""
    with ExitStack() as stack:
        cards = {device: _member(stack, mqtt_broker, tiny_voice_dir.parent, tmp_path / device,
                                 device, late="skip" if device == "hall-3" else "join")
                 for device in MEMBERS}
        topics = [NS.device(d).health.as_filter() for d in MEMBERS]
        with Recorder(mqtt_broker.settings(), topics, "hall-health") as watch:
            for device in MEMBERS:
                report = watch.wait_json(NS.device(device).health, lambda p: "sync" in p,
                                         timeout=60)
                clock = report["sync"]["clock"]  # the kernel's discipline (adjtimex, read only)
                assert set(clock) == {"synchronized", "est_error_ms", "max_error_ms", "error"}
                assert clock["error"] is None and isinstance(clock["synchronized"], bool), clock
                assert report["sync"]["controller"] is None  # no ping with sent_ms yet
        controller = agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "ctl",
                                    device_id="controller")
        yield cards, agent_env(controller)


def send(env: dict[str, str], *args: str) -> tuple[list[dict[str, Any]], str, int]:
    result = agent_cli("send", "--group", "hall", *args, "--wait", "--timeout", "60", env=env,
                       timeout=120)
    finals = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    return finals, result.stderr, result.returncode


def _group_entity(broker: Broker, cards: dict[str, ClockCard]) -> None:
    """Home Assistant's part: the group notify entity's retained config (the broker keeps the
    last member's; each member published the same bytes), its template rendered with jinja2 as
    Home Assistant renders it (``now()``, ``tojson``), published: every member starts at once,
    ``mqtt.ha_group_lead_s`` after the render."""
    import datetime

    import jinja2

    topic = DiscoveryTopics("homeassistant", MEMBERS[0]).group_config("hall")
    filters = [topic.as_filter(), *(NS.device(d).events.as_filter() for d in MEMBERS)]
    with Recorder(broker.settings(), filters, "home-assistant") as ha:
        config = ha.wait_json(topic, lambda p: "command_template" in p)
        assert config["unique_id"] == "tts-agent-group-hall-speak", config
        now = datetime.datetime.now(datetime.UTC)
        rendered = jinja2.Environment().from_string(  # noqa: S701 (HA's does not escape)
            config["command_template"]).render(value="Mind the gap.", now=lambda: now)
        published = time.time()
        ha.publish(Topic(config["command_topic"]), rendered.encode())
        finals = [ha.wait_json(NS.device(d).events, lambda e, d=d: e.get("final") is True
                               and e["device"] == d, timeout=60) for d in MEMBERS]
    at_ms = int(now.timestamp() * 1000) + int(HA_LEAD_S * 1000)
    assert all(f["event"] == "finished" and f["start_at_ms"] == at_ms and f["late_by_ms"] == 0
               for f in finals), finals
    starts = {device: gong_at(card, published) for device, card in cards.items()}
    off = {device: round((start - at_ms / 1000) * 1000, 2) for device, start in starts.items()}
    assert all(abs(ms) < PLACED_S * 1000 for ms in off.values()), off


def gong_at(card: ClockCard, after: float) -> float:
    """When the first frame of the gong (the utterance's first) played after ``after``."""
    frames = card.frames()[:, 0]
    for index in np.flatnonzero(frames > 1500):
        if (due := card.due(int(index))) > after:
            return due
    raise AssertionError("the member played nothing")


@pytest.mark.slow
def test_a_group_starts_together_and_late_members_join_or_skip(
        hall: tuple[dict[str, ClockCard], dict[str, str]], mqtt_broker: Broker) -> None:
    cards, env = hall
    sent = time.time()
    finals, err, status = send(env, "speak", "Platform two for the fast train.", "--sync",
                               "--chime", "gong")
    assert status == 0, err
    chosen = re.search(r"synchronized start at \S+ \(in ([\d.]+) s: (hall-\d) asks for", err)
    assert chosen, err  # the lead comes from the slowest member's health, not the default
    assert "synchronized start: 3 on time" in err, err
    assert {f["device"] for f in finals} == set(MEMBERS)
    assert all(f["event"] == "finished" and f["late_by_ms"] == 0 for f in finals), finals
    at = finals[0]["start_at_ms"] / 1000
    assert all(f["start_at_ms"] == finals[0]["start_at_ms"] for f in finals)
    assert at > sent + float(chosen.group(1))  # chosen after the fleet was read, from now
    starts = {device: gong_at(card, sent) for device, card in cards.items()}
    off = {device: round((start - at) * 1000, 2) for device, start in starts.items()}
    assert all(abs(ms) < PLACED_S * 1000 for ms in off.values()), off

    # Home Assistant's group entity: one retained message (the same from every member) whose
    # command template, rendered as Home Assistant does, is a synchronized speak to the group.
    _group_entity(mqtt_broker, cards)

    # The fleet view measures each member's clock against this one with a ping.
    shown = agent_cli("fleet", "--group", "hall", "--probe", "always", env=env, timeout=120)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].split()[8] == "CLOCK", lines[0]
    clocks = {line.split()[0]: line.split()[8] for line in lines[1:]}
    assert set(clocks) == set(MEMBERS), shown.stdout
    assert all(abs(float(c.removesuffix("ms"))) < 1000 for c in clocks.values()), clocks

    # A lead shorter than the way to the card: every member is late when the time comes (the
    # way through the broker, the parse and the synthesis take more than 1 ms; 10 ms did not
    # always: the tiny voice synthesizes in about a millisecond).
    finals, err, status = send(env, "speak", "The doors are closing now, please stand clear "
                               "of the doors, this train is ready to leave.", "--sync",
                               "--lead", "0.001")
    by_device = {f["device"]: f for f in finals}
    assert status == 1, err  # hall-3 did not play: that is a failure of the group send
    for device in ("hall-1", "hall-2"):
        final = by_device[device]
        assert final["event"] == "finished" and final["late_by_ms"] > 0, (final, err)
        assert final["skipped_ms"] == pytest.approx(final["late_by_ms"], abs=0.1)
    assert by_device["hall-3"]["event"] == "expired"
    assert "audio.sync_late = skip" in by_device["hall-3"]["reason"]
    assert "did not play, late: hall-3" in err and "hall-1 (late by" in err, err
