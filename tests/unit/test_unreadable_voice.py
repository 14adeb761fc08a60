"""A live voice whose files become unreadable (manifest deleted, replaced by a FIFO) keeps
serving what is loaded, and health says why it cannot reload (#27 item 3)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent.health.snapshot import Health
from agent.library.voices import VoiceLibrary
from agent.library.watch import ModelWatcher
from agent.settings import Settings
from tests.support import make_tiny_voice
from tests.support.recorders import ModelEvents as Events

VOICE = make_tiny_voice.VOICE


@pytest.fixture()
def watched(tiny_voice_dir: Path, tmp_path: Path,
            ) -> Iterator[tuple[VoiceLibrary, Events, Path, Health]]:
    events = Events()
    settings = Settings(models={"dir": tiny_voice_dir.parent, "default_voice": VOICE,
                                "debounce_s": 0.2, "pending_timeout_s": 3.0},
                        cache={"dir": tmp_path / "cache"})
    library = VoiceLibrary(settings, on_event=events, settle_s=0.3)
    library.get()
    health = Health(settings)
    health.add_provider("voices", library.status)
    watcher = ModelWatcher(library, debounce_s=0.2)
    watcher.start()
    yield library, events, tiny_voice_dir, health
    watcher.stop()


def voice_reasons(health: Health) -> list[str]:
    return [r for r in health.snapshot()["reasons"] if VOICE in r]


def wait_until(predicate: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def remove_manifest(bundle: Path) -> None:
    (bundle / "manifest.json").unlink(missing_ok=True)


def fifo_manifest(bundle: Path) -> None:
    (bundle / "manifest.json").unlink(missing_ok=True)
    os.mkfifo(bundle / "manifest.json")


@pytest.mark.parametrize("break_it", [remove_manifest, fifo_manifest], ids=["deleted", "fifo"])
def test_live_voice_keeps_serving_without_its_manifest_and_health_says_why(
        watched: tuple[VoiceLibrary, Events, Path, Health],
        break_it: Callable[[Path], None]) -> None:
    library, events, bundle, health = watched
    before = library.get()
    manifest = (bundle / "manifest.json").read_bytes()
    assert voice_reasons(health) == []

    break_it(bundle)
    rejected = events.wait_for_event(lambda e: e["event"] == "model_rejected")
    assert "manifest.json" in rejected["reason"]
    # the voice is still installed as far as speaks go, and serves what is loaded
    assert VOICE in library.names()
    assert library.get(VOICE) is before
    assert list(before.synthesize("Still speaking."))
    reasons = voice_reasons(health)
    assert reasons and "manifest.json" in reasons[0] and "still serving" in reasons[0], reasons
    assert str(bundle.parent) not in reasons[0]  # the voice and the file, not the host's path
    assert health.snapshot()["state"] == "degraded"
    assert library.status()["voices"][0]["voice"] == VOICE

    # the watcher is not stuck on the FIFO: a put-back manifest is seen and health recovers
    (bundle / "manifest.json").unlink(missing_ok=True)
    (bundle / "manifest.json").write_bytes(manifest)
    wait_until(lambda: voice_reasons(health) == [])
    assert library.get(VOICE) is before
    assert library.status()["last_reload"][VOICE]["outcome"] == "unchanged"
