"""The Wyoming TTS server: its own event loop thread, a bounded pool for synthesis.

Threads: ``wyoming`` runs the asyncio loop (accepting, reading and writing events), and
``wyoming-synth-N`` (at most ``wyoming.max_syntheses``) the voice and the phrase cache. A
connection beyond ``wyoming.max_clients`` takes the place of the one waiting longest for a
request (``error`` ``replaced`` to it), or gets ``busy`` when every one serves a request; a
synthesis slot is held one chunk at a time, first come first served (docs/internals.md).

:meth:`WyomingServer.start` binds (a failure is kept in :meth:`stats`, for the health report,
and logged; it never raises), :meth:`WyomingServer.stop` closes the listener, ends every open
connection (an ``error`` event ``stopping`` first) and the pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from wyoming.error import Error
from wyoming.event import async_write_event

from agent.logs import get_logger
from agent.outcomes import WYOMING_OUTCOMES, Outcome, WyomingOutcome
from agent.settings.wyoming import parse_uri
from agent.wyoming.announce import Announcer
from agent.wyoming.connection import Connection
from agent.wyoming.wire import linger_close

if TYPE_CHECKING:
    from agent.health.report import WyomingSection
    from agent.pipeline.phrase_cache import PhraseCache
    from agent.settings import WyomingSettings
    from agent.wyoming.catalog import Catalog
    from agent.wyoming.connection import _Request
    from agent.wyoming.speech import SpeechCheck

__all__ = ["Outcomes", "WyomingServer"]

log = get_logger(__name__)

_T = TypeVar("_T")
_BIND_TIMEOUT_S = 10.0
_GOODBYE_S = 1.0
_MAX_ERROR_CHARS = 200
_MAX_LINGERING = 64
"""Refused connections read at once before their close; past this, closed at once."""
_CLOSE_TRIES = 200
SEND_BUFFER_BYTES = 128 * 1024
"""A connection's socket send buffer (the kernel doubles it): a few seconds of audio."""
PLACE_GRACE_S = 1.0
"""A connection gives its place to a newcomer only after this long without a request, so a
client between its connect (or its last answer) and its request keeps it."""


class Outcomes(Protocol):
    """Where finished requests are counted (:meth:`agent.health.snapshot.Health.
    record_request`)."""

    def __call__(self, outcome: Any, *, synthesis_s: float | None = None,
                 audio_s: float | None = None, first_audio_s: float | None = None) -> None: ...


