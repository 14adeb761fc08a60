"""``tts-agent check-config``: print the effective settings or the errors."""

from __future__ import annotations

import argparse
import json
from typing import Any

from agent.commands import add_config_argument, settings_from_args


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "check-config", help="validate the settings and print them (secrets masked)"
    )
    add_config_argument(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    settings = settings_from_args(args, configure_logs=False)
    print(json.dumps(settings.masked(), indent=2, sort_keys=True))
    return 0
