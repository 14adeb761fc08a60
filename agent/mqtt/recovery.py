"""After a restart: a final event for every request the request journal kept from the last run.

:func:`answer_journalled` runs once at start-up, before the dispatcher takes any new command: it
seeds the tracker with the outcomes of the last run's repeat window, then answers each journalled
request ``failed`` (``agent restarted``) or, with ``mqtt.journal.replay``, queues it again when
that is safe. A request is forgotten only after its answer is published. Design:
docs/internals.md#recovery-after-a-restart.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import ValidationError

from agent.logs import get_logger
from agent.mqtt.dispatch import speak_request
from agent.mqtt.journal import Replay, RequestJournal
from agent.mqtt.journal_records import JournalEntry
from agent.mqtt.protocol import SpeakCommand
from agent.mqtt.publisher import ReplyRoute
from agent.mqtt.repeats import EndedWith
from agent.mqtt.topics import Topic
from agent.mqtt.tracker import OpenRefused, RequestTracker
from agent.outcomes import Outcome
from agent.pipeline.jobs import JobQueue, JobsFull, SpeakJob

if TYPE_CHECKING:
    from agent.settings import Settings

__all__ = ["RESTARTED", "Recovered", "answer_journalled"]

log = get_logger(__name__)

RESTARTED = "agent restarted"
"""The reason of the final event of a journalled request that is not played."""
MAX_REPLAYS = 1
_SPEAK = "speak"
"""The only command the journal keeps."""


@dataclass(frozen=True, slots=True)
class Recovered:
    """What :func:`answer_journalled` did."""

    failed: int = 0
    replayed: int = 0


def answer_journalled(journal: RequestJournal, tracker: RequestTracker, jobs: JobQueue,
                      settings: Settings, *, reply_allowed: Callable[[Topic], bool]) -> Recovered:
    """Load the journal and answer (or queue again) what it holds. See the module docstring.

    ``reply_allowed`` checks a journalled Response Topic as the intake checks a new one."""
    replay = settings.mqtt.journal.replay
    failed = replayed = 0
    entries = journal.load()
    now = time.time()
    for ended in journal.recent_outcomes():
        outcome = EndedWith(Outcome(ended.event), ended.reason)
        tracker.remember_ended(ended.request_id, _SPEAK, outcome, now - ended.ended_at)
    for entry in entries:
        reply = entry.reply
        if reply is not None and not reply_allowed(reply.topic):
            log.warning("journalled_reply_route_refused", id=entry.request_id,
                        topic=reply.topic.value)
            reply = None
        why = _not_replayable(entry, replay)
        job = None if why is not None else _job(entry, settings.synthesis.max_text_chars)
        if why is None and job is None:
            why = "it no longer passes the checks of a new request"
        if job is not None and _queue_again(entry, job, reply, tracker, jobs,
                                            settings.models.default_voice):
            replayed += 1
            continue
        reason = RESTARTED if not replay else f"{RESTARTED}; {why or 'it could not be queued'}"
        tracker.answer(entry.request_id, entry.command, Outcome.FAILED, reason=reason,
                       reply=reply, hermes=entry.hermes)
        journal.closed(entry.request_id, Outcome.FAILED, reason)
        failed += 1
    if failed or replayed:
        log.info("journalled_requests_answered", failed=failed, replayed=replayed)
    return Recovered(failed, replayed)


def _not_replayable(entry: JournalEntry, replay: bool) -> str | None:
    """Why ``entry`` is not played again (None: it may be)."""
    if not replay or entry.speak is None:
        return "it was journalled without its text (replay was off)"
    if entry.begun:
        return "it had begun, so it is not played again"
    if entry.replays >= MAX_REPLAYS:
        return "it was replayed once already"
    if entry.deadline is not None and entry.deadline <= time.time():
        return "it expired before it could be played"
    return None


def _job(entry: JournalEntry, max_text_chars: int) -> SpeakJob | None:
    """The speak job of a journalled request, checked as a new command would be."""
    try:
        command = SpeakCommand.model_validate({"id": entry.request_id, **(entry.speak or {})},
                                              context={"max_text_chars": max_text_chars})
        request = speak_request(command)
    except (ValidationError, ValueError) as exc:
        log.warning("journalled_request_invalid", id=entry.request_id, error=str(exc))
        return None
    deadline = (None if entry.deadline is None
                else time.monotonic() + (entry.deadline - time.time()))
    return SpeakJob(entry.request_id, request, deadline)


def _queue_again(entry: JournalEntry, job: SpeakJob, reply: ReplyRoute | None,  # noqa: PLR0917
                 tracker: RequestTracker, jobs: JobQueue, default_voice: str) -> bool:
    """Open the request again (``accepted``, ``replayed``) and queue its job; False when it
    cannot be (the journal or the queue is full)."""
    speak = entry.speak or {}
    try:
        opened = tracker.open(entry.request_id, entry.command, reply=reply, hermes=entry.hermes,
                              subject=Replay(job, entry.replays + 1, entry.accepted_at),
                              voice=job.request.voice or default_voice,
                              priority=speak.get("priority"), pending=tracker.pending(),
                              replayed=True)
    except OpenRefused as exc:
        log.warning("journalled_request_not_replayed", id=entry.request_id, reason=str(exc))
        return False
    if not opened:
        return False
    try:
        jobs.put(job)
    except JobsFull:
        tracker.finish(entry.request_id, Outcome.FAILED,
                       reason=f"{RESTARTED}; the speak queue is full ({jobs.maxsize})")
    return True
