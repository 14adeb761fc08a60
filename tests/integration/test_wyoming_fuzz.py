"""A seeded, bounded fuzz of the Wyoming door against ``tts-agent run`` (issue #27).

A few hundred TCP connections to the agent's Wyoming server, a few at a time, each a prelude of
harmless events (``ping``, ``describe``, unknown event types, a ping with a large payload) and
one last frame: hostile (a header that is not JSON or not an object, deep nesting in the
header or the data, lengths that are huge, negative or not integers, a header line longer
than ``wyoming.max_event_bytes``, binary junk, a frame cut off by a half-close), a
``synthesize`` the admission refuses (wrong types, empty, a NUL, too long, an unknown voice,
lone surrogates), a valid ``synthesize`` or stream, or a frame after which the client just
goes away. Every connection the client does not leave gets what the prelude asked for, then
an ``error`` event (with the code its frame calls for) or valid audio, then the end of the
connection; none hangs. The daemon's log holds no traceback and no error, and the real
``wyoming`` client still gets audio afterwards; two clients connected at SIGTERM (one idle, one
in an open stream) read ``error`` ``stopping``, and the agent logs no traceback for them.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import signal
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest
from wyoming.audio import AudioChunk
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.event import Event, async_read_event
from wyoming.ping import Ping
from wyoming.tts import Synthesize, SynthesizeStart

from agent.settings import Settings
from tests.integration.test_wyoming import audio_of, with_wyoming
from tests.support.broker import Broker, agent_settings, daemon, free_port

pytestmark = [pytest.mark.broker, pytest.mark.alsa]

SEED = 2727
CONNECTIONS = 200
AT_ONCE = 4
MAX_EVENT_BYTES = 64 * 1024
MAX_TEXT = 300
READ_S = 30.0
SENTENCES = ("Doors closing.", "Mind the gap.", "Platform two. Next stop.", "Hello there.")
REFUSALS = frozenset(("bad-request", "empty-text", "text-too-long", "bad-text", "unknown-voice",
                      "unknown-speaker", "unspeakable-text", "bad-ssml"))

End = Literal["bad-event", "refused", "audio", "stream", "leave"]


@dataclass
class Case:
    """One connection: what it sends, what each prelude event is answered with, and how it
    must end."""

    prelude: list[bytes]
    answers: list[str]
    """The event types the prelude is answered with, in order."""
    last: bytes
    end: End
    half_close: bool = False
    """Shut the write side after ``last`` (a cut-off frame: the server reads the end)."""


def frame(kind: str, data: dict[str, object] | None = None, payload: bytes = b"") -> bytes:
    header: dict[str, object] = {"type": kind, "version": "1.0.0"}
    body = json.dumps(data).encode() if data is not None else b""
    if body:
        header["data_length"] = len(body)
    if payload:
        header["payload_length"] = len(payload)
    return json.dumps(header).encode() + b"\n" + body + payload


class Fuzz:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def junk(self, size: int) -> bytes:
        return bytes(self.rng.getrandbits(8) for _ in range(size))

    def prelude(self) -> tuple[list[bytes], list[str]]:
        events: list[bytes] = []
        answers: list[str] = []
        for _ in range(self.rng.randrange(4)):
            roll = self.rng.randrange(5)
            if roll == 0:
                events.append(frame("ping", {"text": "\x1b[2J\x07 \u202e hi"}))
                answers.append("pong")
            elif roll == 1:
                events.append(frame("describe"))
                answers.append("info")
            elif roll == 2:
                name = self.rng.choice(("launch", "x" * 64, "audio-chunk", "synthesize-stopped",
                                        "transcribe", "Ping"))
                events.append(frame(name, {"n": [1, {"a": None}]}))  # ignored: no answer
            elif roll == 3:
                events.append(frame("ping", None, self.junk(self.rng.randint(1, 40_000))))
                answers.append("pong")
            else:
                events.append(b'{"type": "ping", "data": {"deep": ' + b"[" * 150 + b"]" * 150
                              + b"}}\n")  # within the nesting bound
                answers.append("pong")
        return events, answers

    def hostile(self) -> tuple[bytes, bool]:
        """A frame the server cannot read: ``bad-event``; and whether to half-close after."""
        rng, deep = self.rng, self.rng.randint(201, 20_000)
        nested = b'{"a": ' * deep + b"0" + b"}" * deep
        body = json.dumps({"text": "cut"}).encode()
        cut = json.dumps({"type": "synthesize", "data_length": len(body),
                          "payload_length": 100}).encode() + b"\n" + body
        frames: list[Callable[[], bytes]] = [
            lambda: rng.choice((b"{not json\n", b"\n", b'{"type": "ping"\n', b"null\n",
                                b"[1, 2]\n", b'"ping"\n', b"42\n")),
            lambda: self.junk(rng.randint(1, 500)).replace(b"\n", b"") + b"\n",
            lambda: b'{"type": "ping", "x": ' + b"[" * deep + b"]" * deep + b"}\n",
            lambda: json.dumps({"type": "synthesize", "data_length": len(nested)}).encode()
            + b"\n" + nested,
            lambda: json.dumps({"type": "synthesize", rng.choice((
                "data_length", "payload_length")): rng.choice((
                    10**12, 2**63, MAX_EVENT_BYTES + 1))}).encode() + b"\n",
            lambda: json.dumps({"type": "ping", rng.choice((
                "data_length", "payload_length")): rng.choice((
                    -1, -(2**40), 1.5, "12", True, [3], {"n": 1}))}).encode() + b"\n",
            lambda: json.dumps(rng.choice(({"data": {}}, {"type": 5}, {"type": ""},
                                           {"type": "x" * 65}, {"type": None},
                                           {"type": ["ping"]}))).encode() + b"\n",
            # a header line longer than the limit, no newline in sight
            lambda: b"{" + b"x" * (MAX_EVENT_BYTES + rng.randint(1, 5_000)),
            lambda: (b"[1, 2]" if rng.random() < 0.5 else b'"text"').join((
                b'{"type": "synthesize", "data_length": 6}\n', b"")),
            lambda: b'{"type": "synthesize", "data": [1]}\n',
            lambda: b'{"type": "ping", "data": {"n": ' + b"9" * 5_000 + b"}}\n",
            lambda: b'{"type": "ping", "data_length": 4}\n\xff\xfe\x00\x01',
            lambda: b'{"type": "synthesize", "data": {"text": "caf\xe9"}}\n',
            lambda: b"\x00" * rng.randint(1, 100) + b"\n",
        ]
        cut_off: list[Callable[[], bytes]] = [  # then the end of the client's writing
            lambda: b'{"type": "ping"}',  # no newline
            lambda: cut[:rng.randint(1, len(cut) - 1)],
        ]
        if rng.random() < 2 / 16:
            return rng.choice(cut_off)(), True
        return rng.choice(frames)(), False

    def refused(self) -> bytes:
        """A readable ``synthesize`` the admission refuses."""
        text: object = self.rng.choice(SENTENCES)
        data: dict[str, object] = {"text": text}
        kind = self.rng.randrange(9)
        if kind == 0:
            data["text"] = self.rng.choice((5, None, ["a"], {"t": "a"}, True))
        elif kind == 1:
            data["text"] = self.rng.choice(("", "   ", "\n\t"))
        elif kind == 2:
            data["text"] = "Hello\x00 there."
        elif kind == 3:
            data["text"] = "a" * (MAX_TEXT + self.rng.randint(1, 5_000))
        elif kind == 4:
            data["voice"] = {"name": self.rng.choice(("nobody", "../../etc/passwd", "\x1b[2J"))}
        elif kind == 5:
            data["voice"] = self.rng.choice((5, "tiny-test", ["tiny-test"]))
        elif kind == 6:
            data["text_format"] = self.rng.choice(("xml", 5, "SSML!"))
        elif kind == 7:
            data["text"] = "\ud800 lone \udfff"
        else:
            data["text"] = "<speak><nope>Hi</speak>"
            data["text_format"] = "ssml"
        return frame("synthesize", data)

    def case(self) -> Case:
        prelude, answers = self.prelude()
        roll = self.rng.random()
        if roll < 0.45:
            last, half = self.hostile()
            return Case(prelude, answers, last, "bad-event", half)
        if roll < 0.65:
            return Case(prelude, answers, self.refused(), "refused")
        if roll < 0.80:
            return Case(prelude, answers, frame("synthesize", {"text": self.rng.choice(
                SENTENCES)}), "audio")
        if roll < 0.88:
            text = self.rng.choice(SENTENCES)
            stream = (frame("synthesize-start", {}) + frame("synthesize-chunk", {"text": text})
                      + frame("synthesize-stop"))
            return Case(prelude, answers, stream, "stream")
        last = self.rng.choice((frame("synthesize", {"text": "Gone."}),
                                b'{"type": "synthesize", "data_length": 50}\n{"te',
                                self.junk(200)))
        return Case(prelude, answers, last, "leave")


async def serve_one(port: int, case: Case) -> str:
    """Play one case; ``ok`` or what went wrong."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)
    try:
        writer.write(b"".join(case.prelude))
        await writer.drain()
        got = [e.type for e in [await read(reader) for _ in case.answers] if e is not None]
        if got != case.answers:
            return f"prelude answered {got}, expected {case.answers}"
        writer.write(case.last)
        if case.end == "leave":
            writer.transport.abort()
            return "ok"
        await writer.drain()
        if case.half_close:
            writer.write_eof()
        return await ending(reader, case)
    except (ConnectionError, TimeoutError) as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        writer.close()


