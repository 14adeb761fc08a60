"""``tts-agent send --wait``: wait for a command's final event and print it.

``--timeout`` bounds the *silence*, not the length of the speech (an open request's ``progress``
events keep the wait alive). Over MQTT 5 the final event comes on a private Response Topic, over
3.1.1 from the events topic by id. A helper of :mod:`agent.commands.send`, no sub-command of its
own. Design: docs/internals.md#waiting-for-the-answer.
"""

from __future__ import annotations

import json
import queue
import time
from typing import TYPE_CHECKING, Any

from agent import jsonbound
from agent.commands import NO_ANSWER, CommandError, shown
from agent.outcomes import SUCCESS, Outcome

if TYPE_CHECKING:
    from agent.mqtt.client import InboundMessage
    from agent.mqtt.topics import Topic

__all__ = ["NO_ANSWER", "SUCCESS_EVENTS", "await_final", "event_for", "register", "succeeded"]

MAX_EVENT_BYTES = 1 << 20
"""The largest event read (bounded JSON: :mod:`agent.jsonbound`); an agent's are a few KB."""
SUCCESS_EVENTS = SUCCESS
"""Final events that make the exit status 0 (:data:`agent.outcomes.SUCCESS`); any other is 1."""


def register(subparsers: Any) -> None:
    """Nothing to register: ``send`` (:mod:`agent.commands.send`) owns the sub-command."""


def await_final(inbox: queue.Queue[InboundMessage], request_id: str, timeout: float, *,
                reply: Topic | None, correlation: bytes | None, single: bool,
                progress: bool) -> int:
    """Print the events for ``request_id`` until the final one (``single``: one device) or
    until ``timeout`` seconds pass without any; the exit status (see the module docstring)."""
    finals: list[dict[str, Any]] = []
    last: str | None = None
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        try:
            message = inbox.get(timeout=remaining)
        except queue.Empty:
            break
        event = event_for(message, request_id, reply, correlation)
        if event is None:
            continue
        deadline = time.monotonic() + timeout  # a sign of life: the silence starts again
        last = str(event.get("event"))
        is_final = bool(event.get("final"))
        if is_final and reply is not None and message.topic != reply:
            continue  # the final event is taken from the reply topic (MQTT 5)
        if is_final or progress:
            print(json.dumps(event), flush=True)
        if is_final:
            finals.append(event)
            if single:
                break
    if not finals:
        after = f" after '{shown(last)}'" if last is not None else ""
        raise CommandError(f"no answer to {request_id}: no event for {timeout:g} s{after} "
                           "(--timeout)", status=NO_ANSWER)
    return 0 if all(succeeded(e) for e in finals) else 1


def event_for(message: InboundMessage, request_id: str, reply: Topic | None,
               correlation: bytes | None) -> dict[str, Any] | None:
    """The event in ``message`` when it is about ``request_id`` (a reply only with our
    Correlation Data); None otherwise."""
    try:
        event = jsonbound.loads(message.payload, max_bytes=MAX_EVENT_BYTES)
    except jsonbound.JsonError:  # deep, huge or malformed: not an answer
        return None
    if not isinstance(event, dict) or event.get("id") != request_id:
        return None
    if reply is not None and message.topic == reply and message.correlation_data != correlation:
        return None
    return event


def succeeded(event: dict[str, Any]) -> bool:
    """Whether a final event means success; a ``duplicate`` by the outcome it names."""
    kind = event.get("outcome") if event.get("event") == Outcome.DUPLICATE else event.get("event")
    return kind in SUCCESS_EVENTS
