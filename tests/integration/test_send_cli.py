"""``tts-agent send`` against real brokers (#19 items 6 and 7).

- A refused port fails at once, and a listener that never answers CONNECT after
  ``--connect-timeout``: one stderr line, exit 3. The subprocess bounds below are far above
  what either takes and far below the 30 s the old code waited; no timing is asserted.
- ``mosquitto_pub``'s connection options (``-h``, ``-p``, ``--cafile``, ``--cert``, ``--key``,
  ``-u``, ``--password-file``) reach a mutual-TLS broker with a password file, overriding
  settings that point elsewhere.
- ``--wait --timeout`` bounds the silence, not the speech: the agent plays into a real ALSA
  ``file`` PCM over a named pipe whose reader holds the audio back, so the announcement lasts
  as long as the test wants; it is let go only after the agent has sent three ``progress``
  events, each at least ``mqtt.progress_interval_s`` after the one before, i.e. longer than
  ``--timeout`` after the last other event. ``send`` still ends with ``finished`` and exit 0.
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from agent.mqtt.topics import Namespace
from agent.settings import MqttSettings, Settings
from tests.support.alsa_sink import FifoSink
from tests.support.broker import (
    Broker,
    Recorder,
    agent_env,
    agent_settings,
    free_port,
    running_agent,
    running_broker,
)
from tests.support.cli import AGENT, agent_cli

pytestmark = pytest.mark.broker

DEV = Namespace("tts").device("t1")
BOUND_S = 20
"""Upper bound for a ``send`` that must fail fast (the old code took 30 s); never a timing."""


def send(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return agent_cli("send", *args, env=env, timeout=timeout)


def env_for(broker: Broker, tmp_path: Path, **mqtt: object) -> dict[str, str]:
    return agent_env(agent_settings(broker, tmp_path / "models", tmp_path / "agent", mqtt=mqtt))


@pytest.fixture()
def nowhere(tmp_path: Path) -> dict[str, str]:
    """Settings pointing at a loopback port where nothing listens."""
    broker = Broker(tmp_path / "none", free_port())  # never started
    return env_for(broker, tmp_path)


@pytest.mark.parametrize("wait", [[], ["--wait"]])
def test_a_refused_port_fails_at_once_with_one_line(nowhere: dict[str, str],
                                                    wait: list[str]) -> None:
    result = send("--device", "t1", "ping", *wait, env=nowhere, timeout=BOUND_S)
    assert result.returncode == 3, result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert "cannot reach the broker" in result.stderr and "refused" in result.stderr
    assert "-h HOST -p PORT" in result.stderr and result.stdout == ""


@contextmanager
def mute_listener() -> Iterator[int]:
    """A TCP port that accepts connections and never says a word (as a firewall that lets the
    SYN through to a dead service would, or a host that is not an MQTT broker)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        held: list[socket.socket] = []
        done = threading.Event()

        def accept() -> None:
            server.settimeout(0.2)
            while not done.is_set():
                try:
                    held.append(server.accept()[0])
                except OSError:
                    continue

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        try:
            yield int(server.getsockname()[1])
        finally:
            done.set()
            thread.join(5)
            for conn in held:
                conn.close()


def test_a_broker_that_never_answers_fails_after_the_connect_timeout(
        nowhere: dict[str, str]) -> None:
    with mute_listener() as port:
        result = send("-h", "127.0.0.1", "-p", str(port), "--connect-timeout", "1",
                      "--device", "t1", "ping", "--wait", env=nowhere, timeout=BOUND_S)
    assert result.returncode == 3, result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert f"127.0.0.1:{port}" in result.stderr and "--connect-timeout" in result.stderr


def test_mosquitto_pub_options_reach_a_mutual_tls_broker_with_a_password(
        tmp_path: Path, nowhere: dict[str, str]) -> None:
    with running_broker(tmp_path / "tls", mutual_tls=True, users={"ctl": "s3cret"}) as broker:
        assert broker.certs is not None
        certs = broker.certs
        password = tmp_path / "password"
        password.write_text("s3cret\n", encoding="utf-8")
        password.chmod(0o600)
        reach = ["-h", "localhost", "-p", str(broker.port), "--cafile", str(certs.ca),
                 "--cert", str(certs.client_cert), "--key", str(certs.client_key),
                 "-u", "ctl"]
        watch_settings = broker.settings(cert_file=certs.client_cert,
                                         key_file=certs.client_key, username="ctl",
                                         password="s3cret")  # noqa: S106
        with Recorder(watch_settings, [DEV.command("volume").as_filter()], "watch") as watch:
            result = send(*reach, "--password-file", str(password), "--device", "t1",
                          "volume", "0.25", "--id", "tls-1", env=nowhere)
            assert result.returncode == 0, result.stderr
            assert json.loads(result.stdout)["id"] == "tls-1"
            command = watch.wait_json(DEV.command("volume"), lambda c: c["id"] == "tls-1")
            assert command["volume"] == 0.25

        wrong = tmp_path / "wrong"
        wrong.write_text("nope\n", encoding="utf-8")
        result = send(*reach, "--password-file", str(wrong), "--device", "t1", "ping",
                      env=nowhere, timeout=BOUND_S)
        assert result.returncode == 3 and len(result.stderr.splitlines()) == 1, result.stderr
        assert "--password-file" in result.stderr and "nope" not in result.stderr

        result = send(*reach[:6], "--password-file", str(password), "--device", "t1", "ping",
                      env=nowhere, timeout=BOUND_S)  # no client certificate
        assert result.returncode == 3 and len(result.stderr.splitlines()) == 1, result.stderr

        result = send(*reach, "--password-file", str(tmp_path / "missing"), "--device", "t1",
                      "ping", env=nowhere, timeout=BOUND_S)
        assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
        assert "password file" in result.stderr


