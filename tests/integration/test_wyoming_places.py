"""#27 item 5, the place policy of a full Wyoming server, with the real ``wyoming`` client
library: a newcomer takes the place of the connection idle the longest (told ``replaced``),
never of one serving a request; when every place serves one, the newcomer gets ``busy``."""

from __future__ import annotations

import asyncio
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
