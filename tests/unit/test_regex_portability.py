"""The agent's patterns mean the same on every Python it supports (#25's platform matrix).

Debian 12's own Python, 3.11.2, matches a possessive quantifier on a group wrongly: there
``\\d{2,15}+(?:[ .-]\\d{2,6}+){0,4}+`` followed by ``(?:\\s(?:or|and)\\s\\d{2,15}+){0,3}+``
finds ``999`` alone in "dial 112 or 999" (3.11.7 and later find "112 or 999"), so the agent
read "one hundred twelve" on a fresh Debian 12 install (tests/unit/test_normalize_numbers.py
failed there). The same bound on backtracking is an
atomic group, ``(?>(?:...){0,4})``, which 3.11.2 matches right; possessive quantifiers stay
only on single characters and classes (``\\d++``), which it also gets right.
"""

from __future__ import annotations

import re

from tests.support import REPO

POSSESSIVE_GROUP = re.compile(r"\)(?:\{\d*,?\d*\}|[*+?])\+")


def test_no_pattern_puts_a_possessive_quantifier_on_a_group() -> None:
    found = [f"{path.relative_to(REPO)}:{number}: {line.strip()}"
             for path in sorted((REPO / "agent").rglob("*.py"))
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if POSSESSIVE_GROUP.search(line)]
    assert found == [], "use an atomic group (?>(?:...){m,n}) instead:\n" + "\n".join(found)

