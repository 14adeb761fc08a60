"""One Wyoming client connection, on the server's event loop thread.

``describe`` -> ``info``; ``synthesize`` -> ``audio-start``, ``audio-chunk`` events,
``audio-stop``; a ``synthesize-start`` ... ``synthesize-stop`` stream -> audio sentence by
sentence, then ``synthesize-stopped``; ``ping`` -> ``pong``. A request that cannot be served,
an event that cannot be read and an idle connection get an ``error`` event, and the connection
is closed. Synthesis runs on the server's bounded executor, never on this loop.
The design: docs/internals.md#a-wyoming-connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error
from wyoming.event import Event, async_write_event
from wyoming.info import Describe
from wyoming.ping import Ping, Pong
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeStopped,
)

from agent.logs import get_logger
from agent.outcomes import Outcome, WyomingOutcome
from agent.wyoming.speech import (
    Refused,
    SentenceBuffer,
    VoiceChoice,
    check_text,
    choose_voice,
    is_ssml,
    start_synthesis,
)
from agent.wyoming.wire import ProtocolError, linger_close, read_event, reset_close

if TYPE_CHECKING:
    from agent.audio.format import AudioChunk as Chunk
    from agent.wyoming.server import WyomingServer

__all__ = ["Closing", "Connection", "Gone"]

log = get_logger(__name__)

MAX_CHUNK_FRAMES = 8192
"""Audio is sent in chunks of at most this many frames (a decoder window or sentence may be
longer): the client can start playing while the rest of a long sentence is on the wire."""


_REQUESTS = frozenset(("synthesize", "synthesize-start", "synthesize-chunk", "synthesize-stop"))
"""The events that keep a connection from idling out."""


class Gone(Exception):
    """The client stopped reading (write timed out) or went away."""


class Closing(Exception):
    """An ``error`` event was sent: the connection ends."""


class _Request:
    """Counters of one synthesize request or stream, for the health report."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.first_audio_s: float | None = None
        self.synthesis_s = 0.0
        self.audio_s = 0.0
        self.frames = 0


class _Stream:
    """An open ``synthesize-start`` stream: its voice (held to its end) and its text."""

    def __init__(self, choice: VoiceChoice | None, max_chars: int, *, ssml: bool = False,
                 ) -> None:
        self.choice = choice
        """None: the start was refused (its chunks are ignored, its stop still answered)."""
        self.ssml = ssml
        self.text = SentenceBuffer(max_chars, whole=ssml)
        self.request = _Request()
        self.started_audio = False
        self.spoken = 0
        self.failed: str | None = None
        self.outcome: WyomingOutcome = Outcome.REJECTED
        """How the stream ends when it ``failed``: ``rejected`` (its text) or ``failed``."""


