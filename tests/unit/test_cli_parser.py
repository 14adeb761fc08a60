"""``agent.cli.build_parser(argv)``: the parser of the one command ``argv`` names (its module
alone is imported, see tests/integration/test_import_weight.py), the same parse as the parser of
every command; every command when ``argv`` names none, or asks for the top-level help."""

from __future__ import annotations

import argparse

import pytest

from agent.cli import build_parser


def commands(parser: argparse.ArgumentParser) -> set[str]:
    return {name for action in parser._actions if isinstance(action, argparse._SubParsersAction)
            for name in action.choices}


def test_every_command_is_found_alone_and_parses_as_with_all() -> None:
    every = build_parser()
    assert {"synth", "voices", "phonemize", "say", "run", "check-config", "send"} <= commands(every)
    for name in sorted(commands(every)):
        parser = build_parser([name])
        assert name in commands(parser)
        assert len(commands(parser)) < len(commands(every))  # only its own module's
    argv = ["--config", "/x.toml", "-v", "synth", "--text", "hi", "--out", "o.wav"]
    alone = vars(build_parser(argv).parse_args(argv))
    assert alone == vars(every.parse_args(argv))
    assert build_parser(argv).parse_args(argv).handler.__module__ == "agent.commands.synth"


@pytest.mark.parametrize("argv", [[], ["sya"], ["--help"], ["-h", "synth"], ["--version"],
                                  ["--config", "synth"], ["--", "synth"]])
def test_no_command_or_the_top_level_help_gets_every_command(argv: list[str]) -> None:
    assert commands(build_parser(argv)) == commands(build_parser())
