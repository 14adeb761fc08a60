"""#27 item 5, the place policy of a full Wyoming server, with the real ``wyoming`` client
library: a newcomer takes the place of the connection idle the longest (told ``replaced``),
never of one serving a request; when every place serves one, the newcomer gets ``busy``."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from pathlib import Path

import pytest
from wyoming.error import Error
from wyoming.event import Event
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop

from agent.daemon.service import AgentService
from tests.integration.test_wyoming import audio_of, client_for, read, tcp_settings
from tests.support.broker import Broker, running_agent

pytestmark = [pytest.mark.broker, pytest.mark.alsa]

PLACES = 4


async def pinger(service: AgentService, n: int, pings: int) -> list[str]:
    """Connects, then pings every 0.3 s (pings keep nothing open); the codes of the events
    that were not ``pong``, and ``closed`` at the end of the connection."""
    await asyncio.sleep(0.2 * n)  # the first one connected is the longest idle
    seen: list[str] = []
    async with client_for(service) as client:
        for _ in range(pings):
            await client.write_event(Event(type="ping", data={"text": str(n)}))
            answer = await read(client)
            if answer is None:
                return [*seen, "closed"]
            if answer.type != "pong":
                seen.append(Error.from_event(answer).code or "?")
                break
            await asyncio.sleep(0.3)
        if seen and await read(client) is None:
            seen.append("closed")
    return seen


async def newcomer(service: AgentService, text: str) -> list[Event]:
    async with client_for(service) as client:
        await client.write_event(Synthesize(text=text).event())
        events, _ = await audio_of(client)
        return events


def test_a_newcomer_takes_the_place_of_the_longest_idle_client(
        mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path) -> None:
    settings = tcp_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent",
                            max_clients=PLACES)

    async def idlers(service: AgentService) -> tuple[list[list[str]], list[Event]]:
        """Four pingers fill the places; a newcomer comes once they have idled 1.5 s."""
        pingers = [asyncio.create_task(pinger(service, n, 20)) for n in range(PLACES)]
        await asyncio.sleep(0.2 * PLACES + 1.5)
        events = await newcomer(service, "Let me in.")
        return list(await asyncio.gather(*pingers)), events

    async def streamer(service: AgentService, opened: asyncio.Event,
                       go_on: asyncio.Event) -> list[Event]:
        async with client_for(service) as client:
            await client.write_event(SynthesizeStart().event())  # a request open: busy
            opened.set()
            await go_on.wait()
            await client.write_event(SynthesizeChunk(text="Still mine.").event())
            await client.write_event(SynthesizeStop().event())
            events, _ = await audio_of(client, until="synthesize-stopped")
            return events

    async def busy(service: AgentService) -> tuple[list[list[Event]], Event | None]:
        """Four open streams fill the places, idle for 1.5 s: a newcomer is refused."""
        go_on = asyncio.Event()
        opened = [asyncio.Event() for _ in range(PLACES)]
        streams = [asyncio.create_task(streamer(service, o, go_on)) for o in opened]
        for o in opened:
            await o.wait()
        await asyncio.sleep(1.5)
        async with client_for(service) as client:
            await client.write_event(Synthesize(text="Me too.").event())
            refusal = await read(client)
            after = await read(client)
            assert after is None, (refusal, after)
        go_on.set()
        return list(await asyncio.gather(*streams)), refusal

    with running_agent(settings) as service:
        seen, events = asyncio.run(idlers(service))
        assert events[-1].type == "audio-stop", events  # the newcomer was served
        assert seen[0] == ["replaced", "closed"], seen  # the longest idle made room, told why
        assert seen[1:] == [[], [], []], seen  # the others pinged on undisturbed
        streams, refusal = asyncio.run(busy(service))
        section = service.health.snapshot()["wyoming"]  # type: ignore[typeddict-item]
    assert refusal is not None and Error.from_event(refusal).code == "busy", refusal
    assert all(s[-1].type == "synthesize-stopped" and any(e.type == "audio-stop" for e in s)
               for s in streams), streams  # no stream lost its place
    assert section["replaced_clients"] == 1 and section["refused_clients"] == 1, section


def test_a_client_that_never_reads_is_dropped_before_the_kernel_takes_its_audio(
        mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path) -> None:
    """#27 item 5, the write deadline: a client with a small receive buffer asks for about a
    megabyte of audio and never reads. The kernel would grow the agent's send buffer to take
    all of it (the request ``finished`` into buffers, the client never dropped); with the
    buffer fixed, the writes block, the client is dropped after ``write_timeout_s`` and the
    rest of its synthesis is cancelled; the connection is reset, so the client does not see it
    open while the kernel tries to deliver what was buffered."""
    settings = tcp_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent",
                            write_timeout_s=1.0, idle_timeout_s=5.0)
    text = " ".join(f"Sentence number {n} of a long one." for n in range(90))  # ~1 MB of audio

    with running_agent(settings) as service:
        port = service.addons.get("wyoming").server.port  # type: ignore[union-attr]
        stalled = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.connect(("127.0.0.1", port))
        try:
            request = Synthesize(text=text).event()
            data = json.dumps(request.data).encode()
            stalled.sendall(json.dumps({"type": request.type, "data_length": len(data)})
                            .encode() + b"\n" + data)
            for _ in range(600):  # until the request is counted, however it ended
                section = service.health.snapshot()["wyoming"]  # type: ignore[typeddict-item]
                if section["requests"]:
                    break
                time.sleep(0.1)
            stalled.settimeout(30)
            with pytest.raises(ConnectionResetError):  # reset: not minutes of buffered audio
                while stalled.recv(65536):
                    pass
        finally:
            stalled.close()
    shown = json.dumps(section)
    assert section["dropped_clients"] == 1 and section["interrupted"] == 1, shown
    assert section["finished"] == 0 and section["cancelled_syntheses"] == 1, shown
