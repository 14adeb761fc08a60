"""The request journal: accepted, unfinished speak requests kept on disk across a crash.

The tracker tells it, as its observer, when a speak request opens, is taken up and ends; after
a crash :func:`agent.mqtt.recovery.answer_journalled` answers (or replays) what it holds before
any new command. An append-only file of JSON records (:mod:`agent.mqtt.journal_records`), with
the outcomes of recently ended requests, bounded and compacted. Called under the tracker's
lock. While the file cannot be written a request is accepted unjournaled (``accepted`` says
``journaled: false``, health ``degraded``) and each accept tries to rewrite it. The records,
durability, bounds and loading: docs/internals.md#the-request-journal.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from agent.audio.item import PRIORITIES
from agent.fsutil import atomic_write
from agent.logs import get_logger
from agent.mqtt.journal_records import Ended, JournalEntry, Outcomes, mark, read_records
from agent.mqtt.protocol import FINAL_EVENTS
from agent.mqtt.repeats import RECENT_IDS, RECENT_TTL_S
from agent.mqtt.tracker import OpenRefused
from agent.pipeline.jobs import SpeakJob
from agent.settings.paths import JOURNAL_NAME, device_state_dir
from agent.text.document import looks_like_ssml

if TYPE_CHECKING:
    from agent.mqtt.hermes import HermesOrigin
    from agent.mqtt.protocol import EventName
    from agent.mqtt.publisher import ReplyRoute
    from agent.settings import Settings

__all__ = ["JOURNAL_NAME", "MAX_ENDED_BYTES", "Replay", "RequestJournal"]

log = get_logger(__name__)

COMPACT_MIN_BYTES = 64 * 1024
"""The file is not compacted below this size."""
MAX_ENDED_BYTES = 1024 * 1024
"""The records of ended requests' outcomes kept at most (beyond it the oldest are dropped)."""
_NAMES = {level: name for name, level in PRIORITIES.items()}


@dataclass(frozen=True, slots=True)
class Replay:
    """The tracker's ``subject`` for a request queued again from the journal."""

    job: SpeakJob
    replays: int
    accepted_at: float
    """Unix time the request was first accepted (s)."""


