"""The Wyoming clients of ``bench/chaos.py``: a few clients that keep connecting to the agent's
Wyoming server while the broker restarts and the agent is killed and started again.

Each client, in turn: synthesizes and reads to ``audio-stop`` (``complete``), streams a text
(``stream``), leaves after the first audio (``leave``), or asks for a long text and never reads
(``never-read``: the server must drop it ``wyoming.write_timeout_s`` after its writes block).
Each attempt ends in one outcome: ``completed``, ``error: <code>`` (an ``error`` event),
``left`` (the client's own choice), ``dropped`` (a never-reader the server closed), ``cut``
(closed with no error and no end: the agent died), ``connect failed`` (nothing listening: the
agent is down) or ``hanging`` (neither an answer nor a close for ``HANG_S``: what must never
happen).
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections import Counter
from typing import Any

HANG_S = 20.0
"""No event and no close for this long: the connection is left hanging."""
PAUSE_S = 0.5
KINDS = ("complete", "stream", "complete", "leave", "never-read")
TEXTS = ("Doors closing.", "Mind the gap.", "Platform two.", "Next stop, airport.")
LONG_TEXT = " ".join(f"This is sentence number {n} of a long announcement." for n in range(30))
"""Far more audio than the socket buffers of a client that does not read hold."""
TCP_ESTABLISHED = 1
"""``tcpi_state`` of a connection neither side has closed (Linux ``TCP_INFO``)."""


def frame(kind: str, data: dict[str, Any] | None = None) -> bytes:
    body = json.dumps(data).encode() if data else b""
    header: dict[str, Any] = {"type": kind}
    if body:
        header["data_length"] = len(body)
    return json.dumps(header).encode() + b"\n" + body


async def read_event(reader: asyncio.StreamReader) -> tuple[str, dict[str, Any]] | None:
    """The next event's type and data (its payload skipped), or None at the end."""
    line = await asyncio.wait_for(reader.readline(), HANG_S)
    if not line:
        return None
    header = json.loads(line)
    data = header.get("data") or {}
    if header.get("data_length"):
        data.update(json.loads(await asyncio.wait_for(
            reader.readexactly(header["data_length"]), HANG_S)))
    if header.get("payload_length"):
        await asyncio.wait_for(reader.readexactly(header["payload_length"]), HANG_S)
    return str(header.get("type")), data


class WyomingLoad:
    """``clients`` Wyoming clients on their own thread and event loop, until :meth:`stop`."""

    def __init__(self, port: int, clients: int, write_timeout_s: float) -> None:
        self.port = port
        self.clients = clients
        self.write_timeout_s = write_timeout_s
        self.attempts: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()),
                                        name="chaos-wyoming", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(HANG_S * 3)

    async def _main(self) -> None:
        await asyncio.gather(*(self._client(n) for n in range(self.clients)))

    async def _client(self, n: int) -> None:
        turn = n
        while not self._stop.is_set():
            kind = KINDS[turn % len(KINDS)]
            turn += 1
            began = time.time()
            try:
                outcome = await self._attempt(kind, turn)
            except TimeoutError:  # (an OSError too)
                outcome = "hanging"
            except OSError as exc:
                outcome = "cut" if isinstance(exc, ConnectionResetError | BrokenPipeError) \
                    else "connect failed"
            except (ValueError, asyncio.IncompleteReadError):
                outcome = "cut"
            self.attempts.append({"kind": kind, "began": began, "ended": time.time(),
                                  "outcome": outcome})
            await asyncio.sleep(PAUSE_S)

    async def _attempt(self, kind: str, turn: int) -> str:
        if kind == "never-read":
            return await self._never_read()
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", self.port), 5)
        try:
            text = f"{TEXTS[turn % len(TEXTS)]} {turn}."
            if kind == "stream":
                writer.write(frame("synthesize-start") + frame("synthesize-chunk", {"text": text})
                             + frame("synthesize-stop"))
            else:
                writer.write(frame("synthesize", {"text": text}))
            await writer.drain()
            end = "synthesize-stopped" if kind == "stream" else "audio-stop"
            while (event := await read_event(reader)) is not None:
                name, data = event
                if name == "error":
                    return f"error: {data.get('code')}"
                if kind == "leave" and name == "audio-chunk":
                    return "left"
                if name == end:
                    return "completed"
            return "cut"
        finally:
            writer.transport.abort() if kind == "leave" else writer.close()

    async def _never_read(self) -> str:
        """Ask for a long text and never read: the server must close the connection within
        ``write_timeout_s`` of its writes blocking (seen in the socket's TCP state, without
        reading: a reader would be served)."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        loop = asyncio.get_running_loop()
        try:
            await asyncio.wait_for(loop.sock_connect(sock, ("127.0.0.1", self.port)), 5)
            await loop.sock_sendall(sock, frame("synthesize", {"text": LONG_TEXT}))
            deadline = time.monotonic() + self.write_timeout_s + HANG_S
            while time.monotonic() < deadline:
                state = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0]
                if state != TCP_ESTABLISHED:
                    return "dropped"
                await asyncio.sleep(0.2)
            return "hanging"
        finally:
            sock.close()


def summary(attempts: list[dict[str, Any]], kills: list[float]) -> dict[str, Any]:
    """Outcomes by kind; a ``cut`` within 3 s of a kill is the kill's."""
    outcomes: Counter[str] = Counter()
    for attempt in attempts:
        outcome = attempt["outcome"]
        near = any(attempt["began"] - 1 <= kill <= attempt["ended"] + 3 for kill in kills)
        if outcome in ("cut", "hanging") and near:  # a killed process's kernel socket goes
            outcome += " by a kill"  # on delivering what it had buffered to a non-reader
        outcomes[outcome] += 1
    by_kind = {kind: dict(Counter(a["outcome"] for a in attempts if a["kind"] == kind))
               for kind in sorted({a["kind"] for a in attempts})}
    odd = [{**a, "since_kill_s": [round(a["began"] - k, 1) for k in kills]}
           for a in attempts if a["outcome"] in ("cut", "hanging")]
    return {"attempts": len(attempts), "outcomes": dict(outcomes), "by_kind": by_kind,
            "cut_or_hanging": odd,
            "errors": {k.removeprefix("error: "): v for k, v in outcomes.items()
                       if k.startswith("error: ")}}
