"""Real Mosquitto brokers for the MQTT tests, and a small recording MQTT client.

``Broker`` runs ``/usr/sbin/mosquitto`` on a free loopback port with a generated config in a
temporary directory: plain, TLS (certificates made by ``openssl``), mutual TLS, and a password
file made by ``mosquitto_passwd``. Persistence is on so a restart keeps sessions and queued
messages, as a production broker would.

``Recorder`` subscribes with the agent's own :class:`agent.mqtt.client.MqttClient` and collects
what arrives, so tests can wait for a message matching a predicate.

The ``mqtt_broker`` fixture (a plain broker for one test) is registered in ``tests/conftest.py``.
"""

from __future__ import annotations

import atexit
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.daemon.service import AgentService
from agent.mqtt.client import InboundMessage, MqttClient, OutboundMessage
from agent.mqtt.topics import Topic, TopicFilter
from agent.settings import MqttSettings, Settings

MOSQUITTO = "/usr/sbin/mosquitto"
MOSQUITTO_PASSWD = shutil.which("mosquitto_passwd") or "/usr/bin/mosquitto_passwd"
OPENSSL = shutil.which("openssl") or "/usr/bin/openssl"
START_TIMEOUT_S = 10.0


def free_port() -> int:
    """A currently unused TCP port on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run(*args: str, cwd: Path) -> None:
    subprocess.run(list(args), cwd=cwd, check=True, capture_output=True, timeout=60)


@dataclass(frozen=True)
class Certificates:
    """A throw-away CA with a server certificate (localhost, 127.0.0.1) and a client certificate."""

    dir: Path
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path

    @classmethod
    def make(cls, directory: Path) -> Certificates:
        directory.mkdir(parents=True, exist_ok=True)
        ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
        _run(OPENSSL, "req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
             "-subj", "/CN=tts-test-ca", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=directory)
        for name, ext in (
            ("server", "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"),
            ("client", "extendedKeyUsage=clientAuth\n"),
        ):
            (directory / f"{name}.ext").write_text(ext, encoding="utf-8")
            _run(OPENSSL, "req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr",
                 "-subj", f"/CN=tts-test-{name}", cwd=directory)
            _run(OPENSSL, "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey",
                 "ca.key", "-CAcreateserial", "-out", f"{name}.crt", "-days", "2",
                 "-extfile", f"{name}.ext", cwd=directory)
        return cls.at(directory)

    @classmethod
    def at(cls, directory: Path) -> Certificates:
        return cls(directory, directory / "ca.crt", directory / "server.crt",
                   directory / "server.key", directory / "client.crt", directory / "client.key")

    @classmethod
    def copy(cls, directory: Path) -> Certificates:
        """A copy in ``directory`` of one set made once per test process (``openssl`` five
        times per TLS broker was most of its start-up); :meth:`make` for a CA of its own."""
        global _SHARED_CERTS  # noqa: PLW0603 - made once per process, on first use
        with _SHARED_LOCK:
            if _SHARED_CERTS is None:
                made = Path(tempfile.mkdtemp(prefix="tts-test-certs-"))
                atexit.register(shutil.rmtree, made, ignore_errors=True)
                _SHARED_CERTS = cls.make(made / "certs")
        shutil.copytree(_SHARED_CERTS.dir, directory, dirs_exist_ok=True)
        return cls.at(directory)


_SHARED_CERTS: Certificates | None = None
_SHARED_LOCK = threading.Lock()


CLIENT_DEFAULTS: dict[str, Any] = {"reconnect_min_s": 0.1, "reconnect_max_s": 1.0,
                                   "progress_interval_s": 3600.0}
"""The tests' client settings: fast retries, and ``progress`` events only after an hour of quiet
(so the tests that pin a request's exact events stay exact on a slow machine; tests of
``progress`` set ``progress_interval_s`` themselves)."""


class BrokerProcess:
    """What the tests' broker processes share (:class:`Broker`, and
    :class:`tests.support.other_brokers.RabbitMq`): a restart on the same port, the log, agents
    connecting where the controller does."""

    log_path: Path

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def settings(self, **extra: Any) -> MqttSettings:
        raise NotImplementedError

    def restart(self) -> None:
        self.stop()
        self.start()

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def device_settings(self, **extra: Any) -> MqttSettings:
        """What agents connect with (:func:`agent_settings`): the same broker as the
        controller's :meth:`settings` here; another one across a bridge
        (:mod:`tests.support.other_brokers`)."""
        return self.settings(**extra)


@dataclass
class Broker(BrokerProcess):
    """One Mosquitto process on ``127.0.0.1:port``; restartable on the same port."""

    dir: Path
    port: int
    certs: Certificates | None = None
    require_certificate: bool = False
    users: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None

    host = "127.0.0.1"

    @property
    def config_path(self) -> Path:
        return self.dir / "mosquitto.conf"

    @property
    def log_path(self) -> Path:
        return self.dir / "mosquitto.log"

    def write_config(self) -> None:
        lines = [
            f"listener {self.port} {self.host}",
            "persistence true",
            f"persistence_location {self.dir}/",
            "autosave_interval 1",
            f"log_dest file {self.log_path}",
            "log_type error",
            "log_type warning",
            "log_type notice",
            "log_type information",
            "max_queued_messages 10000",
            "set_tcp_nodelay true",
            f"user {pwd.getpwuid(os.getuid()).pw_name}",
        ]
        if self.users:
            pw_file = self.dir / "passwd"
            pw_file.unlink(missing_ok=True)
            for index, (user, password) in enumerate(self.users.items()):
                create = ("-c",) if index == 0 else ()
                _run(MOSQUITTO_PASSWD, *create, "-b", str(pw_file), user, password, cwd=self.dir)
            lines += ["allow_anonymous false", f"password_file {pw_file}"]
        else:
            lines.append("allow_anonymous true")
        if self.certs is not None:
            lines += [
                f"cafile {self.certs.ca}",
                f"certfile {self.certs.server_cert}",
                f"keyfile {self.certs.server_key}",
                f"require_certificate {'true' if self.require_certificate else 'false'}",
            ]
        self.config_path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    def start(self) -> None:
        if self.process is not None and self.process.poll() is None:
            raise RuntimeError("broker already running")
        self.write_config()
        self.process = subprocess.Popen(
            [MOSQUITTO, "-c", str(self.config_path)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        pause = threading.Event()
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                err = self.process.stderr.read().decode() if self.process.stderr else ""
                raise RuntimeError(f"mosquitto exited: {err}\n{self.log_text()}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    return
            except OSError:
                pause.wait(0.05)
        raise RuntimeError(f"mosquitto did not listen on port {self.port}")

    def stop(self) -> None:
        """SIGTERM and wait: Mosquitto saves its persistence database on the way out."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        if self.process.stderr is not None:
            self.process.stderr.close()
        self.process = None

    def settings(self, **extra: Any) -> MqttSettings:
        """Client settings for this broker (:data:`CLIENT_DEFAULTS`; TLS files filled in when
        the broker uses TLS)."""
        values: dict[str, Any] = {"host": self.host, "port": self.port, **CLIENT_DEFAULTS}
        if self.certs is not None:
            values.update(tls=True, ca_file=self.certs.ca)
        values.update(extra)
        return MqttSettings(**values)