class WyomingServer:
    """See the module docstring. :meth:`start` and :meth:`stop` from the main thread."""

    def __init__(self, settings: WyomingSettings, catalog: Catalog,
                 cache: PhraseCache | None = None, *, on_outcome: Outcomes | None = None,
                 check: SpeechCheck | None = None, device_id: str = "tts-agent") -> None:
        if settings.uri is None:
            raise ValueError("wyoming.uri is not set")
        self.settings = settings
        self.catalog = catalog
        self.cache = cache
        self.on_outcome = on_outcome
        self.check = check
        """Why a text cannot be said by its voice (the dispatcher's check), or None."""
        self.scheme, self.host, self.port = parse_uri(settings.uri)
        self.pool = ThreadPoolExecutor(settings.max_syntheses, thread_name_prefix="wyoming-synth")
        self.slots: asyncio.Semaphore  # made on the loop
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._bound = threading.Event()
        self._stop: asyncio.Event | None = None
        self._conns: dict[asyncio.Task[None], Connection] = {}
        self._lock = threading.Lock()
        self._lingering = 0
        self.listening = False
        self.bind_error: str | None = None
        self.counts: dict[str, int] = {"connections": 0, "refused_clients": 0, "requests": 0,
                                       "replaced_clients": 0,
                                       "dropped_clients": 0, "cancelled_syntheses": 0,
                                       **dict.fromkeys(WYOMING_OUTCOMES, 0)}
        """Connections, requests and the requests by outcome (the enum's values as keys)."""
        self.last_error: str | None = None
        self.announcer = (Announcer(device_id, self.host, self.port)
                          if settings.zeroconf and self.scheme == "tcp" else None)
        self.zeroconf = "off" if self.announcer is None else "pending"
        """``off``, ``announced`` or why the mDNS announcement failed."""

    # -- lifecycle (main thread) ----------------------------------------------------------

    def start(self) -> None:
        """Bind and serve on the ``wyoming`` thread; returns once bound (or failed to)."""
        self._thread = threading.Thread(target=self._run, name="wyoming", daemon=True)
        self._thread.start()
        if not self._bound.wait(_BIND_TIMEOUT_S):
            self.bind_error = f"not listening after {_BIND_TIMEOUT_S:g} s"
        if self.bind_error is not None:
            log.error("wyoming_bind_failed", uri=self.settings.uri, error=self.bind_error)
        else:
            log.info("wyoming_listening", uri=self.settings.uri, port=self.port or None)

    def stop(self, timeout: float) -> None:
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop ended meanwhile
                loop.call_soon_threadsafe(stop.set)
        if self._thread is not None:
            self._thread.join(timeout)
        self.pool.shutdown(wait=False, cancel_futures=True)

    # -- the loop (thread "wyoming") --------------------------------------------------------

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except Exception as exc:
            self.bind_error = self.bind_error or f"{type(exc).__name__}: {exc}"
            log.exception("wyoming_server_failed")
        finally:
            self.listening = False
            self._bound.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self.slots = asyncio.Semaphore(self.settings.max_syntheses)
        try:
            server = await self._listen()
        except OSError as exc:
            self.bind_error = f"cannot listen on {self.settings.uri}: {exc.strerror or exc}"
            return
        self.listening = True
        self._bound.set()
        async with server:
            await self._announce()
            await self._stop.wait()
            server.close()
            if self.announcer is not None and self.zeroconf == "announced":
                with contextlib.suppress(Exception):  # withdrawn as well as it can be
                    await self.announcer.stop()
            await self._close_connections()
        if self.scheme == "unix":
            with contextlib.suppress(OSError):
                Path(self.host).unlink()

    async def _announce(self) -> None:
        if self.announcer is None:
            return
        self.announcer.port = self.port
        try:
            await self.announcer.start()
        except Exception as exc:  # no multicast, a name taken, no zeroconf: served all the same
            self.zeroconf = f"failed: {type(exc).__name__}: {exc}"[:_MAX_ERROR_CHARS]
            log.error("wyoming_zeroconf_failed", error=self.zeroconf)
            return
        self.zeroconf = "announced"
        log.info("wyoming_zeroconf_announced", name=self.announcer.name,
                 address=self.announcer.address, port=self.port)

    async def _listen(self) -> asyncio.AbstractServer:
        limit = self.settings.max_event_bytes
        if self.scheme == "tcp":
            server = await asyncio.start_server(self._accept, self.host, self.port,
                                                limit=limit)
            self.port = server.sockets[0].getsockname()[1]
            return server
        path = Path(self.host)
        if path.is_socket():  # a socket left behind by an earlier run; never another file
            path.unlink()
        server = await asyncio.start_unix_server(self._accept, str(path), limit=limit)
        os.chmod(path, self.settings.socket_mode)
        return server

    async def _close_connections(self) -> None:
        tasks = list(self._conns)
        goodbye = [self._goodbye(conn) for conn in self._conns.values()]
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.gather(*goodbye, return_exceptions=True), _GOODBYE_S)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=_GOODBYE_S)

    @staticmethod
    async def _goodbye(conn: Connection) -> None:
        await async_write_event(Error(text="server stopping", code="stopping").event(),
                                conn.writer)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._stop is not None and self._stop.is_set():
            writer.close()
            return
        if self._places_taken() >= self.settings.max_clients and not self._make_room():
            with self._lock:
                self.counts["refused_clients"] += 1
            await self._refuse_busy(reader, writer)
            return
        _bound_send_buffer(writer)
        conn = Connection(self, reader, writer)
        task = asyncio.current_task()
        if task is None:  # asyncio runs every client callback as a task
            raise RuntimeError("no current task")
        self._conns[task] = conn
        with self._lock:
            self.counts["connections"] += 1
        try:
            await conn.run()
        except asyncio.CancelledError:  # the server stops: ended here, not in asyncio's
            pass  # stream callback (which logs a cancelled client task as an error, 3.11)
        finally:
            self._conns.pop(task, None)

    def _places_taken(self) -> int:
        """Connections that hold a place (not those closing: replaced, answered, gone)."""
        return sum(not conn.leaving for conn in self._conns.values())

    def _make_room(self) -> bool:
        """The server is full: the connection waiting longest for a request (at least
        ``PLACE_GRACE_S``; never one serving a request) gives its place to a newcomer. False
        when every connection is busy."""
        now = time.monotonic()
        idle = [(since, conn) for conn in self._conns.values()
                if (since := conn.idle_s(now)) is not None and since >= PLACE_GRACE_S]
        if not idle:
            return False
        since, conn = max(idle, key=lambda pair: pair[0])
        conn.replace(f"the server is full (at most {self.settings.max_clients} clients) and "
                     f"this connection had no request for {since:.1f} s: its place goes to a "
                     "new client")
        with self._lock:
            self.counts["replaced_clients"] += 1
        log.info("wyoming_client_replaced", peer=conn.peer, idle_s=round(since, 1))
        return True

    async def _refuse_busy(self, reader: asyncio.StreamReader,
                           writer: asyncio.StreamWriter) -> None:
        reason = f"too many clients (at most {self.settings.max_clients}): try again later"
        log.info("wyoming_client_refused", reason=reason)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(async_write_event(
                Error(text=reason, code="busy").event(), writer), _GOODBYE_S)
        if self._lingering >= _MAX_LINGERING:
            writer.close()
            return
        self._lingering += 1
        try:
            await linger_close(reader, writer)
        finally:
            self._lingering -= 1

    def public(self, reason: str) -> str:
        """``reason`` as a network client may read it: no local path of the models directory
        (the log keeps the whole reason)."""
        models = self.catalog.voices.models_dir
        for where in {str(models.absolute()), str(models.resolve()), str(models)}:
            if where not in (".", "/"):
                reason = reason.replace(where, "models")
        return reason

    def count(self, key: str) -> None:
        """One more ``key`` in :meth:`stats` (any thread)."""
        with self._lock:
            self.counts[key] += 1

    def cancel(self, chunks: Iterator[Any]) -> None:
        """Stop a synthesis that will not be sent (its client dropped, cut or timed out): the
        generator is closed on the pool, once a chunk it is still making is done."""
        self.count("cancelled_syntheses")
        with contextlib.suppress(RuntimeError):  # the pool shut down: the process ends
            self.pool.submit(_close, chunks)

    async def in_pool(self, function: Callable[..., _T], *args: Any) -> _T:
        """``function(*args)`` on the synthesis pool."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.pool, functools.partial(function, *args))

    # -- counting ---------------------------------------------------------------------------

    def note_error(self, reason: str) -> None:
        with self._lock:
            self.last_error = reason[:_MAX_ERROR_CHARS]

    def record(self, outcome: WyomingOutcome, request: _Request,
               reason: str | None = None) -> None:
        """One request ended (loop thread): counted here and in the health report's
        request window."""
        with self._lock:
            self.counts["requests"] += 1
            self.counts[outcome] += 1
            if reason is not None:
                self.last_error = reason[:_MAX_ERROR_CHARS]
        log.info("wyoming_request_ended", outcome=outcome, reason=reason,
                 audio_s=round(request.audio_s, 3),
                 first_audio_ms=None if request.first_audio_s is None
                 else round(request.first_audio_s * 1000, 1))
        if self.on_outcome is not None:
            played = outcome is Outcome.FINISHED
            self.on_outcome(outcome, synthesis_s=request.synthesis_s if played else None,
                            audio_s=request.audio_s if played else None,
                            first_audio_s=request.first_audio_s if played else None)

    def stats(self) -> WyomingSection:
        """The health report's ``wyoming`` section (any thread)."""
        with self._lock:
            counts = dict(self.counts)
            last_error = self.last_error
        problem = self.bind_error if not self.listening else None
        return {"enabled": True, "uri": self.settings.uri, "listening": self.listening,
                "port": self.port if self.scheme == "tcp" else None,
                "clients": len(self._conns), "max_clients": self.settings.max_clients,
                "max_syntheses": self.settings.max_syntheses,
                "connections": counts["connections"],
                "refused_clients": counts["refused_clients"],
                "replaced_clients": counts["replaced_clients"], "requests": counts["requests"],
                "dropped_clients": counts["dropped_clients"],
                "cancelled_syntheses": counts["cancelled_syntheses"],
                "finished": counts[Outcome.FINISHED], "failed": counts[Outcome.FAILED],
                "rejected": counts[Outcome.REJECTED],
                "interrupted": counts[Outcome.INTERRUPTED],
                "last_error": last_error, "zeroconf": self.zeroconf,
                "state": "degraded" if problem else "ok", "reason": problem}


def _bound_send_buffer(writer: asyncio.StreamWriter) -> None:
    """Fix the socket's send buffer at ``SEND_BUFFER_BYTES``: the kernel would otherwise grow it
    to megabytes for a client that does not read, taking minutes of audio before a write
    blocks and ``write_timeout_s`` can tell."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)


def _close(chunks: Iterator[Any]) -> None:
    """Close a synthesis generator (on the pool), waiting out a ``next`` still running on
    another pool thread."""
    close = getattr(chunks, "close", None)
    for _ in range(_CLOSE_TRIES):
        try:
            if close is not None:
                close()
            return
        except ValueError:  # "generator already executing"
            time.sleep(0.01)
