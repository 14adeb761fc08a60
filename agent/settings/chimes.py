"""The ``[chimes]`` section of the deployment settings: where chimes (short WAV earcons played
before an announcement) are found, and which priority always chimes (docs/chimes.md).

Every field has a description and its bounds; unknown keys are errors.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from agent.settings.paths import AbsPath, checkout_root

__all__ = ["CHIME_NAME_PATTERN", "INSTALLED_CHIMES_DIR", "ChimeSettings", "default_chimes_dir"]

CHIME_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"
"""A chime's name: its file's name without ``.wav``; no dots, no path separators."""
INSTALLED_CHIMES_DIR = Path("/var/lib/tts-agent/chimes")

ChimeName = Annotated[str, StringConstraints(pattern=CHIME_NAME_PATTERN)]


def default_chimes_dir() -> Path:
    """``chimes.dir`` when unset: the checkout's ``chimes/`` (``./build.sh`` generates the
    shipped chimes there), else the installed one (``./build.sh install`` puts them there)."""
    root = checkout_root()
    return root / "chimes" if root is not None else INSTALLED_CHIMES_DIR


class ChimeSettings(BaseModel):
    """Chimes before announcements (docs/chimes.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dir: AbsPath = Field(
        default_factory=default_chimes_dir,
        description="Directory of chimes: NAME.wav files (16-bit PCM, mono or stereo, "
        "8000-48000 Hz), played by name (a speak's chime field, SSML <audio src>).",
    )
    by_priority: dict[Literal["low", "normal", "high", "urgent"], ChimeName] = Field(
        default_factory=dict,
        description="A chime every request of that priority plays first unless it names its "
        "own (or asks for none with chime \"\"), e.g. { urgent = \"alert\" }; a default "
        "chime that is not in the directory is left out (logged), the request still spoken.",
    )
