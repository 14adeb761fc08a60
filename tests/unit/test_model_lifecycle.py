"""Model lifecycle: hot reload through the watcher, validation, atomic swap, rollback."""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.library.voices import VoiceLibrary, VoiceNotFound
from agent.library.watch import ModelWatcher, is_temporary
from agent.settings import Settings
from agent.voice.bundle import write_manifest
from agent.voice.voice import VoiceLoadError
from tests.support import make_tiny_voice
from tests.support.recorders import ModelEvents as Events

VOICE = make_tiny_voice.VOICE


def make_library(models: Path, events: Events, **models_settings: Any) -> VoiceLibrary:
    settings = Settings(models={"dir": models, "default_voice": VOICE, "debounce_s": 0.2,
                                "pending_timeout_s": 3.0, **models_settings})
    return VoiceLibrary(settings, on_event=events, settle_s=0.3)


class Speaker:
    """Keeps synthesizing on another thread, as requests would during a reload."""

    def __init__(self, library: VoiceLibrary) -> None:
        self.library = library
        self.done = 0
        self.failures: list[BaseException] = []
        self.versions: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                voice = self.library.get()
                chunks = list(voice.synthesize("Attention please. The train is late."))
                assert len(chunks) == 2 and all(c.frames for c in chunks)
                self.versions.add(voice.version)
                self.done += 1
            except BaseException as exc:
                self.failures.append(exc)

    def __enter__(self) -> Speaker:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


@pytest.fixture()
def watched(tiny_voice_dir: Path) -> Iterator[tuple[VoiceLibrary, Events, Path]]:
    events = Events()
    library = make_library(tiny_voice_dir.parent, events)
    library.get()
    watcher = ModelWatcher(library, debounce_s=0.2)
    watcher.start()
    yield library, events, tiny_voice_dir
    watcher.stop()


def new_version_files(tmp: Path, version: str, gain: float) -> Path:
    return make_tiny_voice.build_bundle(tmp, version=version, gain=gain, bundle=tmp / version)


def loaded(events: Events, version: str) -> Callable[[list[dict[str, Any]]], bool]:
    return lambda items: any(e["event"] == "model_loaded" and e["version"] == version
                             for e in items)


def test_atomic_rename_reloads_once(watched: tuple[VoiceLibrary, Events, Path],
                                    tmp_path: Path) -> None:
    library, events, bundle = watched
    new = new_version_files(tmp_path / "new", "2.0.0", gain=0.4)
    with Speaker(library) as speaker:
        for name in (f"{VOICE}.onnx", f"{VOICE}.onnx.json", "manifest.json"):
            shutil.copyfile(new / name, bundle / f".{name}.tmp")  # updater writes a temp file
            os.replace(bundle / f".{name}.tmp", bundle / name)  # ... and renames it into place
        events.wait_for(loaded(events, "2.0.0"))
        time.sleep(1.0)  # give a spurious second reload the chance to happen
    assert events.kinds() == ["model_loaded", "model_loaded"]  # initial load + this one
    assert library.get().version == "2.0.0"
    assert events.items[-1]["sha256"][f"{VOICE}.onnx"] == library.get().sha256
    assert not speaker.failures and speaker.done > 0


def test_symlink_swap_reloads_once(tiny_voice_dir: Path, tmp_path: Path) -> None:
    models = tmp_path / "staged"
    voice_dir = models / VOICE
    voice_dir.mkdir(parents=True)
    shutil.copytree(tiny_voice_dir, voice_dir / "1.0.0")
    new_version_files(voice_dir, "2.0.0", gain=0.3)
    (voice_dir / "current").symlink_to("1.0.0")
    events = Events()
    library = make_library(models, events)
    assert library.get().version == "1.0.0"
    watcher = ModelWatcher(library, debounce_s=0.2)
    watcher.start()
    try:
        with Speaker(library) as speaker:
            (voice_dir / ".current.new").symlink_to("2.0.0")
            os.replace(voice_dir / ".current.new", voice_dir / "current")
            events.wait_for(loaded(events, "2.0.0"))
            time.sleep(1.0)
    finally:
        watcher.stop()
    assert events.kinds() == ["model_loaded", "model_loaded"]
    assert library.get().version == "2.0.0"
    assert not speaker.failures and speaker.done > 0


