"""The ``[text]`` settings section (#16): how request text is read before phonemizing."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.settings import ConfigError, load_settings


def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for key in list(os.environ):
        if key.startswith("TTS_AGENT_TEXT__"):
            monkeypatch.delenv(key)


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    _clean(monkeypatch)
    text = load_settings(None).text
    assert (text.normalize, text.date_order, text.symbols, text.lexicon) == (
        True, "mdy", "drop", None)


def test_from_the_file_and_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _clean(monkeypatch)
    config = tmp_path / "a.toml"
    config.write_text('[text]\nnormalize = false\ndate_order = "dmy"\nlexicon = "lex.toml"\n',
                      encoding="utf-8")
    monkeypatch.setenv("TTS_AGENT_TEXT__SYMBOLS", "espeak")
    monkeypatch.chdir(tmp_path)
    text = load_settings(config).text
    assert (text.normalize, text.date_order, text.symbols) == (False, "dmy", "espeak")
    assert text.lexicon == tmp_path / "lex.toml"  # absolute once read


@pytest.mark.parametrize(("toml", "line"), [
    ('[text]\ndate_order = "myd"\n', "text.date_order must be one of 'mdy', 'dmy' or 'ymd'"),
    ('[text]\nsymbols = "name"\n', "text.symbols must be one of 'drop' or 'espeak'"),
    ("[text]\nnormalise = true\n", "unknown setting text.normalise (did you mean "
                                   "text.normalize?)"),
])
def test_bad_values_are_one_clear_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       toml: str, line: str) -> None:
    _clean(monkeypatch)
    config = tmp_path / "c.toml"
    config.write_text(toml, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_settings(config)
    assert info.value.problems == [f"{config}: {line}"]
