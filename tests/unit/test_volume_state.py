"""The stored device volume (#28.9) on real files: kept and read back, the setting winning once
it changes, and every file that cannot be used (corrupt, another shape, too large, a FIFO, a
link, a directory, unwritable) logged in one line with the configured volume used instead."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from agent.daemon.volume_state import MAX_STATE_BYTES, VOLUME_NAME, VolumeStore
from agent.mqtt.journal import RequestJournal
from agent.settings import Settings


def test_kept_and_restored_beside_the_journal(tmp_path: Path) -> None:
    settings = Settings(cache={"dir": tmp_path / "cache"},
                        mqtt={"journal": {"file": tmp_path / "state" / "j.journal"}},
                        audio={"volume": 0.9})
    store = VolumeStore.for_settings(settings)
    assert store.path == RequestJournal.for_settings(settings).path.parent / VOLUME_NAME
    assert store.path == tmp_path / "state" / VOLUME_NAME
    assert store.restore() == 0.9  # nothing stored yet: the setting
    assert store.save(0.4) and store.save(0.35)
    assert json.loads(store.path.read_text()) == {"format": 1, "volume": 0.35,
                                                  "configured": 0.9}
    assert [p.name for p in store.path.parent.iterdir()] == [VOLUME_NAME]  # no temporary left
    assert store.path.stat().st_mode & 0o777 == 0o600  # the service's own, like the journal
    with capture_logs() as logs:
        assert VolumeStore(store.path, 0.9).restore() == 0.35
    assert [e["event"] for e in logs] == ["volume_restored"]


def test_a_changed_setting_wins_and_drops_the_stored_volume(tmp_path: Path) -> None:
    path = tmp_path / VOLUME_NAME
    assert VolumeStore(path, 1.0).save(0.4)
    assert VolumeStore(path, 0.7).restore() == 0.7
    assert not path.exists()
    assert VolumeStore(path, 1.0).restore() == 1.0  # the old setting back: 0.4 is not


@pytest.mark.parametrize("content", [
    b"{not json", b"[0.4]", b'{"format": 1, "volume": 1.5, "configured": 1.0}',
    b'{"format": 1, "volume": true, "configured": 1.0}', b'{"format": 2, "volume": 0.4}',
    b'{"format": 1, "volume": 0.4}', b"\xff\xfe", b"[" * 5000,
    b'{"format": 1, "volume": 0.4, "configured": 1.0, "pad": "' + b"x" * MAX_STATE_BYTES + b'"}',
], ids=["malformed", "array", "out-of-range", "bool", "format", "no-setting", "not-utf8",
        "deep", "large"])
def test_an_unusable_file_is_one_log_line_and_the_setting(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / VOLUME_NAME
    path.write_bytes(content)
    with capture_logs() as logs:
        assert VolumeStore(path, 0.6).restore() == 0.6
    assert [e["event"] for e in logs] == ["volume_state_unreadable"], logs
    assert "\n" not in logs[0]["error"] and logs[0]["volume"] == 0.6
    assert path.exists()  # left for the operator to look at; the next volume command replaces it


@pytest.mark.parametrize("kind", ["fifo", "symlink", "directory"])
def test_what_is_not_a_regular_file_is_not_read(tmp_path: Path, kind: str) -> None:
    path = tmp_path / VOLUME_NAME
    if kind == "fifo":
        os.mkfifo(path)  # never waited on
    elif kind == "symlink":
        (tmp_path / "elsewhere.json").write_text('{"format": 1, "volume": 0.1, "configured": 1}')
        path.symlink_to(tmp_path / "elsewhere.json")
    else:
        path.mkdir()
    with capture_logs() as logs:
        assert VolumeStore(path, 1.0).restore() == 1.0
    assert [e["event"] for e in logs] == ["volume_state_unreadable"]


def test_a_volume_that_cannot_be_written_is_logged(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    with capture_logs() as logs:
        assert not VolumeStore(blocker / VOLUME_NAME, 1.0).save(0.5)
    assert [e["event"] for e in logs] == ["volume_not_saved"]
