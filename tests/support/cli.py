"""The command line, run two ways: ``python -m agent ...`` in a fresh interpreter
(:func:`agent_cli`, for tests under ``tests/integration/``) and a ``main(argv)`` in this process
(:func:`in_process`, for unit tests). Both answer a :class:`subprocess.CompletedProcess` with
text output, so a test asserts ``returncode``, ``stdout`` and ``stderr`` the same way either way.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

AGENT = (sys.executable, "-m", "agent")
"""The argv prefix of ``tts-agent`` in this interpreter, for a test that needs a ``Popen``."""


def agent_cli(*args: str | os.PathLike[str], env: Mapping[str, str] | None = None,
              stdin: str | None = None, timeout: float = 120, cwd: Path | str | None = None,
              user: int | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``python -m agent ARGS`` and wait for it; output captured as text, never ``check``.

    ``env`` is the child's whole environment (None: this process's); ``stdin`` is written to its
    standard input; ``timeout`` (s) raises :class:`subprocess.TimeoutExpired` past it."""
    return subprocess.run([*AGENT, *map(str, args)], input=stdin, capture_output=True,
                          text=True, env=None if env is None else dict(env), cwd=cwd,
                          timeout=timeout, check=False, user=user)


def in_process(*args: str | os.PathLike[str],
               main: Callable[[list[str]], int | None] | None = None,
               ) -> subprocess.CompletedProcess[str]:
    """Call ``main(ARGS)`` (default :func:`agent.cli.main`) here, as Python would run it as a
    program: its standard output and error captured, ``SystemExit`` turned into the exit status
    (a message, as Python does, printed on stderr with status 1)."""
    if main is None:
        from agent.cli import main as agent_main

        main = agent_main
    argv: Sequence[str] = [str(arg) for arg in args]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(list(argv))
        except SystemExit as exit_:
            status = _status(exit_.code, err)
    return subprocess.CompletedProcess(list(argv), status or 0, out.getvalue(), err.getvalue())


def _status(code: object, err: io.StringIO) -> int:
    if code is None or isinstance(code, int):
        return code or 0
    print(code, file=err)
    return 1