def test_slow_in_place_copy_reloads_once(watched: tuple[VoiceLibrary, Events, Path],
                                         tmp_path: Path) -> None:
    library, events, bundle = watched
    new = new_version_files(tmp_path / "new", "3.0.0", gain=0.2)
    data = (new / f"{VOICE}.onnx").read_bytes()
    with Speaker(library) as speaker:
        shutil.copyfile(new / "manifest.json", bundle / "manifest.json")  # manifest first
        with (bundle / f"{VOICE}.onnx").open("r+b") as handle:  # then the model, slowly, in place
            handle.truncate(0)
            step = max(1, len(data) // 10)
            for offset in range(0, len(data), step):
                handle.write(data[offset:offset + step])
                handle.flush()
                time.sleep(0.15)
        events.wait_for(loaded(events, "3.0.0"))
        time.sleep(1.0)
    assert events.kinds() == ["model_loaded", "model_loaded"], events.items
    assert not speaker.failures and speaker.done > 0


def corrupt_truncated(bundle: Path) -> None:
    model = bundle / f"{VOICE}.onnx"
    model.write_bytes(model.read_bytes()[:200])


def corrupt_wrong_hash(bundle: Path) -> None:
    model = bundle / f"{VOICE}.onnx"
    data = bytearray(model.read_bytes())
    data[len(data) // 2] ^= 0x55
    model.write_bytes(bytes(data))


def corrupt_not_onnx(bundle: Path) -> None:
    (bundle / f"{VOICE}.onnx").write_bytes(b"PK\x03\x04 definitely not onnx" * 50)
    write_manifest(bundle, voice=VOICE, version="9.9.9", sample_rate=16000,
                   variants={"fp32": f"{VOICE}.onnx"}, config=f"{VOICE}.onnx.json", source="t")


def corrupt_wrong_inputs(bundle: Path) -> None:
    make_tiny_voice.build_bundle(bundle.parent, version="9.9.9", input_name="tokens",
                                 bundle=bundle)


def corrupt_deep_manifest(bundle: Path) -> None:
    """#27: 2 KB of 1,000 nested ``[`` (a RecursionError for an unbounded parser)."""
    (bundle / ".manifest.tmp").write_bytes(b"[" * 1000 + b"]" * 1000)
    os.replace(bundle / ".manifest.tmp", bundle / "manifest.json")


def corrupt_deep_config(bundle: Path) -> None:
    """#27: a voice config nested 1,000 deep whose sha256 the manifest lists."""
    (bundle / f"{VOICE}.onnx.json").write_bytes(b"[" * 1000 + b"]" * 1000)
    write_manifest(bundle, voice=VOICE, version="9.9.9", sample_rate=16000,
                   variants={"fp32": f"{VOICE}.onnx"}, config=f"{VOICE}.onnx.json", source="t")


def corrupt_huge_number(bundle: Path) -> None:
    """#27: a sample rate of 5,000 digits (int() refuses it with a ValueError of its own)."""
    path = bundle / "manifest.json"
    text = path.read_text().replace('"sample_rate": 16000', '"sample_rate": ' + "9" * 5000)
    assert "9" * 5000 in text
    (bundle / ".manifest.tmp").write_text(text)
    os.replace(bundle / ".manifest.tmp", path)


@pytest.mark.parametrize(
    ("corrupt", "reason"),
    [
        (corrupt_deep_manifest, "unreadable manifest: nested too deeply: more than 200 levels"),
        (corrupt_deep_config, "unreadable voice config: nested too deeply: more than 200"),
        (corrupt_huge_number, "number too long: 5000 characters"),
        (corrupt_truncated, "size"),
        (corrupt_wrong_hash, "sha256"),
        (corrupt_not_onnx, "onnxruntime cannot load"),
        (corrupt_wrong_inputs, "lack"),
    ],
    ids=["deep-manifest", "deep-config", "huge-number", "truncated", "wrong-hash", "not-onnx",
         "wrong-inputs"],
)
def test_broken_models_are_rejected_and_old_voice_keeps_speaking(
    watched: tuple[VoiceLibrary, Events, Path],
    corrupt: Callable[[Path], None],
    reason: str,
) -> None:
    library, events, bundle = watched
    before = library.get()
    with Speaker(library) as speaker:
        corrupt(bundle)
        events.wait_for(lambda items: any(e["event"] == "model_rejected" for e in items))
        time.sleep(0.5)
    rejected = [e for e in events.items if e["event"] == "model_rejected"]
    assert len(rejected) == 1
    assert reason in rejected[0]["reason"]
    assert library.get() is before
    assert library.status()["last_reload"][VOICE]["outcome"] == "rejected"
    assert not speaker.failures and speaker.done > 0
    assert speaker.versions == {"1.0.0"}


def test_touch_without_change_does_not_reload(watched: tuple[VoiceLibrary, Events, Path]) -> None:
    library, events, bundle = watched
    before = library.get()
    os.utime(bundle / f"{VOICE}.onnx")
    time.sleep(1.5)
    assert library.get() is before
    assert events.kinds() == ["model_loaded"]


def staged_three_versions(tiny_voice_dir: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A staged voice with 1.0.0 (current), 2.0.0 (good) and 3.0.0 (wrong inputs): the models
    dir and the voice's dir."""
    models = tmp_path / "staged"
    voice_dir = models / VOICE
    voice_dir.mkdir(parents=True)
    shutil.copytree(tiny_voice_dir, voice_dir / "1.0.0")
    new_version_files(voice_dir, "2.0.0", gain=0.3)
    corrupt_wrong_inputs(new_version_files(voice_dir, "3.0.0", gain=0.1))
    (voice_dir / "current").symlink_to("1.0.0")
    return models, voice_dir


def test_activate_and_rollback(tiny_voice_dir: Path, tmp_path: Path) -> None:
    models, voice_dir = staged_three_versions(tiny_voice_dir, tmp_path)
    events = Events()
    library = make_library(models, events)
    assert library.versions(VOICE) == ["1.0.0", "2.0.0", "3.0.0"]
    assert library.get().version == "1.0.0"
    assert library.activate(VOICE, "2.0.0").outcome == "loaded"
    assert library.get().version == "2.0.0"
    assert os.readlink(voice_dir / "previous") == "1.0.0"
    # a broken version is refused and `current` goes back to what was live
    assert library.activate(VOICE, "3.0.0").outcome == "rejected"
    assert os.readlink(voice_dir / "current") == "2.0.0"
    assert library.get().version == "2.0.0"
    assert library.rollback(VOICE).outcome == "loaded"
    assert library.get().version == "1.0.0"
    with pytest.raises(VoiceNotFound, match="no version"):
        library.activate(VOICE, "../../etc")


def test_activate_validates_a_voice_no_one_used_yet(tiny_voice_dir: Path, tmp_path: Path,
                                                    ) -> None:
    """#28 item 1: an activation of a voice that is not the default and was not used since the
    start validates the version now (it was "unchanged", and `current` went back, before)."""
    models, voice_dir = staged_three_versions(tiny_voice_dir, tmp_path)
    events = Events()
    library = make_library(models, events, default_voice="someone-else")
    refused = library.activate(VOICE, "3.0.0")
    assert refused.outcome == "rejected"
    assert str(models) not in str(refused.reason)  # it goes over the network
    assert os.readlink(voice_dir / "current") == "1.0.0"
    assert library.loaded() == [] and events.kinds() == ["model_rejected"]
    assert library.activate(VOICE, "2.0.0").outcome == "loaded"
    assert [(v.name, v.version) for v in library.loaded()] == [(VOICE, "2.0.0")]
    assert os.readlink(voice_dir / "previous") == "1.0.0"
    assert library.activate(VOICE, "2.0.0").outcome == "unchanged"  # it serves it already
    # staged without a current version yet: a rejected one does not become current
    fresh = make_library(models, Events(), default_voice="someone-else")
    (voice_dir / "current").unlink()
    assert fresh.activate(VOICE, "3.0.0").outcome == "rejected"
    assert not os.path.lexists(voice_dir / "current")


def test_rollback_needs_staged_layout(tiny_voice_dir: Path) -> None:
    library = make_library(tiny_voice_dir.parent, Events())
    with pytest.raises(VoiceNotFound, match="staged layout"):
        library.rollback(VOICE)


def test_polling_observer_also_reloads(tiny_voice_dir: Path, tmp_path: Path) -> None:
    events = Events()
    library = make_library(tiny_voice_dir.parent, events)
    library.get()
    watcher = ModelWatcher(library, debounce_s=0.2, polling=True, poll_interval_s=0.2)
    watcher.start()
    try:
        new = new_version_files(tmp_path / "new", "2.0.0", gain=0.4)
        for name in (f"{VOICE}.onnx", "manifest.json"):
            shutil.copyfile(new / name, tiny_voice_dir / f".{name}.tmp")
            os.replace(tiny_voice_dir / f".{name}.tmp", tiny_voice_dir / name)
        events.wait_for(loaded(events, "2.0.0"))
    finally:
        watcher.stop()


@pytest.mark.parametrize(
    ("name", "temporary"),
    [(".en.onnx.XyZ12", True), ("a.onnx~", True), ("a.onnx.part", True), ("a.tmp", True),
     ("#a.onnx#", True), ("a.onnx", False), ("manifest.json", False), ("current", False)],
)
def test_temporary_files_are_ignored(name: str, temporary: bool) -> None:
    assert is_temporary(f"/models/v/{name}") is temporary


def test_preload_loads_once_and_get_reports_it(tiny_voice_dir: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """``tts-agent run`` preloads the default voice before it has wired its event sink:
    the voice is validated once, on the helper thread, and reported when ``get`` takes it."""
    events = Events()
    library = make_library(tiny_voice_dir.parent, events)
    library.on_event = None
    threads: list[str] = []
    validate = VoiceLibrary._validate

    def spy(self: VoiceLibrary, *args: Any) -> Any:
        threads.append(threading.current_thread().name)
        return validate(self, *args)

    monkeypatch.setattr(VoiceLibrary, "_validate", spy)
    thread = library.preload()
    assert thread is not None
    thread.join(30)
    assert threads == ["voice-preload"]
    assert events.items == [] and library.loaded() == []  # not live until get() takes it
    library.on_event = events
    voice = library.get()
    assert library.get() is voice and library.loaded() == [voice]
    assert threads == ["voice-preload"]
    assert events.kinds() == ["model_loaded"] and events.items[0]["version"] == "1.0.0"
    assert all(chunk.frames > 0 for chunk in voice.synthesize("Preloaded."))


def test_get_waits_for_a_preload_in_progress(tiny_voice_dir: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    events = Events()
    library = make_library(tiny_voice_dir.parent, events)
    release = threading.Event()
    calls: list[str] = []
    validate = VoiceLibrary._validate

    def slow(self: VoiceLibrary, *args: Any) -> Any:
        calls.append(threading.current_thread().name)
        assert release.wait(30)
        return validate(self, *args)

    monkeypatch.setattr(VoiceLibrary, "_validate", slow)
    library.preload()
    got: list[Any] = []
    getter = threading.Thread(target=lambda: got.append(library.get()))
    getter.start()
    time.sleep(0.3)
    assert got == []  # waiting for the preload, not loading a second copy
    release.set()
    getter.join(30)
    assert len(got) == 1 and calls == ["voice-preload"]
    assert events.kinds() == ["model_loaded"]


def test_preload_of_a_broken_voice_fails_on_get(tiny_voice_dir: Path) -> None:
    corrupt_wrong_hash(tiny_voice_dir)
    events = Events()
    library = make_library(tiny_voice_dir.parent, events)
    thread = library.preload()
    assert thread is not None
    thread.join(30)
    with pytest.raises(VoiceLoadError, match="sha256"):
        library.get()
    assert library.loaded() == []
    with pytest.raises(VoiceLoadError, match="sha256"):
        library.get()  # the same refusal: the files did not change


def test_preload_of_a_missing_voice_does_nothing(tiny_voice_dir: Path) -> None:
    library = make_library(tiny_voice_dir.parent, Events())
    assert library.preload("no-such-voice") is None
    with pytest.raises(VoiceNotFound):
        library.get("no-such-voice")
    assert library.get().name == VOICE  # the lock was not left taken


def count_validations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the voices validated from now on (the real validation runs)."""
    calls: list[str] = []
    validate = VoiceLibrary._validate

    def counting(self: VoiceLibrary, name: str, *args: Any) -> Any:
        calls.append(name)
        return validate(self, name, *args)

    monkeypatch.setattr(VoiceLibrary, "_validate", counting)
    return calls


def test_a_broken_default_voice_is_reported_once_and_refused_until_its_files_change(
        tiny_voice_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """#15-8: the first load's refusal is published and kept in status like a reload's; the
    next requests get the same reason without a new validation, until the files change."""
    corrupt_wrong_hash(tiny_voice_dir)
    events = Events()
    library = make_library(tiny_voice_dir.parent, events)
    calls = count_validations(monkeypatch)
    for _ in range(3):
        with pytest.raises(VoiceLoadError, match="sha256"):
            library.get()
    assert calls == [VOICE]
    assert events.kinds() == ["model_rejected"]
    assert "sha256" in events.items[0]["reason"] and events.items[0]["version"] == "1.0.0"
    status = library.status()
    assert status["voices"] == []
    assert status["last_reload"][VOICE]["outcome"] == "rejected"
    assert "sha256" in status["last_reload"][VOICE]["reason"]
    again = library.reload()  # asked again (SIGHUP, the reload command): the same answer
    assert [(r.outcome, r.reason) for r in again] == [("rejected", events.items[0]["reason"])]
    assert calls == [VOICE] and events.kinds() == ["model_rejected"]  # not validated again
    new_version_files(tmp_path / "new", "2.0.0", gain=0.4)
    for name in (f"{VOICE}.onnx", "manifest.json"):
        shutil.copyfile(tmp_path / "new" / "2.0.0" / name, tiny_voice_dir / name)
    assert library.get().version == "2.0.0"  # the files changed: validated again, and loaded
    assert calls == [VOICE, VOICE]
    assert events.kinds() == ["model_rejected", "model_loaded"]


def test_a_refused_preloaded_voice_is_reported_when_get_takes_it(
        tiny_voice_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    corrupt_wrong_inputs(tiny_voice_dir)
    events = Events()
    library = make_library(tiny_voice_dir.parent, events)
    library.on_event = None  # as in `tts-agent run`: the sink is wired after the preload
    calls = count_validations(monkeypatch)
    thread = library.preload()
    assert thread is not None
    thread.join(30)
    library.on_event = events
    with pytest.raises(VoiceLoadError, match="lack"):
        library.get()
    with pytest.raises(VoiceLoadError, match="lack"):
        library.get()
    assert calls == [VOICE]
    assert events.kinds() == ["model_rejected"]
    assert library.status()["last_reload"][VOICE]["outcome"] == "rejected"
