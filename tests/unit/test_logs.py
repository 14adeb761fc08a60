"""Logging never fails the code that logs (:mod:`agent.logs`)."""

from __future__ import annotations

import io
import os
import sys
import threading

import pytest
import structlog

from agent.logs import configure_logging, get_logger


@pytest.mark.parametrize("fault", ["closed", "broken pipe"])
def test_a_line_that_cannot_be_written_is_dropped_not_raised(
    fault: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    class BrokenPipe(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

    stream = io.StringIO() if fault == "closed" else BrokenPipe()
    if fault == "closed":
        stream.close()
    monkeypatch.setattr(sys, "stderr", stream)
    configure_logging("info", "json")
    try:
        get_logger(__name__).info("request_event", id="r1")  # e.g. in the middle of a request
    finally:
        monkeypatch.undo()
        configure_logging("info", "auto")


def test_lines_go_to_the_stderr_of_the_moment(monkeypatch: pytest.MonkeyPatch) -> None:
    configure_logging("info", "json")
    later = io.StringIO()
    monkeypatch.setattr(sys, "stderr", later)
    get_logger(__name__).info("written_here")
    monkeypatch.undo()
    configure_logging("info", "auto")
    assert '"event": "written_here"' in later.getvalue()


def test_threads_logging_while_the_streams_are_replaced_neither_raise_nor_crash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Unconfigured, as an agent started in-process by a test is, while pytest's capture swaps
    ``sys.stdout``/``sys.stderr`` under its threads: structlog's default logger ``print``-ed,
    and CPython 3.11's ``print`` writes to a ``sys.stdout`` it holds no reference to (the log
    call raised "I/O operation on uninitialized object", then the process segfaulted)."""
    monkeypatch.setattr(sys, "stdout", sys.stdout)
    monkeypatch.setattr(sys, "stderr", sys.stderr)
    old = structlog.get_config()
    structlog.reset_defaults()
    log = get_logger(__name__)
    stop = threading.Event()
    errors: list[BaseException] = []

    def keep_logging() -> None:
        while not stop.is_set():
            try:
                log.info("request_event", id="r1", reason="x" * 40)
            except Exception as exc:
                errors.append(exc)
                return

    threads = [threading.Thread(target=keep_logging, daemon=True) for _ in range(2)]
    try:
        for thread in threads:
            thread.start()
        for _ in range(3000):
            for name in ("stdout", "stderr"):  # as pytest's capture: each write a system call
                setattr(sys, name, io.TextIOWrapper(open(os.devnull, "wb", buffering=0),  # noqa: SIM115
                                                    encoding="utf-8", write_through=True))
    finally:
        stop.set()
        for thread in threads:
            thread.join(5)
        structlog.configure(**old)
    assert errors == []