@contextmanager
def running_broker(directory: Path, *, tls: bool = False, mutual_tls: bool = False,
                   users: dict[str, str] | None = None) -> Iterator[Broker]:
    """Start a broker in ``directory`` for the duration of the ``with`` block."""
    directory.mkdir(parents=True, exist_ok=True)
    certs = Certificates.copy(directory / "certs") if (tls or mutual_tls) else None
    broker = Broker(directory, free_port(), certs, mutual_tls, dict(users or {}))
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


class Recorder:
    """An MQTT client that records every message on ``filters`` (clean session by default)."""

    def __init__(self, settings: MqttSettings, filters: Sequence[TopicFilter],
                 client_id: str = "test-recorder", *, persistent: bool = False) -> None:
        self.messages: list[InboundMessage] = []
        self._cond = threading.Condition()
        self.client = MqttClient(settings, client_id, subscriptions=filters,
                                 on_message=self._record, persistent=persistent)

    def _record(self, message: InboundMessage) -> None:
        with self._cond:
            if message.duplicate and any(m.topic == message.topic and m.payload == message.payload
                                         for m in self.messages):
                # The broker's own QoS 1 redelivery to this recorder of what it already has (a
                # persistent session across a broker restart on a busy machine); an agent that
                # publishes something twice publishes afresh, and that is still recorded.
                return
            self.messages.append(message)
            self._cond.notify_all()

    def __enter__(self) -> Recorder:
        self.client.start()
        if not self.client.wait_ready(10):
            raise RuntimeError(f"recorder could not connect: {self.client.last_error}")
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close(timeout=3)

    def publish(self, topic: Topic, payload: bytes | dict[str, Any] | str, **kwargs: Any) -> None:
        if isinstance(payload, dict):
            payload = json.dumps(payload).encode()
        elif isinstance(payload, str):
            payload = payload.encode()
        if not self.client.publish(OutboundMessage(topic, payload, **kwargs)).wait(10):
            raise RuntimeError(f"publish to {topic} not acknowledged")

    def wait_for(self, predicate: Callable[[InboundMessage], bool],
                 timeout: float = 30.0) -> InboundMessage:
        """The first recorded message satisfying ``predicate``; fails the test on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for message in self.messages:
                    if predicate(message):
                        return message
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    seen = [(m.topic.value, m.payload[:200]) for m in self.messages]
                    raise AssertionError(f"no matching message within {timeout}s; got {seen}")
                self._cond.wait(remaining)

    def json_on(self, topic: Topic) -> list[dict[str, Any]]:
        """Decoded JSON payloads recorded on ``topic``, in arrival order."""
        with self._cond:
            return [json.loads(m.payload) for m in self.messages if m.topic == topic]

    def wait_json(self, topic: Topic, predicate: Callable[[dict[str, Any]], bool],
                  timeout: float = 30.0) -> dict[str, Any]:
        """The first JSON payload on ``topic`` satisfying ``predicate``."""
        def match(message: InboundMessage) -> bool:
            if message.topic != topic or not message.payload:
                return False
            return bool(predicate(json.loads(message.payload)))
        return dict(json.loads(self.wait_for(match, timeout).payload))


def alsa_file_device(path: Path) -> str:
    """An ALSA PCM name that writes raw frames to ``path`` (the ``file`` plugin on ``null``)."""
    return f"file:'{path}',raw"


def agent_settings(broker: Broker, models_dir: Path, work: Path, *, device_id: str = "t1",
                   voice: str = "tiny-test", mqtt: dict[str, Any] | None = None,
                   audio: dict[str, Any] | None = None, variant: str = "auto") -> Settings:
    """Settings for an agent talking to ``broker``, speaking into an ALSA file PCM in ``work``
    (``variant``: ``models.variant``; see :mod:`tests.support.host` for pinning it)."""
    work.mkdir(parents=True, exist_ok=True)
    return Settings(
        device_id=device_id,
        models={"dir": models_dir, "default_voice": voice, "watch": False, "variant": variant},
        audio={"device": alsa_file_device(work / "out.raw"), "keep_open_s": 0.5,
               **(audio or {})},
        mqtt=broker.device_settings(**(mqtt or {})),
        cache={"dir": work / "cache"},
        log={"level": "warning", "format": "console"},
    )


def agent_env(settings: Settings) -> dict[str, str]:
    """Environment variables that give a ``tts-agent`` process the same settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TTS_AGENT_")}

    def flatten(prefix: str, data: dict[str, Any]) -> None:
        for key, value in data.items():
            name = f"{prefix}{key.upper()}"
            if isinstance(value, dict):
                flatten(f"{name}__", value)
            elif value is None:
                continue
            elif isinstance(value, (list, bool)):
                env[name] = json.dumps(value)
            else:
                env[name] = str(value)

    data = settings.model_dump(mode="json")
    if settings.mqtt.password is not None:
        data["mqtt"]["password"] = settings.mqtt.password.get_secret_value()
    flatten("TTS_AGENT_", data)
    return env


