"""Which espeak-ng build a process loads: the training build when installed, else the system's.

The *training build* is the espeak-ng library and data inside piper-phonemize 1.1.0, the
phonemizer the voices were trained with; ``./build.sh`` and ``systemd/install.sh`` unpack it
into ``<sys.prefix>/share/tts-agent/espeak-ng`` (:mod:`agent.text.espeak_fetch`), so each
virtual environment carries its own. ``TTS_AGENT_ESPEAK_LIBRARY`` names another library (with
``TTS_AGENT_ESPEAK_DATA``), or ``system`` for the distribution's ``libespeak-ng1``.
Why: docs/text.md#which-espeak-ng-and-why.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DATA_ENV", "LIBRARY_ENV", "LIBRARY_FILE", "SYSTEM", "TRAINING_SHARE", "Choice",
           "choose", "training_dir"]

LIBRARY_ENV = "TTS_AGENT_ESPEAK_LIBRARY"
"""Environment variable: the espeak-ng shared library to load, or ``system``."""
DATA_ENV = "TTS_AGENT_ESPEAK_DATA"
"""Environment variable: the ``espeak-ng-data`` directory that goes with that library."""
SYSTEM = "system"
"""The value of ``TTS_AGENT_ESPEAK_LIBRARY`` (or ``library=``) that asks for the system build."""
TRAINING_SHARE = Path("share") / "tts-agent" / "espeak-ng"
"""Where, under ``sys.prefix``, the training build is installed."""
LIBRARY_FILE = "libespeak-ng-training.so.1"
"""The training build's library file in that directory (beside ``espeak-ng-data``)."""
SOURCE_FILE = "source.json"
"""What the directory was unpacked from (written by :mod:`agent.text.espeak_fetch`)."""


@dataclass(frozen=True, slots=True)
class Choice:
    """The build to load: ``kind`` is ``training``, ``system`` or ``custom`` (named by hand)."""

    kind: str
    library: str | None
    """A path or loader name; None: the system library, found by the loader."""
    data_path: str | None
    """Its ``espeak-ng-data``; None: the library's built-in path."""
    source: str = ""
    """Where a training build came from (``piper-phonemize==1.1.0 (…whl)``)."""


def training_dir(prefix: str | None = None) -> Path:
    """The training build's directory for the environment at ``prefix`` (default: this one)."""
    return Path(prefix or sys.prefix) / TRAINING_SHARE


def _training(directory: Path) -> Choice | None:
    library, data = directory / LIBRARY_FILE, directory / "espeak-ng-data"
    if not (library.is_file() and (data / "phontab").is_file()):
        return None
    try:
        source = json.loads((directory / SOURCE_FILE).read_text(encoding="utf-8"))
        origin = f"{source['requirement']} ({source['wheel']})"
    except (OSError, ValueError, KeyError, TypeError):
        origin = "unknown source"
    return Choice("training", str(library), str(data), origin)


def choose(library: str | None = None, data_path: str | None = None, *,
           environ: Mapping[str, str] | None = None, prefix: str | None = None) -> Choice:
    """The build for these arguments, else the environment variables, else the default.

    The default is the training build under ``prefix`` (``sys.prefix``) when it is installed
    whole (library and ``phontab``), else the system library.
    """
    env = os.environ if environ is None else environ
    library = library or env.get(LIBRARY_ENV) or None
    data_path = data_path or env.get(DATA_ENV) or None
    if library == SYSTEM:
        return Choice(SYSTEM, None, data_path)
    if library or data_path:
        return Choice("custom", library, data_path)
    return _training(training_dir(prefix)) or Choice(SYSTEM, None, None)
