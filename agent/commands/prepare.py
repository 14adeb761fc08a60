"""``tts-agent prepare``: fill the cache a start reads, so a first start is as fast as later ones.

Loads each installed voice exactly as ``tts-agent run`` would with the same settings file, which
stores onnxruntime's optimised graph and the switchable graph in ``<cache.dir>/ort``. One line per
voice on stdout; a voice that cannot be loaded or stored is an error line and exit 1. Why and when
to run it: docs/internals.md#tts-agent-prepare.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from agent.commands import FAILED, USAGE, CommandError, add_config_argument, settings_from_args

if TYPE_CHECKING:
    from agent.voice.voice import Voice

_SAID = {
    "hit": "ready (already in the cache)",
    "stored": "ready (built and stored in the cache)",
    "off": "loaded (nothing to cache for it: a GPU provider or graph optimisation off)",
}


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "prepare", help="build the installed voices' optimised graphs into cache.dir, so the "
                        "agent's first start is as fast as later ones (build.sh runs it)",
        description="Load every installed voice (or those named with --voice) as `tts-agent "
                    "run` would with the same settings, storing what a start needs in "
                    "<cache.dir>/ort. Exit 0 when each one is ready, 1 when one is not.",
    )
    add_config_argument(parser)
    parser.add_argument("--voice", action="append", metavar="NAME",
                        help="prepare this voice only (repeatable; default: every installed one)")
    parser.set_defaults(handler=prepare)


def prepare(args: argparse.Namespace) -> int:
    from agent.hardware.effective import profile_or_reason
    from agent.library.options import ORT_CACHE_SUBDIR
    from agent.library.voices import VoiceLibrary, VoiceNotFound
    from agent.voice.voice import VoiceLoadError

    settings = settings_from_args(args)
    profile, _why = profile_or_reason(settings)  # as `tts-agent run` resolves it
    voices = VoiceLibrary.for_settings(settings, profile=profile)
    names: list[str] = args.voice or voices.names()
    if not names:
        raise CommandError(f"no voices installed in {settings.models.dir}", status=FAILED)
    cache_dir = settings.cache.dir / ORT_CACHE_SUBDIR
    problems: list[str] = []
    try:
        for name in names:
            try:
                voice = voices.get(name)
            except VoiceNotFound as exc:
                raise CommandError(str(exc), status=USAGE) from None
            except VoiceLoadError as exc:
                problems.append(f"{name}: cannot be loaded: {exc}")
                continue
            line = _describe(voice, str(cache_dir))
            if voice.engine.cache == "unsaved":
                problems.append(line)
            else:
                print(line, flush=True)
    finally:
        voices.close()
    if problems:
        raise CommandError("\n".join(problems), status=FAILED)
    return 0


def _describe(voice: Voice, cache_dir: str) -> str:
    said = _SAID.get(voice.engine.cache) or (
        f"built, but it could not be stored in {cache_dir} (see the log): the agent builds it "
        "again at its start")
    where = f" in {cache_dir}" if voice.engine.cache in ("hit", "stored") else ""
    return f"{voice.name} {voice.version} ({voice.variant}): {said}{where}"
