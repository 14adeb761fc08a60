"""``tts-agent run``: the daemon. MQTT commands in, speech out, until SIGTERM/SIGINT.

SIGHUP re-reads the settings file given with ``--config`` (or the default one) and re-checks
the voices; under systemd that is ``systemctl reload tts-agent``.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from pathlib import Path
from typing import Any

from agent.commands import CONFLICT, USAGE, CommandError, add_config_argument, settings_from_args

PRELOAD_JOIN_S = 120.0
"""Longest wait for the default voice's load to end when the daemon cannot start (s)."""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run", help="run the agent: take commands over MQTT, speak them (stops on SIGTERM, "
                    "reloads on SIGHUP)"
    )
    add_config_argument(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from agent.hardware.effective import profile_or_reason
    from agent.library.voices import VoiceLibrary
    from agent.mqtt.credentials import ClientConfigError, check_files
    from agent.settings import Settings, load_settings

    settings = settings_from_args(args, daemon=True)  # its configured log.level
    config: Path | None = getattr(args, "config", None)
    # Every file the connection needs is read before any thread starts: a missing password
    # file is one error line and exit 2, not an exception under a loading onnxruntime.
    try:
        check_files(settings.mqtt)
    except ClientConfigError as exc:
        raise CommandError(str(exc), status=USAGE) from None
    from agent.daemon.state import StateInUse, claim_state
    try:  # before any voice loads: a second agent on this device's state is one line
        state = claim_state(settings)
    except StateInUse as exc:
        raise CommandError(str(exc), status=CONFLICT) from None
    # The default voice starts loading now, on a helper thread, while this thread imports the
    # rest of the daemon (MQTT, audio, health): import nothing before it that it does not need.
    profile = profile_or_reason(settings)
    voices = VoiceLibrary.for_settings(settings, profile=profile[0])
    preloading = voices.preload()

    from agent.daemon.mainloop import run_until_signal
    from agent.daemon.service import AgentService
    from agent.logs import get_logger
    from agent.mqtt.topics import TopicError

    def reread() -> Settings:
        return load_settings(config)

    try:
        service = AgentService(settings, voices=voices, profile=profile, preloading=preloading,
                               state=state, load_settings=reread)
    except BaseException as exc:
        # Never leave the interpreter while onnxruntime builds the session on the preload
        # thread: its teardown under that thread aborts the process.
        if preloading is not None:
            preloading.join(PRELOAD_JOIN_S)
        if isinstance(exc, (ClientConfigError, TopicError)):
            raise CommandError(str(exc), status=USAGE) from None
        raise
    status = run_until_signal(service, reread)
    running = [t.name for t in threading.enumerate()
               if t is not threading.current_thread() and t.is_alive()]
    if service.stopped_cleanly is False or running:
        # A worker is stuck inside native code (e.g. an onnxruntime inference that never
        # returns), or another thread still works: the default voice still loading after a
        # stop during the start, a voice being checked or hashed. Interpreter teardown would
        # free a session under it and abort, or wait for it; the shutdown itself is complete
        # (``stopped`` published, disconnected, journal closed), so leave now.
        log = get_logger(__name__)
        (log.warning if service.stopped_cleanly is False else log.info)(
            "exiting_without_teardown", status=status, threads=running)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    return status
