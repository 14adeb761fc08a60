"""The generated reference pages match the code, say what the code does, and every page is linked.

``docs/reference.py`` renders ``docs/configuration.md`` and ``docs/mqtt-reference.md`` from the
settings and protocol models; these tests regenerate them, check the names the configuration
page gives (environment variables, TOML keys) against real :class:`Settings` objects, and
follow every relative link of the README, CONTRIBUTING.md and docs/.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote

import pytest
from pydantic import BaseModel, Field, SecretStr, ValidationError

from agent.mqtt.topics import Namespace, Topic
from agent.settings import ConfigError, Settings, load_settings
from docs import reference
from tests.support import REPO

DOCS = REPO / "docs"
PROBE = "17"
"""A value every settings field either takes (and then differs from its default) or refuses."""


def test_committed_pages_are_what_the_code_generates() -> None:
    stale = reference.stale_pages()
    assert not stale, f"docs/{stale} out of date: run .venv/bin/python docs/reference.py"


def test_check_names_the_stale_page_and_a_run_rewrites_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    for name in reference.PAGES:
        shutil.copyfile(DOCS / name, tmp_path / name)
    (tmp_path / "mqtt-reference.md").write_text("hand-edited\n", encoding="utf-8")
    assert reference.main(["--check"], tmp_path) == 1
    err = capsys.readouterr().err
    assert "mqtt-reference.md" in err
    assert "configuration.md" not in err
    assert "docs/reference.py" in err
    assert (tmp_path / "mqtt-reference.md").read_text(encoding="utf-8") == "hand-edited\n"

    assert reference.main([], tmp_path) == 0
    assert reference.main(["--check"], tmp_path) == 0
    rewritten = (tmp_path / "mqtt-reference.md").read_bytes()
    assert rewritten == (DOCS / "mqtt-reference.md").read_bytes()


# -- the configuration page against real settings --------------------------------------------

@pytest.fixture()
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in list(os.environ):
        if name.upper().startswith("TTS_AGENT_"):
            monkeypatch.delenv(name)
    return monkeypatch


def _flat(data: dict[str, Any],
          path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    for key, value in data.items():
        if isinstance(value, dict):
            yield from _flat(value, (*path, key))
        else:
            yield (*path, key), value


def _reaches(path: tuple[str, ...], make: Callable[[], Settings], baseline: Settings) -> bool:
    """Whether ``make()`` (with the probe set for ``path``) changed exactly that field, or was
    refused for that field (or by a check of its section)."""
    try:
        settings = make()
    except (ValidationError, ConfigError) as exc:
        error = exc if isinstance(exc, ValidationError) else exc.__cause__
        assert isinstance(error, ValidationError), exc
        locs = [tuple(str(part) for part in err["loc"]) for err in error.errors()]
        return all(path[:len(loc)] == loc for loc in locs)
    before = dict(_flat(baseline.model_dump(mode="json")))
    after = dict(_flat(settings.model_dump(mode="json")))
    return {key for key in before if before[key] != after[key]} == {path}


def test_every_documented_environment_variable_reaches_its_field(
    clean_env: pytest.MonkeyPatch,
) -> None:
    baseline = Settings()
    fields = reference.settings_fields()
    assert {field.path[0] for field in fields} >= {"device_id", "mqtt", "audio", "log"}
    missed = []
    for field in fields:
        name = reference.env_name(field.path)
        with clean_env.context() as env:
            env.setenv(name, PROBE)
            if not _reaches(field.path, Settings, baseline):
                missed.append(name)
    assert not missed, f"documented variables that do not set their field: {missed}"
    clean_env.setenv("TTS_AGENT_MQTT__HOST", "broker.example")
    assert Settings().mqtt.host == "broker.example"


def test_every_documented_toml_key_reaches_its_field(
    clean_env: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    baseline = Settings()
    config = tmp_path / "agent.toml"
    missed = []
    for field in reference.settings_fields():
        *table, key = field.path
        header = f"[{'.'.join(table)}]\n" if table else ""
        config.write_text(f"{header}{key} = {json.dumps(PROBE)}\n", encoding="utf-8")
        if not _reaches(field.path, lambda: load_settings(config), baseline):
            missed.append(".".join(field.path))
    assert not missed, f"documented keys that do not set their field: {missed}"


def test_environment_beats_the_file_and_lists_are_json(
    clean_env: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    config = tmp_path / "agent.toml"
    config.write_text('[mqtt]\nhost = "from-file"\nport = 1884\n', encoding="utf-8")
    clean_env.setenv("TTS_AGENT_MQTT__HOST", "from-env")
    clean_env.setenv("TTS_AGENT_MQTT__GROUPS", '["kitchen", "hall"]')
    settings = load_settings(config)
    assert settings.mqtt.host == "from-env"
    assert settings.mqtt.port == 1884
    assert settings.mqtt.groups == ["kitchen", "hall"]
    assert settings.mqtt.keepalive_s == Settings().mqtt.keepalive_s


def test_the_example_of_the_configuration_page_is_valid(
    clean_env: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    page = reference.configuration_page()
    example = re.search(r"```toml\n(.*?)```", page, re.DOTALL)
    assert example is not None
    config = tmp_path / "agent.toml"
    config.write_text(example.group(1), encoding="utf-8")
    settings = load_settings(config)
    assert settings.device_id == "kiosk-12"
    assert settings.mqtt.groups == ["kitchen"]


def test_defaults_show_no_secret_and_no_fact_of_this_machine() -> None:
    class Secrets(BaseModel):
        token: SecretStr = SecretStr("hunter2")
        spare: SecretStr | None = Field(default_factory=lambda: SecretStr("hunter3"))
        absent: SecretStr | None = None

    text = "\n".join(reference.model_table(Secrets))
    assert "hunter" not in text
    docs = {f.path[0]: f for f in (reference.field_doc((n, ), i)
                                   for n, i in Secrets.model_fields.items())}
    assert [docs[n].default for n in ("token", "spare", "absent")] == ["(secret)", "(secret)",
                                                                       "unset"]
    assert docs["token"].type == "secret string"

    by_path = {field.path: field for field in reference.settings_fields()}
    assert by_path[("mqtt", "password")].type == "secret string"
    assert by_path[("device_id",)].default == "the host name"


def test_bounds_types_and_defaults_come_from_the_field_metadata() -> None:
    class Sample(BaseModel):
        level: float = Field(default=0.5, ge=0.0, lt=1.0, description="A <level>.")
        count: int | None = Field(default=None, gt=0, le=10)
        mode: Literal["a", "b"] = "a"
        kinds: list[Literal["x", "y"]] | None = Field(default=None, min_length=1, max_length=2)
        name: str = Field(min_length=1, max_length=8, pattern=r"^[a-z]+$")
        where: Path = Path("/var/x")
        tags: list[str] = Field(default_factory=list)

    docs = {n: reference.field_doc((n,), i) for n, i in Sample.model_fields.items()}
    got = {n: (d.type, d.default, d.bounds) for n, d in docs.items()}
    assert got == {
        "level": ("number", "`0.5`", ">= 0.0; < 1.0"),
        "count": ("integer", "unset", "> 0; <= 10"),
        "mode": ("string", '`"a"`', 'one of `"a"`, `"b"`'),
        "kinds": ("list of string", "unset",
                  'each one of `"x"`, `"y"`; at least 1 item; at most 2 items'),
        "name": ("string", "required",
                 "at least 1 character; at most 8 characters; matches `^[a-z]+$`"),
        "where": ("path", '`"/var/x"`', ""),
        "tags": ("list of string", "`[]`", ""),
    }
    assert docs["level"].description == "A &lt;level&gt;."


# -- the MQTT page against the topic router ---------------------------------------------------

def test_every_documented_command_topic_routes_to_the_command() -> None:
    page = reference.mqtt_page()
    documented = re.findall(r"^\| `([^`]*/cmd/\{name\})` \| to the agent \|", page, re.MULTILINE)
    assert len(documented) == 3
    device = Namespace("tts").device("t1")
    for pattern in documented:
        topic = Topic(pattern.format(prefix="tts", device="t1", group="kitchen", name="speak"))
        route = device.route(topic, ("kitchen",))
        assert route is not None, topic
        assert route.name == "speak"
    for name in ("speak", "stop", "volume", "reload", "ping"):
        assert f"### `{name}`" in page


# -- links -----------------------------------------------------------------------------------

LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.MULTILINE)


def _pages() -> list[Path]:
    candidates = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted(DOCS.glob("*.md"))]
    return [page for page in candidates if page.is_file()]


def _relative_links(page: Path) -> list[tuple[str, Path]]:
    """(link as written, the path it points at) for every relative link outside code."""
    text = re.sub(r"^(```|~~~).*?^\1", "", page.read_text(encoding="utf-8"),
                  flags=re.MULTILINE | re.DOTALL)
    text = re.sub(r"`[^`\n]*`", "", text)
    links = []
    for target in LINK.findall(text) + REFERENCE_LINK.findall(text):
        if target.startswith("#") or re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", target):
            continue
        path = unquote(re.split(r"[#?]", target)[0])
        base = REPO if path.startswith("/") else page.parent
        links.append((target, (base / path.lstrip("/")).resolve()))
    return links


def test_every_relative_link_resolves() -> None:
    broken = [f"{page.relative_to(REPO)}: {target}" for page in _pages()
              for target, path in _relative_links(page) if not path.exists()]
    assert not broken, f"links to missing files: {broken}"


def test_the_readme_links_every_page_of_docs_and_contributing() -> None:
    linked = {path for _, path in _relative_links(REPO / "README.md")}
    expected = [*sorted(DOCS.glob("*.md")), REPO / "CONTRIBUTING.md"]
    missing = [str(page.relative_to(REPO)) for page in expected if page.resolve() not in linked]
    assert not missing, f"README.md does not link {missing}"


def _resolves(dotted: str) -> bool:
    """Whether ``agent.x.y.Name`` names a module, or an attribute of the longest module prefix."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


CODE_PATH = r"`((?:agent|bench|tests|systemd)/[\w/.-]+\.(?:py|toml|sh))`"


def test_every_code_reference_in_the_docs_exists() -> None:
    """``agent.pipeline.worker.SynthesisWorker`` and ``agent/audio/player.py`` in a page exist."""
    pages = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted(DOCS.glob("*.md"))]
    stale = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for dotted in set(re.findall(r"(?<![\w-])agent(?:\.[A-Za-z_]\w*)+", text)):
            if not dotted.startswith("agent.toml") and not _resolves(dotted):
                stale.append(f"{page.name}: {dotted}")
        for path in set(re.findall(CODE_PATH, text)):
            if not (REPO / path).exists():
                stale.append(f"{page.name}: {path}")
    assert not stale, "pages name code that does not exist:\n" + "\n".join(sorted(stale))


def test_a_stale_code_reference_is_found() -> None:
    assert _resolves("agent.pipeline.worker.SynthesisWorker")
    assert not _resolves("agent.mqtt.speech.JobQueue")
    assert not _resolves("agent.voice.voice.NoSuchThing")
