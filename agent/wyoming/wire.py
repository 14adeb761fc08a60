"""Reading Wyoming events with bounds.

The ``wyoming`` library's own reader trusts the lengths a peer announces (``data_length``,
``payload_length``) and buffers that much: a client could make the agent hold gigabytes. This
reader refuses an event larger than ``max_bytes`` (header line, data and payload together)
before reading its body, parses its JSON with bounded nesting (:mod:`agent.jsonbound`: deep
JSON is an error event, never a ``RecursionError``), and says why in one line. Events are
written with the library's :func:`wyoming.event.async_write_event`.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from typing import Any

from wyoming.event import Event

from agent.jsonbound import JsonError, TooDeep, loads

__all__ = ["ProtocolError", "linger_close", "read_event", "reset_close"]

_MAX_TYPE_CHARS = 64
LINGER_S = 1.0
"""How long a connection that was answered is read (and what comes thrown away) before it is
closed, so the answer is not lost to a reset."""


class ProtocolError(Exception):
    """The peer sent something that is not a Wyoming event within the bounds; the connection
    cannot be read further (the reason is meant for the peer)."""


def _length(header: dict[str, Any], key: str) -> int:
    value = header.get(key) or 0
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ProtocolError(f"{key} must be a non-negative integer")
    return value


def _object(raw: bytes, what: str, max_bytes: int) -> dict[str, Any]:
    """``raw`` parsed as a JSON object (bounded: :func:`agent.jsonbound.loads`)."""
    try:
        value = loads(raw, max_bytes=max_bytes)
    except TooDeep as exc:
        raise ProtocolError(f"{what} is {exc}") from exc
    except JsonError as exc:
        raise ProtocolError(f"{what} is not JSON") from exc
    if not isinstance(value, dict):
        raise ProtocolError(f"{what} is not a JSON object")
    return value


async def read_event(reader: asyncio.StreamReader, max_bytes: int) -> Event | None:
    """The next event, or None at the end of the stream. Raises :class:`ProtocolError`.

    ``reader``'s own limit (``asyncio.start_server(limit=...)``) bounds the header line; the
    server sets it to ``max_bytes``."""
    try:
        line = await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise ProtocolError("connection closed in the middle of an event") from exc
    except asyncio.LimitOverrunError as exc:
        raise ProtocolError(f"event header longer than {max_bytes} bytes") from exc
    header = _object(line, "event header", max_bytes + 1)  # the line ends in its newline
    kind = header.get("type")
    if not isinstance(kind, str) or not 0 < len(kind) <= _MAX_TYPE_CHARS:
        raise ProtocolError("event has no type")
    data_length, payload_length = _length(header, "data_length"), _length(header, "payload_length")
    if len(line) + data_length + payload_length > max_bytes:
        raise ProtocolError(f"event {kind!r} larger than {max_bytes} bytes")
    data = header.get("data") or {}
    if not isinstance(data, dict):
        raise ProtocolError("event data is not a JSON object")
    try:
        if data_length:
            data.update(_object(await reader.readexactly(data_length), "event data", max_bytes))
        payload = await reader.readexactly(payload_length) if payload_length else None
    except asyncio.IncompleteReadError as exc:
        raise ProtocolError("connection closed in the middle of an event") from exc
    return Event(type=kind, data=data, payload=payload)



async def linger_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                       linger_s: float = LINGER_S) -> None:
    """Close after the last event written: the write side first (the client reads to the
    end), then what the client still sends is read and dropped until it closes too or for
    ``linger_s``. Closing with unread bytes would reset the connection, and a client still
    writing its request would see a broken pipe instead of the ``error`` event sent to it."""
    if writer.transport.is_closing():
        writer.close()
        return
    try:
        await asyncio.wait_for(writer.drain(), linger_s)
        if writer.can_write_eof():
            writer.write_eof()
        async with asyncio.timeout(linger_s):
            while await reader.read(65536):
                pass
    except (TimeoutError, ConnectionError, OSError):
        pass
    finally:
        writer.close()


def reset_close(writer: asyncio.StreamWriter) -> None:
    """Close with a reset: the kernel drops what the client has not read (a plain close
    would keep trying to deliver it, the client seeing an open connection for minutes)."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()
