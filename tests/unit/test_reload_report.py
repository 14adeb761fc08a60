"""A reload's result is a value (agent.daemon.reload); its one line (SIGHUP's STATUS, the
reload command's refusal) is rendered from it, word for word as before."""

from __future__ import annotations

from agent.daemon.reload import LexiconChange, ReloadReport, SettingsChange, reload_settings
from agent.library.voices import ReloadResult
from agent.settings import Settings


def test_the_line_is_rendered_from_the_values() -> None:
    voices = (ReloadResult("a", "unchanged"), ReloadResult("b", "loaded"),
              ReloadResult("c", "unchanged"))
    report = ReloadReport(voices, SettingsChange("info"), LexiconChange("loaded"))
    assert report.line() == "reloaded: log level info; voices 1 loaded, 2 unchanged; lexicon loaded"
    assert report.rejected == []
    assert ReloadReport(()).line() == "reloaded: voices none installed"
    restart = SettingsChange("debug", ("audio", "mqtt"))
    assert restart.line() == "log level debug, restart needed for audio, mqtt"
    assert SettingsChange("info", kept="line 3: bad").line() == "settings kept (line 3: bad)"


def test_rejections_are_values_not_searched_text() -> None:
    report = ReloadReport((ReloadResult("a", "rejected", reason="sha256 mismatch"),
                           ReloadResult("b", "unchanged")),
                          lexicon=LexiconChange("rejected", "x.tsv:2: no tab"))
    assert report.rejected == ["a: sha256 mismatch", "lexicon rejected: x.tsv:2: no tab"]
    assert report.line() == ("reloaded: voices 1 rejected, 1 unchanged; "
                             "lexicon rejected: x.tsv:2: no tab")
    assert LexiconChange("unchanged").line() == "lexicon unchanged"


def test_an_unreadable_file_keeps_the_settings() -> None:
    current = Settings(device_id="t1")

    def broken() -> Settings:
        raise ValueError("/etc/tts-agent/settings.toml: line 4: expected '='\nmore detail")

    kept, change = reload_settings(current, broken)
    assert kept is current
    assert change.kept == "/etc/tts-agent/settings.toml: line 4: expected '='"  # the journal's
    # health's: every problem, the file named without its directory (it goes over MQTT)
    assert change.problem == ("settings.toml: line 4: expected '='; more detail (the agent runs "
                              "on the settings it read before and would not start with this "
                              "file)")
    change = SettingsChange(current.log.level, kept="settings.toml: line 4: expected '='")
    assert change.line() == "settings kept (settings.toml: line 4: expected '=')"
