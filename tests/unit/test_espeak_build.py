"""Which espeak-ng build is chosen (agent.text.espeak_build) and how the training build is
unpacked from its wheel (agent.text.espeak_fetch); loading a build is in
tests/integration/test_espeak_builds.py."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from agent.text import espeak_fetch
from agent.text.espeak_build import (
    DATA_ENV,
    LIBRARY_ENV,
    LIBRARY_FILE,
    SOURCE_FILE,
    choose,
    training_dir,
)
from agent.text.espeak_fetch import FetchError


def _training(prefix: Path, *, phontab: bool = True, source: bool = True) -> Path:
    directory = training_dir(str(prefix))
    (directory / "espeak-ng-data").mkdir(parents=True)
    (directory / LIBRARY_FILE).write_bytes(b"\x7fELF")
    if phontab:
        (directory / "espeak-ng-data" / "phontab").write_bytes(b"x")
    if source:
        (directory / SOURCE_FILE).write_text(json.dumps(
            {"requirement": "piper-phonemize==1.1.0", "wheel": "w.whl", "sha256": "ab"}))
    return directory


def test_the_training_build_is_the_default_where_installed(tmp_path: Path) -> None:
    directory = _training(tmp_path)
    choice = choose(environ={}, prefix=str(tmp_path))
    assert (choice.kind, choice.library, choice.data_path) == (
        "training", str(directory / LIBRARY_FILE), str(directory / "espeak-ng-data"))
    assert choice.source == "piper-phonemize==1.1.0 (w.whl)"


def test_without_the_training_build_the_system_library(tmp_path: Path) -> None:
    choice = choose(environ={}, prefix=str(tmp_path))
    assert (choice.kind, choice.library, choice.data_path) == ("system", None, None)


def test_a_training_build_without_its_data_is_not_used(tmp_path: Path) -> None:
    _training(tmp_path, phontab=False)
    assert choose(environ={}, prefix=str(tmp_path)).kind == "system"


def test_an_unknown_source_still_loads(tmp_path: Path) -> None:
    _training(tmp_path, source=False)
    choice = choose(environ={}, prefix=str(tmp_path))
    assert (choice.kind, choice.source) == ("training", "unknown source")


def test_system_asks_for_the_distribution_build(tmp_path: Path) -> None:
    _training(tmp_path)
    choice = choose(environ={LIBRARY_ENV: "system"}, prefix=str(tmp_path))
    assert (choice.kind, choice.library, choice.data_path) == ("system", None, None)
    assert choose("system", environ={}, prefix=str(tmp_path)).kind == "system"


def test_a_named_build_wins_over_the_default(tmp_path: Path) -> None:
    _training(tmp_path)
    env = {LIBRARY_ENV: "/x/libespeak-ng.so.1", DATA_ENV: "/x/espeak-ng-data"}
    choice = choose(environ=env, prefix=str(tmp_path))
    assert (choice.kind, choice.library, choice.data_path) == (
        "custom", "/x/libespeak-ng.so.1", "/x/espeak-ng-data")
    # arguments before the environment; data alone is the system library with that data
    assert choose("/y.so", environ=env, prefix=str(tmp_path)).library == "/y.so"
    assert choose(environ={DATA_ENV: "/d"}, prefix=str(tmp_path)) == choose(
        None, "/d", environ={}, prefix=str(tmp_path))
    assert choose(None, "/d", environ={}, prefix=str(tmp_path)).library is None


def _wheel(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def test_unpack_takes_the_library_and_the_data_only(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path / "p.whl", {
        "piper_phonemize.libs/libespeak-ng-e09f6b87.so.1.1.51": b"lib",
        "piper_phonemize.libs/libonnxruntime-9a682863.so.1.14.1": b"ort",
        "piper_phonemize/espeak-ng-data/phontab": b"tab",
        "piper_phonemize/espeak-ng-data/voices/!v/m1": b"voice",
        "piper_phonemize/__init__.py": b"",
    })
    espeak_fetch._unpack(wheel, tmp_path / "out")
    files = sorted(str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*")
                   if p.is_file())
    assert files == ["espeak-ng-data/phontab", "espeak-ng-data/voices/!v/m1", LIBRARY_FILE]
    assert (tmp_path / "out" / LIBRARY_FILE).read_bytes() == b"lib"


@pytest.mark.parametrize("members", [
    {"piper_phonemize/espeak-ng-data/../../evil": b"x",
     "piper_phonemize.libs/libespeak-ng.so.1": b"lib"},
    {"piper_phonemize/espeak-ng-data/phontab": b"tab"},  # no library
    {"piper_phonemize.libs/libespeak-ng.so.1": b"lib"},  # no data
])
def test_unpack_refuses_a_wheel_that_is_not_the_one_expected(tmp_path: Path,
                                                             members: dict[str, bytes]) -> None:
    with pytest.raises(FetchError):
        espeak_fetch._unpack(_wheel(tmp_path / "p.whl", members), tmp_path / "out")
    assert not (tmp_path / "evil").exists()


def test_an_installed_build_of_the_pinned_wheel_is_current(tmp_path: Path) -> None:
    directory = _training(tmp_path)
    assert espeak_fetch.is_current(directory, "ab")
    assert not espeak_fetch.is_current(directory, "cd")  # another pin: fetched again
    (directory / "espeak-ng-data" / "phontab").unlink()
    assert not espeak_fetch.is_current(directory, "ab")


def test_a_wheel_that_does_not_match_its_pin_is_refused(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    def download(tag: str, pip_args: list[str], into: Path) -> Path:
        return _wheel(into / "piper_phonemize-1.1.0-x.whl", {"a": b"b"})

    monkeypatch.setattr(espeak_fetch, "_download", download)
    with pytest.raises(FetchError, match="not the pinned"):
        espeak_fetch.install(tmp_path, [], "x86_64")
    assert not training_dir(str(tmp_path)).exists()
    wheel = _wheel(tmp_path / "w.whl", {"a": b"b"})
    assert hashlib.sha256(wheel.read_bytes()).hexdigest() != espeak_fetch.WHEELS["x86_64"][1]


def test_other_architectures_are_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(FetchError, match="armv7l"):
        espeak_fetch.install(tmp_path, [], "armv7l")
