"""The package layout holds: the import rules of docs/architecture.md, no cycles, small units.

The table in ``docs/architecture.md`` ("Packages and what they may import") is the rule; this test
parses it, so the page and the check cannot drift apart. The table and the cycle check between
packages count every import, those under ``if TYPE_CHECKING:`` and inside functions too; the
cycle check between modules counts what runs.
"""

from __future__ import annotations

import ast
import itertools
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import REPO

PACKAGE = REPO / "agent"
ARCHITECTURE = REPO / "docs" / "architecture.md"
LEAVES = frozenset({"logs", "fsutil", "bounded_queue", "outcomes", "jsonbound", "agent"})
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
MAX_DOCSTRING_LINES = 12
"""A module's docstring says what it is in a few lines and links the doc page of its design."""


@dataclass(frozen=True)
class Import:
    module: str
    """The importing module, e.g. ``agent.pipeline.worker``."""
    target: str
    """The imported module, e.g. ``agent.voice.voice``."""
    line: int


def module_name(path: Path) -> str:
    if not path.is_relative_to(REPO):
        return path.stem
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def node_of(module: str) -> str:
    """The architecture table's row for a module: its package, or ``audio.format``."""
    parts = module.split(".")[1:]
    if not parts:
        return "agent"
    if parts[:2] == ["audio", "format"]:
        return "audio.format"
    return parts[0]


def _type_checking_nodes(tree: ast.Module) -> set[int]:
    ids: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            ids.update(id(inner) for inner in ast.walk(node))
    return ids


def runtime_imports(path: Path) -> list[Import]:
    """The ``agent`` modules ``path`` imports when it runs (``TYPE_CHECKING`` blocks left out)."""
    return imports(path, type_checking=False)


def imports(path: Path, *, type_checking: bool = True) -> list[Import]:
    """The ``agent`` modules ``path`` imports anywhere (at the top, inside functions, and, with
    ``type_checking``, under ``if TYPE_CHECKING:``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = set() if type_checking else _type_checking_nodes(tree)
    modules = {str(p.relative_to(REPO).with_suffix("")).replace("/", ".")
               for p in PACKAGE.rglob("*.py")}
    name = module_name(path)
    found: list[Import] = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        targets: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] != "agent":
                continue
            for alias in node.names:  # ``from agent.voice import streaming`` imports a module
                sub = f"{node.module}.{alias.name}"
                targets.append(sub if sub in modules else node.module)
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names if a.name.split(".")[0] == "agent"]
        found += [Import(name, target, node.lineno) for target in targets]
    return found


def allowed_imports() -> dict[str, frozenset[str]]:
    """The "may import" column of docs/architecture.md, by row."""
    rows: dict[str, frozenset[str]] = {}
    for line in ARCHITECTURE.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        rows[cells[0].strip("`")] = frozenset(re.findall(r"`([\w.]+)`", cells[2]))
    return rows


SOURCES = sorted(PACKAGE.rglob("*.py"))


def test_the_table_is_read() -> None:
    rules = allowed_imports()
    assert {"voice", "pipeline", "mqtt", "audio.format"} <= rules.keys()
    assert "mqtt" not in rules["pipeline"]


def test_every_module_has_a_row() -> None:
    rules = allowed_imports()
    missing = sorted({node_of(module_name(p)) for p in SOURCES} - rules.keys() - {"agent"})
    assert not missing, f"add a row to docs/architecture.md for {missing}"


def test_imports_follow_the_architecture_table() -> None:
    rules = allowed_imports()
    wrong = []
    for path in SOURCES:
        for imp in imports(path):
            source, target = node_of(imp.module), node_of(imp.target)
            if source == target or target in LEAVES:
                continue
            if target not in rules.get(source, frozenset()):
                wrong.append(f"{path.relative_to(REPO)}:{imp.line}: {source} -> {target}")
    assert not wrong, "imports not allowed by docs/architecture.md:\n" + "\n".join(wrong)


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_import_cycle_between_modules() -> None:
    graph: dict[str, set[str]] = {}
    for path in SOURCES:
        for imp in runtime_imports(path):
            if imp.target != imp.module:
                graph.setdefault(imp.module, set()).add(imp.target)
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def package_graph(found: list[Import]) -> dict[str, dict[str, Import]]:
    """Edges between the table's rows (leaves left out), each with one import that makes it."""
    graph: dict[str, dict[str, Import]] = {}
    for imp in found:
        source, target = node_of(imp.module), node_of(imp.target)
        if source != target and target not in LEAVES:
            graph.setdefault(source, {}).setdefault(target, imp)
    return graph


def package_cycle(found: list[Import]) -> str | None:
    """The first cycle between packages, each step named by an import that makes it."""
    graph = package_graph(found)
    cycle = _cycle({node: set(edges) for node, edges in graph.items()})
    if cycle is None:
        return None
    steps = [f"{a} -> {b} ({_file_of(graph[a][b].module)}:{graph[a][b].line}: "
             f"imports {graph[a][b].target})" for a, b in itertools.pairwise(cycle)]
    return "\n".join(steps)


def _file_of(module: str) -> str:
    base = module.replace(".", "/")
    return f"{base}/__init__.py" if (REPO / base).is_dir() else f"{base}.py"


def test_no_import_cycle_between_packages() -> None:
    """Type-only and function-local imports count: a lower layer that names a type of an
    upper one (the composition root, say) makes the two one room."""
    found = [imp for path in SOURCES for imp in imports(path)]
    cycle = package_cycle(found)
    assert cycle is None, "import cycle between packages:\n" + (cycle or "")


def test_package_cycle_is_reported_with_its_imports() -> None:
    found = [Import("agent.mqtt.ha_addon", "agent.daemon.service", 40),
             Import("agent.daemon.addons", "agent.mqtt.ha_addon", 24),
             Import("agent.daemon.service", "agent.daemon.addons", 33),
             Import("agent.mqtt.client", "agent.logs", 3)]
    assert package_cycle(found) == (
        "daemon -> mqtt (agent/daemon/addons.py:24: imports agent.mqtt.ha_addon)\n"
        "mqtt -> daemon (agent/mqtt/ha_addon.py:40: imports agent.daemon.service)")
    assert package_cycle(found[1:]) is None


def test_type_checking_and_local_imports_are_seen(tmp_path: Path) -> None:
    text = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from agent.daemon.service import AgentService\n"
            "def f() -> None:\n    from agent.mqtt import client\n")
    probe = tmp_path / "probe.py"
    probe.write_text(text, encoding="utf-8")
    found = {(imp.target, imp.line) for imp in imports(probe)}
    assert {("agent.daemon.service", 3), ("agent.mqtt.client", 5)} <= found
    assert {imp.target for imp in runtime_imports(probe)} == {"agent.mqtt.client"}


def test_cycle_finder_finds_one() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_module_and_functions_are_small(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    lines = len(text.splitlines())
    assert lines <= MAX_MODULE_LINES, f"{lines} lines: split the module along a real seam"
    long = [f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for node in ast.walk(ast.parse(text))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.end_lineno is not None
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


def _docstring_lines(path: Path) -> int:
    body = ast.parse(path.read_text(encoding="utf-8")).body
    first = body[0] if body else None
    if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)):
        return 0
    return (first.end_lineno or first.lineno) - first.lineno + 1


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_module_docstring_is_short(path: Path) -> None:
    lines = _docstring_lines(path)
    assert lines <= MAX_DOCSTRING_LINES, (
        f"a {lines}-line module docstring (at most {MAX_DOCSTRING_LINES}): say what the module "
        "is and link the docs/ page that explains the design")
