"""Logging never fails the code that logs (:mod:`agent.logs`)."""

from __future__ import annotations

import io
import sys

import pytest

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
