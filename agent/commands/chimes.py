"""``--chime`` for ``tts-agent say`` and ``synth``: a chime before the speech (docs/chimes.md)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from agent.commands import UsageError

if TYPE_CHECKING:
    from agent.audio.chimes import Chimes
    from agent.settings import Settings

__all__ = ["add_chime_argument", "checked_chime", "register"]


def register(subparsers: Any) -> None:
    """Nothing to register: ``say`` and ``synth`` take ``--chime``."""


def add_chime_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--chime", metavar="NAME",
                        help="play the chime NAME (chimes.dir/NAME.wav) right before the speech; "
                             "'' = none (default: chimes.by_priority's chime for normal, if any)")


def checked_chime(name: str | None, settings: Settings,
                  priority: str = "normal") -> tuple[Chimes, str | None]:
    """The chimes of ``settings`` and the chime to play: ``name``, else the priority's default
    (``""``: none); the admission's chime stage (:func:`agent.pipeline.admit.chime_of`). An
    unknown or unplayable chime is a :class:`UsageError` with the reason; a default chime that
    is not there is left out (logged), as the daemon does."""
    from agent.audio.chimes import ChimeError, Chimes
    from agent.pipeline.admit import Ask, Context, Refusal, chime_of

    chimes = Chimes(settings.chimes.dir, settings.chimes.by_priority)

    def problem(chime: str) -> str | None:
        try:
            chimes.get(chime)
        except ChimeError as exc:
            return str(exc)
        return None

    context = Context(max_text_chars=settings.synthesis.max_text_chars,
                      chime_problem=problem, chime_default=chimes.default_for)
    chosen = chime_of(Ask("", chime=name, priority=priority), context)
    if isinstance(chosen, Refusal):
        raise UsageError(f"--chime: {chosen.reason}")
    return chimes, chosen