class Connection:
    """Serves one client until it disconnects, idles out, or the server stops."""

    def __init__(self, server: WyomingServer, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.server = server
        self.settings = server.settings
        self.reader, self.writer = reader, writer
        self.stream: _Stream | None = None
        self.peer = str(writer.get_extra_info("peername") or "unix")
        self.opened = self.last_request = time.monotonic()
        """When the connection opened, when its last request came (the idle budget)."""
        self.waiting = False
        """Waiting for the client's next event, no request being served (it may give its
        place to a newcomer: :meth:`replace`)."""
        self.replaced: str | None = None
        """Why it gives its place to a newcomer (set by :meth:`replace`)."""
        self.closing = False
        """Its last event is written: it is being closed."""
        self._task: asyncio.Task[None] | None = None

    @property
    def leaving(self) -> bool:
        """Closing or replaced: it holds no place any more."""
        return self.closing or self.replaced is not None

    def idle_s(self, now: float) -> float | None:
        """How long it has waited for a request, or None while it serves one (a synthesis,
        an open stream, any event being answered) or is already leaving."""
        if not self.waiting or self.stream is not None or self.leaving:
            return None
        return now - self.last_request

    def replace(self, reason: str) -> None:
        """Give the place to a newcomer: the client is sent ``error`` ``replaced`` with
        ``reason``, then the connection closes (only while :meth:`idle_s` is not None)."""
        self.replaced = reason
        if self._task is not None:
            self._task.cancel()

    # -- the loop -------------------------------------------------------------------------

    async def run(self) -> None:
        self._task = asyncio.current_task()
        try:
            async with asyncio.timeout(self.settings.max_connection_s):
                try:
                    await self._loop()
                except TimeoutError:
                    raise
                except Closing:
                    pass
        except TimeoutError:  # the total budget: whatever it was doing is cancelled
            with contextlib.suppress(Closing):
                await self.refuse("time-limit", f"connection open for "
                                  f"{self.settings.max_connection_s:g} s: closing")
        except Closing:
            pass
        except Gone:
            log.info("wyoming_client_gone", peer=self.peer)
        except (ConnectionError, OSError) as exc:
            log.info("wyoming_client_gone", peer=self.peer, error=str(exc))
        finally:
            self.closing = True
            stream, self.stream = self.stream, None
            if stream is not None:  # refused, failed, or cut by the client or a stop
                self.server.record(stream.outcome if stream.failed else Outcome.INTERRUPTED,
                                   stream.request, stream.failed)
            await linger_close(self.reader, self.writer)

    async def _loop(self) -> None:
        idle = self.settings.idle_timeout_s
        while True:
            left = idle - (time.monotonic() - self.last_request)
            try:
                event = await self._next(max(0.0, left))
            except asyncio.CancelledError:
                if self.replaced is None:
                    raise
                task = asyncio.current_task()
                if task is not None:
                    task.uncancel()
                await self.refuse("replaced", self.replaced)
                return
            except TimeoutError:
                await self.refuse("idle", f"no request for {idle:g} s: closing")
                return
            except ProtocolError as exc:
                self.server.note_error(str(exc))
                await self.refuse("bad-event", f"{exc}: closing")
                return
            if event is None:
                return
            await self.handle(event)

    async def _next(self, timeout: float) -> Event | None:
        """The client's next event (``waiting`` meanwhile: the place can be given away)."""
        self.waiting = True
        try:
            return await asyncio.wait_for(read_event(self.reader, self.settings.max_event_bytes),
                                          timeout)
        finally:
            self.waiting = False

    async def send(self, event: Event) -> None:
        """Write ``event``; a client that does not read it within ``write_timeout_s`` is gone
        (dropped, counted in the health report's ``dropped_clients``)."""
        deadline = self.settings.write_timeout_s
        try:
            await asyncio.wait_for(async_write_event(event, self.writer), deadline)
        except TimeoutError as exc:
            self.server.count("dropped_clients")
            log.info("wyoming_client_dropped", peer=self.peer,
                     reason=f"not reading for {deadline:g} s")
            reset_close(self.writer)  # its unread audio is thrown away
            raise Gone(f"not reading for {deadline:g} s") from exc
        except (ConnectionError, OSError) as exc:
            raise Gone(str(exc) or type(exc).__name__) from exc

    async def refuse(self, code: str, reason: str) -> None:
        """An ``error`` event for the client (which may be gone already), then the end of the
        connection (raises :class:`Closing`)."""
        log.info("wyoming_refused", peer=self.peer, code=code, reason=reason)
        reason = self.server.public(reason)
        with contextlib.suppress(Gone):
            await self.send(Error(text=reason, code=code).event())
        raise Closing(reason)

    async def handle(self, event: Event) -> None:
        kind = event.type
        if kind in _REQUESTS:  # pings, describe, unknown events keep no connection open
            self.last_request = time.monotonic()
        if Describe.is_type(kind):
            info = await asyncio.to_thread(self.server.catalog.info)
            await self.send(info.event())
        elif Ping.is_type(kind):
            text = event.data.get("text")
            await self.send(Pong(text=text if isinstance(text, str) else None).event())
        elif Synthesize.is_type(kind):
            if self.stream is None:  # inside a stream: the compatibility copy of its text
                await self.synthesize(event.data)
        elif SynthesizeStart.is_type(kind):
            await self.stream_start(event.data)
        elif SynthesizeChunk.is_type(kind):
            await self.stream_chunk(event.data)
        elif SynthesizeStop.is_type(kind):
            await self.stream_stop()
        else:
            log.debug("wyoming_event_ignored", peer=self.peer, type=kind[:64])

    # -- synthesize -----------------------------------------------------------------------

    async def _choose(self, data: object) -> VoiceChoice:
        voice = data.get("voice") if isinstance(data, dict) else None
        return await self.server.in_pool(choose_voice, self.server.catalog, voice,
                                         self.settings)

    async def synthesize(self, data: dict[str, object]) -> None:
        request = _Request()
        try:
            text = check_text(data.get("text"), self.settings.max_text_chars)
            ssml = is_ssml(data.get("text_format"), text)
            choice = await self._choose(data)
            await self.speak(choice, text, request, start=True, ssml=ssml)
        except Refused as exc:
            self.server.record(Outcome.REJECTED, request, exc.reason)
            await self.refuse(exc.code, exc.reason)
            return
        except (Gone, asyncio.CancelledError):  # dropped, or the time limit
            self.server.record(Outcome.INTERRUPTED, request)
            raise
        except Exception as exc:  # a synthesis failure is the client's error event, not a crash
            log.exception("wyoming_synthesis_failed", peer=self.peer)
            self.server.record(Outcome.FAILED, request, f"synthesis failed: {exc}")
            await self.refuse("synthesis-failed", f"synthesis failed: {exc}"[:300])
            return
        # Counted before the last event goes out: a client that has read audio-stop finds the
        # request in the health report.
        self.server.record(Outcome.FINISHED, request)
        await self.send(AudioStop(timestamp=request.frames * 1000 // choice.voice.sample_rate)
                        .event())

    async def speak(self, choice: VoiceChoice, text: str, request: _Request, *,
                    start: bool, ssml: bool = False) -> None:
        """Synthesize ``text`` and send its audio (``audio-start`` first when ``start``),
        holding one of the server's synthesis slots meanwhile."""
        rate = choice.voice.sample_rate
        async with self.server.slots:
            began = time.monotonic()
            chunks: Iterator[Chunk] = await self.server.in_pool(
                functools.partial(start_synthesis, ssml=ssml, check=self.server.check),
                choice, text, self.server.cache)
            request.synthesis_s += time.monotonic() - began
        try:
            if start:
                await self.send(AudioStart(rate=rate, width=2, channels=1, timestamp=0).event())
            while True:
                async with self.server.slots:  # one chunk a turn: the slots go round (FIFO)
                    began = time.monotonic()
                    chunk = await self.server.in_pool(next, chunks, None)
                    request.synthesis_s += time.monotonic() - began
                if chunk is None:
                    break
                await self._send_audio(chunk, request)  # the slot is free meanwhile
        except (Gone, asyncio.CancelledError):  # dropped, cut, stopped: the rest is not made
            self.server.cancel(chunks)
            raise
        finally:
            self.last_request = time.monotonic()

    async def _send_audio(self, chunk: Chunk, request: _Request) -> None:
        fmt = chunk.format
        step = MAX_CHUNK_FRAMES * fmt.frame_bytes
        for offset in range(0, len(chunk.audio), step):
            piece = chunk.audio[offset:offset + step]
            await self.send(AudioChunk(rate=fmt.rate, width=fmt.width, channels=fmt.channels,
                                       audio=piece,
                                       timestamp=request.frames * 1000 // fmt.rate).event())
            if request.first_audio_s is None:
                request.first_audio_s = time.monotonic() - request.started
            request.frames += len(piece) // fmt.frame_bytes
        request.audio_s += chunk.seconds

    # -- synthesize-start / -chunk / -stop ----------------------------------------------

    async def stream_start(self, data: dict[str, object]) -> None:
        if self.stream is not None:
            await self.refuse("bad-request", "synthesize-start inside an open stream")
            return
        try:
            ssml = is_ssml(data.get("text_format"), None)
            choice: VoiceChoice | None = await self._choose(data)
        except Refused as exc:
            self.stream = _Stream(None, self.settings.max_text_chars)
            self.stream.failed = exc.reason
            await self.refuse(exc.code, exc.reason)
            return
        self.stream = _Stream(choice, self.settings.max_text_chars, ssml=ssml)

    async def stream_chunk(self, data: dict[str, object]) -> None:
        stream = self.stream
        if stream is None:
            await self.refuse("bad-request", "synthesize-chunk without synthesize-start")
            return
        if stream.choice is None or stream.failed is not None:
            return
        try:
            sentences = stream.text.add(data.get("text"))
        except Refused as exc:
            stream.failed = exc.reason
            await self.refuse(exc.code, exc.reason)
            return
        for sentence in sentences:
            await self._speak_sentence(stream, sentence)

    async def _speak_sentence(self, stream: _Stream, sentence: str) -> None:
        if stream.choice is None:
            return
        try:
            await self.speak(stream.choice, sentence, stream.request,
                             start=not stream.started_audio, ssml=stream.ssml)
        except Refused as exc:
            if stream.ssml:  # the whole document: the stream's answer
                stream.failed = exc.reason
                await self.refuse(exc.code, exc.reason)
            else:  # one unspeakable sentence ("***") does not end the stream
                log.info("wyoming_sentence_skipped", peer=self.peer, reason=exc.reason)
            return
        except Gone:
            raise
        except Exception as exc:  # the stream ends with the client's error event, not a crash
            log.exception("wyoming_synthesis_failed", peer=self.peer)
            stream.failed, stream.outcome = f"synthesis failed: {exc}"[:300], Outcome.FAILED
            await self.refuse("synthesis-failed", stream.failed)
            return
        stream.started_audio = True
        stream.spoken += 1

    async def stream_stop(self) -> None:
        stream = self.stream
        if stream is None:
            await self.refuse("bad-request", "synthesize-stop without synthesize-start")
            return
        if stream.choice is not None and stream.failed is None:
            for sentence in stream.text.flush():
                await self._speak_sentence(stream, sentence)
        self.stream = None
        if not stream.spoken:
            self.server.record(Outcome.REJECTED, stream.request, "nothing to speak")
            await self.refuse("empty-text", "nothing to speak")
        self.server.record(Outcome.FINISHED, stream.request)  # before the client hears the end
        if stream.started_audio and stream.choice is not None:
            rate = stream.choice.voice.sample_rate
            await self.send(AudioStop(timestamp=stream.request.frames * 1000 // rate).event())
        await self.send(SynthesizeStopped().event())
