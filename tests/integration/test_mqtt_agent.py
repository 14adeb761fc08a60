"""The agent end to end over a real Mosquitto: real synthesis (tiny voice), real alsa-lib playback
into an ALSA file PCM, every command answered."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent.daemon.service import AgentService
from agent.mqtt.topics import HERMES_ERROR, HERMES_SAY, HERMES_SAY_FINISHED, Namespace, Topic
from tests.support.broker import (
    Broker,
    Recorder,
    agent_settings,
    running_agent,
    running_broker,
)
from tests.support.controller import (
    agent_fixture,
    controller_fixture,
    events_for,
    final_for,
    online_controller,
)

pytestmark = [pytest.mark.broker, pytest.mark.alsa]

NS = Namespace("tts")
DEV = NS.device("t1")


agent = agent_fixture()
controller = controller_fixture()


def audio_bytes(service: AgentService) -> int:
    path = Path(service.settings.audio.device.split("'")[1])
    return path.stat().st_size if path.exists() else 0


@pytest.mark.brokers("mosquitto", "bridged", "rabbitmq")
def test_speak_accepted_started_finished(agent: AgentService, controller: Recorder) -> None:
    controller.publish(DEV.command("speak"), {"id": "hello-1", "text": "Hello there. Bye."})
    final = final_for(controller, "hello-1")
    kinds = [e["event"] for e in events_for(controller, "hello-1")]
    assert kinds == ["accepted", "started", "finished"]
    assert final["voice"] == "tiny-test" and final["version"] == "1.0.0"
    assert final["audio_s"] > 0.1 and final["synthesis_ms"] >= 0
    assert final["device"] == "t1" and final["command"] == "speak"
    assert audio_bytes(agent) > 0


@pytest.mark.brokers("mosquitto", "rabbitmq")
def test_generated_id_is_reported_in_every_event(controller: Recorder) -> None:
    controller.publish(DEV.command("speak"), {"text": "No id here."})
    first = controller.wait_json(DEV.events, lambda e: e["event"] == "accepted")
    request_id = first["id"]
    assert len(request_id) >= 16
    final_for(controller, request_id)
    assert [e["event"] for e in events_for(controller, request_id)] == [
        "accepted", "started", "finished"]


@pytest.mark.parametrize(
    ("command", "payload", "reason"),
    [
        ("speak", b'{"id": "bad-1", "text": "unterminated', "malformed JSON"),
        ("speak", b'{"id": "bad-2", "text": ""}', "text"),
        ("speak", b'{"id": "bad-3", "text": "hi", "shout": true}', "unknown field 'shout'"),
        ("speak", b'{"id": "bad-4", "text": "hi", "voice": "nobody"}', "unknown voice 'nobody'"),
        ("speak", b'{"id": "bad-5", "text": "hi", "voice": "../../etc"}', "voice"),
        ("speak", json.dumps({"id": "bad-6", "text": "x" * 70_000}).encode(), "payload too large"),
        ("launch", b'{"id": "bad-7"}', "unknown command 'launch'"),
        ("volume", b'{"id": "bad-8", "volume": 1.5}', "volume"),
    ],
)
def test_bad_commands_are_rejected_and_the_agent_keeps_serving(
        agent: AgentService, controller: Recorder, command: str, payload: bytes,
        reason: str) -> None:
    controller.publish(DEV.command(command), payload)
    final = controller.wait_json(DEV.events, lambda e: e["final"])
    assert final["event"] == "rejected", final
    assert reason in final["reason"]
    if reason not in ("malformed JSON", "payload too large"):  # else the id is unreadable
        assert final["id"].startswith("bad-")
    controller.publish(DEV.command("speak"), {"id": "after", "text": "Still here."})
    assert final_for(controller, "after")["event"] == "finished"
    assert [e["event"] for e in controller.json_on(DEV.events) if "command" in e] == [
        "rejected", "accepted", "started", "finished"]


def test_response_topic_and_correlation_data(mqtt_broker: Broker, controller: Recorder) -> None:
    reply = Topic("ctl/replies/abc")
    with Recorder(mqtt_broker.settings(), [reply.as_filter()], "replies") as replies:
        controller.publish(DEV.command("speak"), {"id": "rr-1", "text": "Reply please."},
                           response_topic=reply, correlation_data=b"corr-\x00\xff")
        controller.publish(DEV.command("ping"), {"id": "rr-2"}, response_topic=reply,
                           correlation_data=b"second")
        first = replies.wait_for(lambda m: json.loads(m.payload)["id"] == "rr-1")
        second = replies.wait_for(lambda m: json.loads(m.payload)["id"] == "rr-2")
        final_for(controller, "rr-1")
    assert first.correlation_data == b"corr-\x00\xff"
    assert json.loads(first.payload)["event"] == "finished"
    assert second.correlation_data == b"second"
    assert json.loads(second.payload)["event"] == "pong"
    # only final events go to the reply topic
    assert [json.loads(m.payload)["event"] for m in replies.messages] in (
        ["finished", "pong"], ["pong", "finished"])


def test_response_topic_may_not_target_command_topics(controller: Recorder) -> None:
    controller.publish(DEV.command("speak"), {"id": "evil", "text": "loop"},
                       response_topic=NS.device("other").command("speak"))
    final = final_for(controller, "evil")
    assert final["event"] == "rejected" and "response topic" in final["reason"]


def test_expired_commands_are_not_spoken(controller: Recorder) -> None:
    controller.publish(DEV.command("speak"), {"id": "late", "text": "Too late.",
                                              "expires_at": 1_000_000_000.0})
    final = final_for(controller, "late")
    assert final["event"] == "expired"
    assert [e["event"] for e in events_for(controller, "late")] == ["expired"]


@pytest.mark.brokers("mosquitto", "bridged", "rabbitmq")
def test_redelivered_command_is_spoken_once(controller: Recorder) -> None:
    for _ in range(3):  # what a QoS 1 redelivery or a retrying controller looks like
        controller.publish(DEV.command("speak"), {"id": "once", "text": "Only once."})
    controller.publish(DEV.command("ping"), {"id": "barrier"})
    final_for(controller, "barrier")
    final_for(controller, "once")
    kinds = [e["event"] for e in events_for(controller, "once")]
    repeats = ("in_progress", "duplicate")  # each repeat is answered, and not run (issue #14)
    assert [kind for kind in kinds if kind not in repeats] == [
        "accepted", "started", "finished"]
    assert len([kind for kind in kinds if kind in repeats]) == 2, kinds


@pytest.mark.brokers("mosquitto", "bridged")
def test_retained_command_is_not_replayed(mqtt_broker: Broker, tiny_voice_dir: Path,
                                          tmp_path: Path) -> None:
    """A command left retained on the broker is refused when a new subscription picks it up."""
    with Recorder(mqtt_broker.settings(), [DEV.events.as_filter(), DEV.status.as_filter()],
                  "ctl") as ctl:
        ctl.publish(DEV.command("speak"), {"id": "sticky", "text": "Retained."}, retain=True)
        settings = agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent")
        with running_agent(settings):
            final = final_for(ctl, "sticky")
            ctl.publish(DEV.command("speak"), b"", retain=True)  # clear the retained message
    assert final["event"] == "rejected" and "retained" in final["reason"]
    assert [e["event"] for e in events_for(ctl, "sticky")] == ["rejected"]


@pytest.mark.brokers("mosquitto", "bridged", "rabbitmq")
def test_control_commands(agent: AgentService, controller: Recorder) -> None:
    controller.publish(DEV.command("volume"), {"id": "v1", "volume": 0.3})
    assert final_for(controller, "v1") | {"ts": 0} == {
        "id": "v1", "event": "done", "device": "t1", "command": "volume", "volume": 0.3,
        "final": True, "ts": 0, "instance": agent.instance.id}
    controller.publish(DEV.command("ping"), {"id": "p1"})
    pong = final_for(controller, "p1")
    assert pong["event"] == "pong"
    status = pong["status"]
    assert status["volume"] == 0.3 and status["voices"] == ["tiny-test"]
    assert status["state"] == "online" and status["pending"] == 0
    controller.publish(DEV.command("stop"), {"id": "s1", "clear_queue": True})
    assert final_for(controller, "s1")["event"] == "done"
    controller.publish(DEV.command("reload"), {"id": "r1"})
    assert final_for(controller, "r1")["voices"] == ["tiny-test"]
    controller.publish(DEV.command("reload"), {"id": "r2", "voice": "ghost"})
    assert final_for(controller, "r2")["event"] == "failed"
    controller.publish(DEV.command("ping"), b"")
    controller.wait_json(DEV.events, lambda e: e["event"] == "pong" and e["id"] != "p1")


@pytest.mark.brokers("mosquitto", "bridged", "rabbitmq")
def test_presence_online_retained_then_stopped(mqtt_broker: Broker, tiny_voice_dir: Path,
                                               tmp_path: Path) -> None:
    settings = agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent")
    # a late subscriber gets the retained presence
    with running_agent(settings), Recorder(mqtt_broker.settings(), [DEV.status.as_filter()],
                                           "late") as late:
        online = late.wait_json(DEV.status, lambda p: True)
    assert online["state"] == "online" and online["voices"] == ["tiny-test"]
    assert online["version"] and online["site_id"] == "t1"
    with Recorder(mqtt_broker.settings(), [DEV.status.as_filter()], "after") as after:
        stopped = after.wait_json(DEV.status, lambda p: True)
    assert stopped["state"] == "stopped"


@pytest.mark.brokers("mosquitto", "bridged", "rabbitmq")
def test_group_and_fleet_topics(mqtt_broker: Broker, tiny_voice_dir: Path,
                                tmp_path: Path) -> None:
    settings = agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent",
                              mqtt={"groups": ["lobby", "floor-2"]})
    with running_agent(settings), Recorder(
            mqtt_broker.settings(), [DEV.events.as_filter(), DEV.status.as_filter()],
            "ctl") as ctl:
        ctl.wait_json(DEV.status, lambda p: p["state"] == "online")
        ctl.publish(NS.group_command("floor-2", "ping"), {"id": "g1"})
        ctl.publish(NS.group_command("basement", "ping"), {"id": "g-other"})
        ctl.publish(NS.fleet_command("speak"), {"id": "all-1", "text": "Everyone."})
        ctl.publish(DEV.command("ping"), {"id": "barrier"})
        final_for(ctl, "barrier")
        assert final_for(ctl, "g1")["event"] == "pong"
        assert final_for(ctl, "all-1")["event"] == "finished"
        assert events_for(ctl, "g-other") == []


@pytest.mark.brokers("mosquitto", "bridged", "rabbitmq")
def test_hermes_say_and_say_finished(mqtt_broker: Broker, tiny_voice_dir: Path,
                                     tmp_path: Path) -> None:
    settings = agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent",
                              mqtt={"site_id": "kitchen"})
    filters = [HERMES_SAY_FINISHED.as_filter(), HERMES_ERROR.as_filter(),
               DEV.events.as_filter(), DEV.status.as_filter()]
    with running_agent(settings), online_controller(mqtt_broker, filters=filters,
                                                    name="rhasspy") as hermes:
        hermes.publish(HERMES_SAY, {"text": "Other room.", "siteId": "bedroom", "id": "x-0"})
        hermes.publish(HERMES_SAY, {"text": "Dinner is ready.", "siteId": "kitchen",
                                    "id": "5f2c-41", "sessionId": "s-9", "lang": "en",
                                    "volume": 0.5, "customData": None})
        done = hermes.wait_json(HERMES_SAY_FINISHED, lambda p: True)
        assert done == {"id": "5f2c-41", "siteId": "kitchen", "sessionId": "s-9"}
        assert final_for(hermes, "5f2c-41")["event"] == "finished"
        hermes.publish(HERMES_SAY, {"text": "", "siteId": "kitchen", "id": "bad",
                                    "sessionId": "s-10"})
        error = hermes.wait_json(HERMES_ERROR, lambda p: True)
        assert error["siteId"] == "kitchen" and error["sessionId"] == "s-10"
        assert error["context"] == "bad" and "text" in error["error"]
        hermes.wait_json(HERMES_SAY_FINISHED, lambda p: p["id"] == "bad")
        assert events_for(hermes, "x-0") == []
        assert not [m for m in hermes.messages
                    if m.topic == HERMES_SAY_FINISHED and json.loads(m.payload)["id"] == "x-0"]


@pytest.mark.brokers("mosquitto", "bridged", "rabbitmq")
@pytest.mark.parametrize("protocol", ["3.1.1"])
def test_mqtt_311_agent(mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path,
                        protocol: str) -> None:
    settings = agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent",
                              mqtt={"protocol": protocol})
    with running_agent(settings), Recorder(
            mqtt_broker.settings(protocol=protocol),
            [DEV.events.as_filter(), DEV.status.as_filter()], "ctl311") as ctl:
        ctl.wait_json(DEV.status, lambda p: p["state"] == "online")
        ctl.publish(DEV.command("speak"), {"id": "old-1", "text": "Three one one."})
        assert final_for(ctl, "old-1")["event"] == "finished"


def test_broker_restart_loses_nothing_and_speaks_nothing_twice(
        mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path) -> None:
    settings = agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent")
    filters = [DEV.events.as_filter(), DEV.status.as_filter()]
    with running_agent(settings) as service, Recorder(
            mqtt_broker.settings(), filters, "ctl-persistent", persistent=True) as ctl:
        ctl.wait_json(DEV.status, lambda p: p["state"] == "online")
        before = [f"pre-{n}" for n in range(3)]
        during = [f"down-{n}" for n in range(5)]
        for request_id in before:
            ctl.publish(DEV.command("speak"), {"id": request_id, "text": "Before."})
        mqtt_broker.stop()
        for request_id in during:  # queued by the controller's client while the broker is down
            ctl.client.publish(ctl_message(request_id))
        mqtt_broker.start()
        assert service.client is not None and service.client.wait_ready(30)
        for request_id in before + during:
            assert final_for(ctl, request_id, timeout=60)["event"] == "finished", request_id
        ctl.publish(DEV.command("ping"), {"id": "barrier"})
        final_for(ctl, "barrier")
        for request_id in before + during:
            # Events are QoS 1, at least once: an event in flight when the broker went down is
            # delivered again after it comes back, with the same timestamp. Speaking twice would
            # publish a second, distinct event.
            # A command delivered again is answered with in_progress or duplicate, not run.
            distinct = {(e["event"], e["ts"]) for e in events_for(ctl, request_id)
                        if e["event"] not in ("in_progress", "duplicate")}
            kinds = sorted(kind for kind, _ in distinct)
            assert kinds == ["accepted", "finished", "started"], (request_id, kinds)
        assert service.client.reconnects >= 1


def ctl_message(request_id: str) -> Any:
    from agent.mqtt.client import OutboundMessage

    payload = json.dumps({"id": request_id, "text": "While down."}).encode()
    return OutboundMessage(DEV.command("speak"), payload)


def test_agent_over_mutual_tls_with_password(tiny_voice_dir: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    from agent.logs import configure_logging

    configure_logging("debug", "console")  # log everything, into the captured streams
    try:
        logged, settings = _speak_over_mutual_tls(tiny_voice_dir, tmp_path, capsys)
    finally:
        with capsys.disabled():  # bind logging to the real streams again
            configure_logging("info", "console")
    assert "mqtt_connected" in logged  # the agent's log was captured...
    assert "agent-secret" not in logged  # ...without the secret
    assert "agent-secret" not in json.dumps(settings.masked())


def _speak_over_mutual_tls(tiny_voice_dir: Path, tmp_path: Path,
                           capsys: pytest.CaptureFixture[str]) -> tuple[str, Any]:
    secret = tmp_path / "credentials" / "mqtt-password"
    secret.parent.mkdir()
    secret.write_text("agent-secret\n", encoding="utf-8")
    with running_broker(tmp_path / "b", mutual_tls=True,
                        users={"agent": "agent-secret", "ctl": "ctl-secret"}) as tls_broker:
        assert tls_broker.certs is not None
        client_tls = {"cert_file": tls_broker.certs.client_cert,
                      "key_file": tls_broker.certs.client_key}
        settings = agent_settings(tls_broker, tiny_voice_dir.parent, tmp_path / "agent",
                                  mqtt={"username": "agent", "password_file": secret,
                                        **client_tls})
        ctl_settings = tls_broker.settings(username="ctl", password="ctl-secret",  # noqa: S106
                                           **client_tls)
        with running_agent(settings), Recorder(
                ctl_settings, [DEV.events.as_filter(), DEV.status.as_filter()], "ctl") as ctl:
            ctl.wait_json(DEV.status, lambda p: p["state"] == "online")
            ctl.publish(DEV.command("speak"), {"id": "secure", "text": "Encrypted."})
            assert final_for(ctl, "secure")["event"] == "finished"
    captured = capsys.readouterr()
    return captured.out + captured.err, settings


def test_intake_queue_full_is_answered(mqtt_broker: Broker, tiny_voice_dir: Path,
                                       tmp_path: Path) -> None:
    settings = agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent",
                              mqtt={"intake_queue": 1})
    gate = threading.Event()
    with running_agent(settings) as service, Recorder(
            mqtt_broker.settings(), [DEV.events.as_filter(), DEV.status.as_filter()],
            "ctl") as ctl:
        ctl.wait_json(DEV.status, lambda p: p["state"] == "online")
        original: Callable[..., Any] = service.dispatcher.handle

        def slow(request: Any) -> None:  # hold the dispatcher so the intake queue fills
            gate.wait(10)
            original(request)

        service.dispatcher.handle = slow  # type: ignore[method-assign]
        ids = [f"q{n}" for n in range(6)]
        for request_id in ids:  # speaks: control commands have a lane of their own (#27)
            ctl.publish(DEV.command("speak"), {"id": request_id, "text": "Queued."})
        busy = ctl.wait_json(DEV.events, lambda e: e["event"] == "rejected")
        assert "intake queue full" in busy["reason"]
        ctl.publish(DEV.command("ping"), {"id": "ping"})  # not behind the full speak lane
        gate.set()
        finals = [final_for(ctl, request_id) for request_id in ids]
        assert final_for(ctl, "ping")["event"] == "pong"
    assert {f["event"] for f in finals} == {"finished", "rejected"}
    assert len(finals) == len(ids)


@pytest.mark.voice
def test_real_voice_speaks_into_the_alsa_file(mqtt_broker: Broker, real_voice_dir: Path,
                                              tmp_path: Path) -> None:
    import numpy as np

    settings = agent_settings(mqtt_broker, real_voice_dir.parent, tmp_path / "agent",
                              voice=real_voice_dir.name)
    with running_agent(settings) as service, Recorder(
            mqtt_broker.settings(), [DEV.events.as_filter(), DEV.status.as_filter()],
            "ctl") as ctl:
        ctl.wait_json(DEV.status, lambda p: p["state"] == "online")
        ctl.publish(DEV.command("speak"), {"id": "joe", "text": "Good morning. Platform two."})
        final = final_for(ctl, "joe", timeout=120)
        raw = Path(service.settings.audio.device.split("'")[1]).read_bytes()
    assert final["event"] == "finished" and final["voice"] == real_voice_dir.name
    assert final["audio_s"] > 1.0
    samples = np.frombuffer(raw[: len(raw) // 2 * 2], dtype="<i2").astype(np.float32)
    assert samples.size > 22050 and float(np.sqrt(np.mean(samples**2))) > 100  # speech, not silence


def test_warm_phrase_is_played_from_the_cache(mqtt_broker: Broker, tiny_voice_dir: Path,
                                              tmp_path: Path) -> None:
    settings = agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent")
    settings = settings.model_copy(update={"cache": settings.cache.model_copy(
        update={"warm_phrases": ["Please mind the gap."]})})
    with running_agent(settings) as service, Recorder(
            mqtt_broker.settings(), [DEV.events.as_filter(), DEV.status.as_filter()],
            "controller") as controller:
        controller.wait_json(DEV.status, lambda p: p["state"] == "online")
        cache = service.phrase_cache
        assert cache is not None
        deadline = threading.Event()
        for _ in range(300):  # the warmer runs in the background after the model load
            if cache.stats()["entries"] >= 1:
                break
            deadline.wait(0.05)
        assert cache.stats()["entries"] == 1
        controller.publish(DEV.command("speak"), {"id": "warm-1", "text": "Please  mind the gap."})
        assert final_for(controller, "warm-1")["event"] == "finished"
        assert cache.stats()["hits"] == 1
        controller.publish(DEV.command("speak"), {"id": "cold-1", "text": "Something new."})
        assert final_for(controller, "cold-1")["event"] == "finished"
        assert cache.stats()["entries"] == 2  # stored once synthesized to the end
