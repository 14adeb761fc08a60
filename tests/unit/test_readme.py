"""The README, the front door, cannot rot: every sub-command of the real parser (and every
``models`` action and ``send`` command) has its row in the README's sub-command table, each row
links to its section of docs/cli.md, and every link from the README into ``docs/`` names a page
and a heading that exist (one click to each thing the pitch names)."""

from __future__ import annotations

import argparse
import re

from agent.cli import build_parser
from tests.support import REPO

README = REPO / "README.md"
_LINK = re.compile(r"\]\(((?:docs/)?[\w.-]+\.md)(?:#([\w-]+))?\)")
_HEADING = re.compile(r"^#{1,6} (.+)$", re.MULTILINE)


def sub_commands(parser: argparse.ArgumentParser) -> dict[str, list[str]]:
    """Each top-level command and the names of its own sub-commands (``models``: import, ...)."""
    def children(sub: argparse.ArgumentParser) -> list[str]:
        return [name for action in sub._actions if isinstance(action, argparse._SubParsersAction)
                for name in action.choices]

    [top] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return {name: children(sub) for name, sub in top.choices.items()}


def table_rows() -> dict[str, tuple[list[str], str]]:
    """The sub-command table: command -> (the words of its first cell, the cell's link)."""
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Sub-commands\n", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, tuple[list[str], str]] = {}
    for line in section.splitlines():
        cell = re.match(r"\| \[`([^`]+)`\]\(([^)]+)\) \|", line)
        if cell is None:
            continue
        words = re.split(r"[\s|]+", cell.group(1).replace("\\|", "|"))
        rows[words[0]] = (words[1:], cell.group(2))
    return rows


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_sub_command_has_its_row_linked_to_its_section() -> None:
    commands, rows = sub_commands(build_parser()), table_rows()
    assert sorted(rows) == sorted(commands), "README's sub-command table vs the parser"
    for name, children in commands.items():
        words, link = rows[name]
        missing = [child for child in children if child not in words]
        assert not missing, f"README's row of {name} does not name {missing}"
        assert link.startswith("docs/cli.md#"), f"{name}: {link}"


def test_every_link_into_the_docs_names_a_page_and_heading_that_exist() -> None:
    links = _LINK.findall(README.read_text(encoding="utf-8"))
    assert len(links) > 20
    for page, anchor in links:
        path = REPO / page
        assert path.is_file(), f"README links to {page}, which does not exist"
        if anchor:
            headings = {slug(h) for h in _HEADING.findall(path.read_text(encoding="utf-8"))}
            assert anchor in headings, f"README links to {page}#{anchor}: no such heading"


def test_slug_is_githubs() -> None:
    assert slug("`ha-discovery`: the Home Assistant discovery message") == (
        "ha-discovery-the-home-assistant-discovery-message")
    assert slug("Staged versions and rollback") == "staged-versions-and-rollback"

