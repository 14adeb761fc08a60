"""``tts-agent run``: the daemon. MQTT commands in, speech out, until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
from typing import Any

from agent.commands import CommandError, add_config_argument, settings_from_args


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run", help="run the agent: take commands over MQTT, speak them (stops on SIGTERM)"
    )
    add_config_argument(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from agent.mqtt.client import ClientConfigError
    from agent.mqtt.topics import TopicError
    from agent.service import AgentService, run_until_signal

    settings = settings_from_args(args)
    try:
        service = AgentService(settings)
    except (ClientConfigError, TopicError) as exc:
        raise CommandError(str(exc), status=2) from exc
    return run_until_signal(service)