async def read(reader: asyncio.StreamReader) -> Event | None:
    return await asyncio.wait_for(async_read_event(reader), READ_S)


async def ending(reader: asyncio.StreamReader, case: Case) -> str:
    events: list[Event] = []
    while (event := await read(reader)) is not None:
        events.append(event)
        if event.type == "error" or (case.end == "stream" and event.type == "synthesize-stopped"
                                     ) or (case.end == "audio" and event.type == "audio-stop"):
            break
    types = [e.type for e in events]
    if case.end in ("bad-event", "refused"):
        if not events or events[-1].type != "error":
            return f"no error event: {types}"
        code = Error.from_event(events[-1]).code
        if (case.end == "bad-event" and code != "bad-event") or (
                case.end == "refused" and code not in REFUSALS):
            return f"error {code}: {Error.from_event(events[-1]).text}"
    else:
        audio = b"".join(AudioChunk.from_event(e).audio for e in events
                         if AudioChunk.is_type(e.type))
        stop = "synthesize-stopped" if case.end == "stream" else "audio-stop"
        if not events or events[-1].type != stop or types[0] != "audio-start" or not audio:
            return f"no audio: {types}"
        if case.end == "stream" and "audio-stop" not in types:
            return f"stream without audio-stop: {types}"
    if case.end in ("bad-event", "refused") and await read(reader) is not None:
        return "not closed after its error"
    return "ok"


