"""``tts-agent send --wait``: wait for a command's final event and print it.

``--timeout`` bounds the *silence*, not the length of the speech (an open request's ``progress``
events keep the wait alive; it lasts at least twice the progress interval ``accepted`` names).
Over MQTT 5 the final event comes on a private Response Topic, over 3.1.1 from the events topic
by id. A helper of :mod:`agent.commands.send`, no sub-command of its
own. Design: docs/internals.md#waiting-for-the-answer.
"""

from __future__ import annotations

import json
import queue
import sys
import time
from typing import TYPE_CHECKING, Any

from agent import jsonbound
from agent.commands import CONFLICT, NO_ANSWER, CommandError, shown
from agent.outcomes import SUCCESS, Outcome

if TYPE_CHECKING:
    from agent.mqtt.client import InboundMessage
    from agent.mqtt.topics import Topic

__all__ = ["CONFLICT_GRACE_S", "NO_ANSWER", "SUCCESS_EVENTS", "await_final", "conflict_line",
           "event_for", "register", "silence_for", "succeeded"]

MAX_EVENT_BYTES = 1 << 20
"""The largest event read (bounded JSON: :mod:`agent.jsonbound`); an agent's are a few KB."""
SUCCESS_EVENTS = SUCCESS
"""Final events that make the exit status 0 (:data:`agent.outcomes.SUCCESS`); any other is 1."""
HEARTBEATS = 2
"""The next event is waited for at least this many of the progress intervals a device's
``accepted`` names (``progress_interval_s``), whatever ``--timeout`` says."""
MAX_INTERVAL_S = 3600.0
"""The largest progress interval believed (``mqtt.progress_interval_s``'s bound)."""
CONFLICT_GRACE_S = 0.5
"""After one device's final event, how long a second one from another agent instance with the
same device id is waited for (its final for the same request): a conflict, exit status 4."""


def register(subparsers: Any) -> None:
    """Nothing to register: ``send`` (:mod:`agent.commands.send`) owns the sub-command."""


def await_final(inbox: queue.Queue[InboundMessage], request_id: str, timeout: float, *,
                reply: Topic | None, correlation: bytes | None, single: bool,
                progress: bool) -> int:
    """Print the events for ``request_id`` until the final one (``single``: one device) or
    until ``timeout`` seconds pass without any; the exit status (see the module docstring)."""
    finals: list[dict[str, Any]] = []
    last: str | None = None
    silence = timeout  # longer once an ``accepted`` names a longer progress interval
    deadline = time.monotonic() + timeout
    lingering = False
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
        silence = silence_for(event, silence)
        if not lingering:
            deadline = time.monotonic() + silence  # a sign of life: the silence starts again
        last = str(event.get("event"))
        if not event.get("final"):
            if progress:
                print(json.dumps(event), flush=True)
            continue
        if (reply is not None and message.topic != reply) or (  # MQTT 5: from the reply topic
                _instance(event) is not None and any(_same(f, event) for f in finals)):
            continue  # ... and a redelivery is not a second answer
        print(json.dumps(event), flush=True)
        finals.append(event)
        if single and (lingering or _instance(event) is None):
            break
        if single:  # another instance may answer too (the same device id)
            lingering, deadline = True, time.monotonic() + min(timeout, CONFLICT_GRACE_S)
    if not finals:
        after = f" after '{shown(last)}'" if last is not None else ""
        raise CommandError(f"no answer to {request_id}: no event for {silence:g} s{after} "
                           "(--timeout)", status=NO_ANSWER)
    if single and len(finals) > 1:
        print(f"tts-agent send: {conflict_line(finals)}", file=sys.stderr, flush=True)
        return CONFLICT
    return 0 if all(succeeded(e) for e in finals) else 1


def _same(one: dict[str, Any], other: dict[str, Any]) -> bool:
    """The same device and agent instance."""
    return (one.get("device"), _instance(one)) == (other.get("device"), _instance(other))


def _instance(event: dict[str, Any]) -> str | None:
    value = event.get("instance")
    return value if isinstance(value, str) else None


def conflict_line(finals: list[dict[str, Any]]) -> str:
    """The line naming a device that answered from more than one agent instance (escaped)."""
    device = str(finals[0].get("device", "?"))
    ids = ", ".join(str(_instance(f)) for f in finals)
    return shown(f"conflict: device {device} answered from {len(finals)} agent instances "
                 f"({ids}): two agents use the same device id")


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


def silence_for(event: dict[str, Any], silence: float) -> float:
    """How long to wait for the next event after ``event``: ``silence`` (``--timeout``, or
    what an earlier event made it), at least :data:`HEARTBEATS` progress intervals of the
    device when ``event`` names its interval (an ``accepted``): a ``--timeout`` at or under
    the interval would end the wait between two ``progress`` events of a long announcement."""
    interval = event.get("progress_interval_s")
    if isinstance(interval, bool) or not isinstance(interval, (int, float)):
        return silence
    if not 0 < interval <= MAX_INTERVAL_S:
        return silence
    return max(silence, HEARTBEATS * float(interval))


def succeeded(event: dict[str, Any]) -> bool:
    """Whether a final event means success; a ``duplicate`` by the outcome it names."""
    kind = event.get("outcome") if event.get("event") == Outcome.DUPLICATE else event.get("event")
    return kind in SUCCESS_EVENTS