class RequestJournal:
    """The journal file and the unfinished requests in it. See the module docstring.

    ``keep_speak`` (replay on) stores what to say and the ``begun`` marks. A journal made with
    ``enabled=False`` never touches the disk (:meth:`load` returns nothing).
    """

    def __init__(self, path: Path, *, max_entries: int, max_bytes: int,
                 keep_speak: bool = False, enabled: bool = True) -> None:
        self.path = path
        self.enabled = enabled
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.keep_speak = keep_speak
        self._lock = threading.Lock()
        self._live: dict[str, JournalEntry] = {}
        self._sizes: dict[str, int] = {}
        self._live_bytes = 0
        self._file_bytes = 0
        self._ended = Outcomes(RECENT_TTL_S, RECENT_IDS, MAX_ENDED_BYTES)
        self._fd: int | None = None
        self._started = False
        """:meth:`load` ran (and :meth:`close` did not): requests are to be journalled."""
        self._problem: str | None = None
        """Why the file cannot be written now (its path and the error); None: it can."""
        self.refused = 0
        """Requests refused because the journal was full."""
        self.unjournaled = 0
        """Requests accepted while the file could not be written (``journaled: false``)."""

    @classmethod
    def for_settings(cls, settings: Settings) -> RequestJournal:
        """The journal ``mqtt.journal`` asks for, not yet loaded."""
        journal = settings.mqtt.journal
        default = device_state_dir(settings.cache.dir, settings.device_id) / JOURNAL_NAME
        return cls(journal.file or default,
                   max_entries=journal.max_entries, max_bytes=journal.max_bytes,
                   keep_speak=journal.replay, enabled=journal.enabled)

    @property
    def active(self) -> bool:
        """Loaded and writable (False before :meth:`load`, after a failed one, after close)."""
        return self._fd is not None

    def entries(self) -> list[JournalEntry]:
        """The unfinished requests, in the order accepted."""
        with self._lock:
            return list(self._live.values())

    @property
    def problem(self) -> str | None:
        """Why the file cannot be written now (``cannot write <path>: <error>``), or None."""
        return self._problem

    def count(self) -> int:
        """The unfinished requests it knows of (on disk, or kept in memory while broken)."""
        with self._lock:
            return len(self._live)

    def recent_outcomes(self) -> list[Ended]:
        """Outcomes of the requests that ended inside the repeat window, oldest first."""
        with self._lock:
            return self._ended.values(time.time())

    # -- main thread ----------------------------------------------------------------------

    def load(self) -> list[JournalEntry]:
        """Read what an earlier run left (see the module docstring), keep it, open the file
        for appending; the requests left unfinished. When the file cannot be read the journal
        stays off (logged) and nothing is returned; when it can be read but not rewritten,
        what it holds is returned all the same (better answered twice than never)."""
        if not self.enabled:
            return []
        self._started = True
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            data, problem = self._read()
        except OSError as exc:
            with self._lock:
                self._broken(exc)
            return []
        journalled = read_records(data)
        entries, bad, torn = journalled.entries, journalled.bad, journalled.torn
        if torn:
            log.warning("request_journal_torn_tail", path=str(self.path))
        if entries:
            log.warning("request_journal_left_over", requests=len(entries))
        with self._lock:
            self._live = entries
            self._sizes = {key: len(entry.record()) for key, entry in entries.items()}
            self._live_bytes = sum(self._sizes.values())
            self._ended = Outcomes(RECENT_TTL_S, RECENT_IDS, MAX_ENDED_BYTES)
            for ended in journalled.ended.values():
                self._ended.keep(ended)
            try:
                move = None
                if problem is not None or bad:
                    aside = self.path.with_name(self.path.name + ".corrupt")
                    log.error("request_journal_corrupt", path=str(self.path),
                              moved_to=str(aside), problem=problem, unreadable_lines=bad,
                              kept=len(entries))
                    move = f"{problem or 'corrupt'}, cannot move it aside"
                    os.replace(self.path, aside)
                    move = None
                self._rewrite()
            except OSError as exc:
                self._broken(exc, move)
        return list(entries.values())

    def close(self) -> None:
        """Sync and close the file (shutdown); emptied when nothing is left unfinished and no
        outcome is inside the repeat window."""
        with self._lock:
            self._started = False
            if self._fd is None:
                return
            try:
                if not self._live and not self._ended.values(time.time()):
                    os.ftruncate(self._fd, 0)
                os.fsync(self._fd)
            except OSError as exc:
                log.error("request_journal_close_failed", error=str(exc))
            self._close_fd()

    def _read(self) -> tuple[bytes, str | None]:
        """The file's bytes (bounded) and what is wrong with it, if anything."""
        limit = 2 * (self.max_bytes + MAX_ENDED_BYTES) + COMPACT_MIN_BYTES
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        except FileNotFoundError:
            return b"", None
        except OSError as exc:
            return b"", ("a symbolic link" if exc.errno == errno.ELOOP
                         else f"unreadable: {exc.strerror or exc}")
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return b"", "not a regular file"
            with os.fdopen(os.dup(fd), "rb") as handle:
                data = handle.read(limit + 1)
        except OSError as exc:
            return b"", f"unreadable: {exc.strerror or exc}"
        finally:
            os.close(fd)
        if len(data) > limit:
            return data[:limit], f"larger than {limit} bytes"
        return data, None

    # -- the tracker's observer (under the tracker's lock) ---------------------------------

    def opened(self, request_id: str, command: str, *, reply: ReplyRoute | None,
               hermes: HermesOrigin | None, subject: object) -> bool:
        """Journal the request durably; False when the file cannot be written (the request is
        kept in memory, for the rewrite that brings the file back); :class:`OpenRefused` when
        the journal is full. True without a word when the journal is off."""
        replays, accepted_at, job = 0, time.time(), subject
        if isinstance(subject, Replay):
            replays, accepted_at, job = subject.replays, subject.accepted_at, subject.job
        deadline = speak = None
        if isinstance(job, SpeakJob):
            if job.deadline is not None:
                deadline = time.time() + (job.deadline - time.monotonic())
            if self.keep_speak and job.request.priority in _NAMES:
                request = job.request
                speak = {"text": request.text, "voice": request.voice,
                         "priority": _NAMES[request.priority], "volume": request.volume,
                         "speed": request.speed, "at": request.start_at and request.start_at * 1000}
                if (request.document is not None) != looks_like_ssml(request.text):
                    speak["ssml"] = request.document is not None  # else told by the text
                if request.chime is not None:  # the chime chosen at intake
                    speak["chime"] = request.chime
        entry = JournalEntry(request_id, command, accepted_at, deadline, reply, hermes, speak,
                             replays)
        record = entry.record()
        with self._lock:
            if not self._started:
                return True
            self._check_room(request_id, len(record))
            if self._fd is None or not self._in_place():
                self._recover()  # each accept tries again while the file cannot be written
            if self._fd is not None and self._oversized():
                self._compact()
            journaled = self._append(record, sync=True)
            self._ended.forget(request_id)  # open again: its new outcome will replace it
            self._live_bytes += len(record) - self._sizes.get(request_id, 0)
            self._live.pop(request_id, None)
            self._live[request_id] = entry
            self._sizes[request_id] = len(record)
            self.unjournaled += not journaled
            return journaled

    def noted(self, request_id: str) -> None:
        """The worker took the request up: mark it begun (replay on only), durably."""
        with self._lock:
            entry = self._live.get(request_id)
            if not self.keep_speak or entry is None or entry.begun:
                return
            self._live[request_id] = replace(entry, begun=True)  # a rewrite holds it
            if self._fd is not None and not (self._oversized() and self._compact()):
                self._append(mark("begun", request_id), sync=True)

    def closed(self, request_id: str, event: EventName | None = None,
               reason: str | None = None) -> None:
        """The request ends with ``event`` (``reason``): forget it, keep its outcome for the
        repeat window (synced only when it could otherwise be replayed)."""
        with self._lock:
            entry = self._live.pop(request_id, None)
            if entry is None:
                return
            self._live_bytes -= self._sizes.pop(request_id, 0)
            record = mark("close", request_id)
            if event is not None and event in FINAL_EVENTS:
                record = self._ended.keep(Ended(request_id, event, reason, time.time()))
            if self._fd is None:  # cannot be written now: the rewrite that brings it back will
                return
            if not self._live and not self._ended.bytes and self._file_bytes > COMPACT_MIN_BYTES:
                self._truncate()
                return
            if self._oversized() and self._compact():  # the rewrite has its outcome only
                return
            replayable = entry.speak is not None and not entry.begun
            self._append(record, sync=replayable)

    # -- file operations (journal lock held) ----------------------------------------------

    def _check_room(self, request_id: str, size: int) -> None:
        count = len(self._live) + (request_id not in self._live)
        total = self._live_bytes - self._sizes.get(request_id, 0) + size
        if count > self.max_entries or total > self.max_bytes:
            self.refused += 1
            log.warning("request_journal_full", id=request_id, requests=len(self._live),
                        bytes=self._live_bytes)
            raise OpenRefused(f"busy: request journal full ({len(self._live)} requests, "
                              f"{self._live_bytes} bytes)")

    def _append(self, record: bytes, *, sync: bool) -> bool:
        """Write ``record`` (synced); False when it could not be (the journal is then broken
        until a rewrite: a record cut by the failure is never followed by another)."""
        fd = self._fd
        if fd is None:
            return False
        try:
            view = memoryview(record)
            while view:
                written = os.write(fd, view)
                self._file_bytes += written
                view = view[written:]
            if sync:
                os.fdatasync(fd)
        except OSError as exc:
            log.error("request_journal_write_failed", path=str(self.path), error=str(exc))
            self._broken(exc)
            return False
        return True

    def _truncate(self) -> None:
        """Nothing is unfinished: any state of the file reads as empty, so no sync is needed."""
        if self._fd is None:
            return
        try:
            os.ftruncate(self._fd, 0)
            self._file_bytes = 0
        except OSError as exc:
            log.error("request_journal_write_failed", path=str(self.path), error=str(exc))
            self._broken(exc)

    def _oversized(self) -> bool:
        """The file has grown past twice its unfinished records: compact it before the next
        record (an ``open`` or a mark), so it never outgrows what :meth:`load` reads."""
        return self._file_bytes > max(COMPACT_MIN_BYTES,
                                      2 * (self._live_bytes + self._ended.bytes))

    def _compact(self) -> bool:
        """Rewrite the file with the unfinished records and the outcomes inside the window
        only; False when that failed."""
        try:
            self._rewrite()
        except OSError as exc:  # keep appending to the old file, if it is still open
            log.error("request_journal_compaction_failed", path=str(self.path), error=str(exc))
            if self._fd is None:
                self._broken(exc)
            return False
        return True

    def _in_place(self) -> bool:
        """The open file is still the one at :attr:`path` (not removed, nor replaced)."""
        if self._fd is None:
            return False
        try:
            here, mine = os.stat(self.path, follow_symlinks=False), os.fstat(self._fd)
        except OSError:
            return False
        return (here.st_dev, here.st_ino) == (mine.st_dev, mine.st_ino)

    def _recover(self) -> None:
        """Write the file again from what is known (the unfinished requests, the outcomes);
        it stays broken, silently, when that fails again."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._rewrite()
        except OSError as exc:
            self._broken(exc)
            return
        if self._problem is not None:
            log.warning("request_journal_recovered", path=str(self.path),
                        requests=len(self._live), unjournaled=self.unjournaled)
        self._problem = None

    def _broken(self, exc: OSError, why: str | None = None) -> None:
        """The file cannot be written: say so once per episode, and stop appending to it."""
        error = exc.strerror or str(exc)
        problem = f"cannot write {self.path}: {f'{why}: {error}' if why else error}"
        if self._problem is None:
            log.error("request_journal_unavailable", path=str(self.path), error=str(exc),
                      hint="speak requests are accepted with journaled: false (not kept "
                      "across a crash) until it can be written again")
        self._problem = problem
        self._close_fd()

    def _rewrite(self) -> None:
        """Replace the file, atomically, by the outcomes inside the window and the unfinished
        records (in that order: an id's ``open`` after its outcome is open again); reopen it."""
        data = b"".join([*(ended.record() for ended in self._ended.values(time.time())),
                         *(entry.record() for entry in self._live.values())])
        atomic_write(self.path, data, mode=0o600, prefix=f".{self.path.name}.")
        self._close_fd()  # the old file is gone: never append to it again
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
        self._file_bytes = len(data)
        dir_fd = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)  # the rename itself survives a power cut
        finally:
            os.close(dir_fd)

    def _close_fd(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