async def fuzz(port: int, cases: list[Case]) -> Counter[str]:
    limit = asyncio.Semaphore(AT_ONCE)

    async def one(case: Case) -> str:
        async with limit:
            result = await serve_one(port, case)
            return "ok" if result == "ok" else f"{case.end} {case.last[:60]!r}: {result}"

    return Counter(await asyncio.gather(*(one(case) for case in cases)))


async def real_client(port: int) -> list[Event]:
    async with AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(Synthesize(text="Still speaking.").event())
        events, _ = await audio_of(client)
        return events


async def open_at_stop(port: int, process: subprocess.Popen[bytes]) -> list[str]:
    """Two clients hold their connections (one idle, one in an open stream) while the agent
    gets SIGTERM: each reads ``error`` ``stopping``, then the end."""
    async def held(opened: asyncio.Event, stream: bool) -> list[str]:
        async with AsyncTcpClient("127.0.0.1", port) as client:
            if stream:
                await client.write_event(SynthesizeStart().event())
            await client.write_event(Ping().event())
            assert (await client.read_event()) is not None  # the pong: it is being served
            opened.set()
            seen = []
            while (event := await asyncio.wait_for(client.read_event(), READ_S)) is not None:
                seen.append(Error.from_event(event).code or "?" if event.type == "error"
                            else event.type)
            return seen

    opened = [asyncio.Event(), asyncio.Event()]
    tasks = [asyncio.create_task(held(o, stream)) for o, stream in zip(opened, (False, True),
                                                                        strict=True)]
    for o in opened:
        await o.wait()
    process.send_signal(signal.SIGTERM)
    return [code for seen in await asyncio.gather(*tasks) for code in seen]


def wait_listening(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError("the Wyoming server did not listen")


@pytest.fixture()
def settings(mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path) -> Settings:
    base = agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent")
    return with_wyoming(base, uri=f"tcp://127.0.0.1:{free_port()}", max_clients=16,
                        max_event_bytes=MAX_EVENT_BYTES, max_text_chars=MAX_TEXT,
                        idle_timeout_s=20.0)


def test_every_wyoming_connection_gets_an_error_or_audio(settings: Settings,
                                                        tmp_path: Path) -> None:
    fuzzer = Fuzz(SEED)
    cases = [fuzzer.case() for _ in range(CONNECTIONS)]
    ends = Counter(c.end for c in cases)
    assert min(ends.values()) >= 10 and len(ends) == 5, ends  # a real mix
    assert settings.wyoming.uri is not None
    port = int(settings.wyoming.uri.rsplit(":", 1)[1])
    log_path = tmp_path / "agent.log"
    with daemon(settings, log_path) as process:
        wait_listening(port)
        results = asyncio.run(fuzz(port, cases))
        events = asyncio.run(real_client(port))
        assert process.poll() is None, "the agent died"
        at_stop = asyncio.run(open_at_stop(port, process))
        assert process.wait(30) == 0
    assert at_stop == ["stopping", "stopping"], at_stop
    assert results == Counter({"ok": CONNECTIONS}), [r for r in results if r != "ok"][:10]
    assert events[0].type == "audio-start" and events[-1].type == "audio-stop", events
    log = log_path.read_text(encoding="utf-8", errors="replace")
    assert "Traceback" not in log, log[-4_000:]
    errors = [line for line in log.splitlines() if re.search(r"\[(error|critical)", line)]
    assert not errors, errors[:10]