@contextmanager
def running_agent(settings: Settings) -> Iterator[AgentService]:
    """An in-process :class:`AgentService`, stopped (gracefully) at the end; with MQTT on, given
    once its client is subscribed (a command published earlier would be lost, under load)."""
    service = AgentService(settings)
    service.start()
    try:
        if service.client is not None and _listening(settings.mqtt.host, settings.mqtt.port):
            service.client.wait_ready(10)  # not asserted: the test's own checks say what failed
        yield service
    finally:
        service.stop(grace_s=2.0)


def _listening(host: str, port: int) -> bool:
    """Whether a broker listens there (tests of a broker that is down start agents too)."""
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


@contextmanager
def daemon(settings: Settings, log_path: Path, *args: str,
           env: dict[str, str] | None = None,
           drop_env: tuple[str, ...] = ()) -> Iterator[subprocess.Popen[bytes]]:
    """``python -m agent run`` with ``settings`` in its environment, output to ``log_path``;
    killed if still running at the end."""
    full_env = {k: v for k, v in agent_env(settings).items() if k not in drop_env}
    full_env.update(env or {})
    with log_path.open("wb") as log:
        process = subprocess.Popen([sys.executable, "-m", "agent", "run", *args], env=full_env,
                                   stdout=log, stderr=subprocess.STDOUT)
        try:
            yield process
        finally:
            if process.poll() is None:
                process.kill()
            process.wait(10)
