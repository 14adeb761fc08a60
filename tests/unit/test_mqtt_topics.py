"""Topics are validated values built in one module; routing matches MQTT semantics."""

from __future__ import annotations

import pytest

from agent.mqtt.topics import (
    HERMES_SAY,
    CommandRoute,
    Namespace,
    Topic,
    TopicError,
    TopicFilter,
)


def test_device_topics_layout() -> None:
    dev = Namespace("tts").device("kiosk-1")
    assert dev.command("speak") == Topic("tts/kiosk-1/cmd/speak")
    assert dev.events == Topic("tts/kiosk-1/events")
    assert dev.status == Topic("tts/kiosk-1/status")
    assert dev.health == Topic("tts/kiosk-1/health")
    assert [f.value for f in dev.command_filters(("lobby", "floor2"))] == [
        "tts/kiosk-1/cmd/+", "tts/group/lobby/cmd/+", "tts/group/floor2/cmd/+", "tts/all/cmd/+",
    ]


def test_nested_prefix() -> None:
    ns = Namespace("site/a/tts")
    assert ns.fleet_command("ping") == Topic("site/a/tts/all/cmd/ping")
    assert ns.group_command("g", "stop") == Topic("site/a/tts/group/g/cmd/stop")
    assert ns.device("d").route(Topic("site/a/tts/d/cmd/speak")) == CommandRoute("speak", "device")


@pytest.mark.parametrize(
    ("topic", "route"),
    [
        ("tts/dev/cmd/speak", CommandRoute("speak", "device")),
        ("tts/dev/cmd/bogus", CommandRoute("bogus", "device")),
        ("tts/group/lobby/cmd/stop", CommandRoute("stop", "group", "lobby")),
        ("tts/all/cmd/ping", CommandRoute("ping", "fleet")),
        ("tts/group/other/cmd/stop", None),
        ("tts/dev2/cmd/speak", None),
        ("tts/dev/cmd/speak/extra", None),
        ("tts/dev/events", None),
        ("other/dev/cmd/speak", None),
    ],
)
def test_route(topic: str, route: CommandRoute | None) -> None:
    assert Namespace("tts").device("dev").route(Topic(topic), ("lobby",)) == route


@pytest.mark.parametrize("bad", ["", "a/+/b", "a/#", "x\0y", "a" * 600])
def test_topic_rejects(bad: str) -> None:
    with pytest.raises(TopicError):
        Topic(bad)


@pytest.mark.parametrize("bad", ["a/#/b", "a/b+", "a/#x", ""])
def test_filter_rejects(bad: str) -> None:
    with pytest.raises(TopicError):
        TopicFilter(bad)


@pytest.mark.parametrize("bad", ["a/b", "+", "#", ""])
def test_levels_are_checked(bad: str) -> None:
    ns = Namespace("tts")
    with pytest.raises(TopicError):
        ns.device(bad)
    with pytest.raises(TopicError):
        ns.group_command(bad, "speak")


@pytest.mark.parametrize("reserved", ["all", "group", "reply"])
def test_reserved_device_ids(reserved: str) -> None:
    with pytest.raises(TopicError, match="reserved"):
        Namespace("tts").device(reserved)


@pytest.mark.parametrize("bad", ["$SYS", "/tts", "tts/", "a+b"])
def test_prefix_rejects(bad: str) -> None:
    with pytest.raises(TopicError):
        Namespace(bad)


def test_filter_captures_and_dollar_topics() -> None:
    assert TopicFilter("a/+/c/#").captures(Topic("a/b/c/d/e")) == ("b", "d/e")
    assert TopicFilter("a/+/c/#").captures(Topic("a/b/x")) is None
    assert TopicFilter("a/#").matches(Topic("a"))
    assert not TopicFilter("#").matches(Topic("$SYS/broker/uptime"))


@pytest.mark.parametrize(
    ("topic", "allowed"),
    [
        ("ctl/replies/42", True),
        ("tts/reply/ctl", True),
        ("tts/dev/events", True),
        ("tts/dev/cmd/speak", False),
        ("tts/other/cmd/speak", False),
        ("tts/group/g/cmd/stop", False),
        ("tts/all/cmd/stop", False),
        ("hermes/tts/say", False),
        ("$SYS/x", False),
    ],
)
def test_reply_topics_cannot_target_commands(topic: str, allowed: bool) -> None:
    assert Namespace("tts").device("dev").reply_allowed(Topic(topic)) is allowed


@pytest.mark.parametrize(
    ("prefix", "topic", "allowed"),
    [
        ("tts", "tts/reply/ctl/deeper", True),
        ("tts", "tts/dev/events", True),
        ("tts", "tts/dev/status", False),
        ("tts", "tts/dev/health", False),
        ("tts", "tts/other/events", False),
        ("tts", "tts/other/status", False),
        ("tts", "tts/dev/events/x", False),
        ("tts", "tts/group/g/events", False),
        ("tts", "tts", False),
        ("tts", "ttsx/dev/status", True),
        ("tts", "hermes/dialogueManager/x", False),
        ("site/tts", "site/tts/other/events", False),
        ("site/tts", "site/tts/reply/c", True),
        ("site/tts", "site/other", True),
    ],
)
def test_reply_topics_stay_out_of_the_fleets_topics(prefix: str, topic: str,
                                                    allowed: bool) -> None:
    assert Namespace(prefix).device("dev").reply_allowed(Topic(topic)) is allowed


def test_hermes_topics() -> None:
    assert HERMES_SAY.as_filter().matches(Topic("hermes/tts/say"))