LONG_TEXT = "The train to the airport leaves from platform two in ten minutes. " * 10


def wait_while_held(broker: Broker, settings: Settings, sink: FifoSink, send: list[str], *,
                    progress: int, timeout: float) -> tuple[subprocess.Popen[str], str, str]:
    """Run ``tts-agent send`` with ``send`` (a request ``--id``'d, waited for) while the agent
    plays into ``sink``, held back until ``progress`` playing progress events of that id have
    come, with ``send`` still waiting then; the device then plays the rest."""
    request_id = send[send.index("--id") + 1]
    events = DEV.events
    try:
        with running_agent(settings), Recorder(broker.settings(),
                                               [events.as_filter()], "watch") as watch:
            controller = subprocess.Popen([*AGENT, "send", *send], stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True,
                                          env=agent_env(settings))
            try:
                def playing(count: int) -> bool:
                    return sum(1 for e in watch.json_on(events) if e["id"] == request_id
                               and e["event"] == "progress" and e["state"] == "playing") >= count
                watch.wait_for(lambda _: playing(progress), timeout=timeout)
                assert controller.poll() is None, controller.communicate()  # still waiting
            finally:
                sink.release()  # the device plays the rest
            out, err = controller.communicate(timeout=60)
    finally:
        sink.release()
    return controller, out, err


@pytest.mark.alsa
def test_send_wait_outlasts_its_timeout_while_a_long_announcement_plays(
        mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path) -> None:
    sink = FifoSink(tmp_path / "speaker.fifo")  # holds the audio back until released
    settings: Settings = agent_settings(
        mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent", mqtt={"progress_interval_s": 1},
        audio={"device": f"file:'{sink.path}',raw", "device_timeout_s": 120})
    controller, out, err = wait_while_held(
        mqtt_broker, settings, sink, ["--device", "t1", "speak", LONG_TEXT, "--id", "long-1",
                                      "--wait", "--progress", "--timeout", "2"],
        progress=3, timeout=60)
    assert controller.returncode == 0, err
    printed = [json.loads(line) for line in out.splitlines()]
    kinds = [e["event"] for e in printed]
    assert kinds[:2] == ["accepted", "started"] and kinds[-1] == "finished", kinds
    assert kinds.count("progress") >= 3
    assert {e["id"] for e in printed} == {"long-1"}
    assert err == ""
    assert len(sink.finish()) > 0


@pytest.mark.alsa
@pytest.mark.parametrize("target", [["--device", "t1"], ["--group", "lobby"]],
                         ids=["device", "group"])
def test_send_wait_with_a_timeout_of_the_default_progress_interval_outlasts_the_gaps(
        mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path, target: list[str]) -> None:
    """#28 item 17: ``--timeout`` equal to the agents' default ``mqtt.progress_interval_s``.
    The gap between two ``progress`` events is a little more than the interval, so a wait of
    exactly ``--timeout`` ended between them (exit 3 while the device still spoke; for a group,
    ``no answer``); the agent's ``accepted`` now names its interval and ``send`` (one device, and
    the group's account) waits at least twice that."""
    interval = MqttSettings.model_fields["progress_interval_s"].default
    sink = FifoSink(tmp_path / "speaker.fifo")  # holds the audio back until released
    settings: Settings = agent_settings(
        mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent",
        mqtt={"progress_interval_s": interval, "groups": ["lobby"]},  # tests' default: an hour
        audio={"device": f"file:'{sink.path}',raw", "device_timeout_s": 120})
    controller, out, err = wait_while_held(
        mqtt_broker, settings, sink, [*target, "speak", LONG_TEXT, "--id", "long-5", "--wait",
                                      "--progress", "--timeout", f"{interval:g}"],
        progress=2, timeout=90)
    assert controller.returncode == 0, err
    printed = [json.loads(line) for line in out.splitlines()]
    assert printed[0]["event"] == "accepted"
    assert printed[0]["progress_interval_s"] == interval
    assert printed[-1]["event"] == "finished", err
    assert err == "" if target[0] == "--device" else err.startswith(
        "tts-agent send: group lobby: 1 expected (online), 1 answered: 1 succeeded"), err
    assert [e["event"] for e in printed].count("progress") >= 2
