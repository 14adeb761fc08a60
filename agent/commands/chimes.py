"""``--chime`` for ``tts-agent say`` and ``synth``: a chime before the speech (docs/chimes.md)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from agent.commands import UsageError
from agent.logs import get_logger

if TYPE_CHECKING:
    from agent.audio.chimes import Chimes
    from agent.settings import Settings

__all__ = ["add_chime_argument", "checked_chime", "register"]

log = get_logger(__name__)


def register(subparsers: Any) -> None:
    """Nothing to register: ``say`` and ``synth`` take ``--chime``."""


def add_chime_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--chime", metavar="NAME",
                        help="play the chime NAME (chimes.dir/NAME.wav) right before the speech; "
                             "'' = none (default: chimes.by_priority's chime for normal, if any)")


def checked_chime(name: str | None, settings: Settings,
                  priority: str = "normal") -> tuple[Chimes, str | None]:
    """The chimes of ``settings`` and the chime to play: ``name``, else the priority's default
    (``""``: none). An unknown or unplayable chime is a :class:`UsageError` with the reason; a
    default chime that is not there is left out (logged), as the daemon does."""
    from agent.audio.chimes import ChimeError, Chimes

    chimes = Chimes(settings.chimes.dir, settings.chimes.by_priority)
    chosen = chimes.default_for(priority) if name is None else (name or None)
    if chosen is None:
        return chimes, None
    try:
        chimes.get(chosen)
    except ChimeError as exc:
        if name is not None:
            raise UsageError(f"--chime: {exc}") from exc
        log.warning("default_chime_missing", chime=chosen, priority=priority, reason=str(exc))
        return chimes, None
    return chimes, chosen
