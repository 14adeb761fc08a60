"""Hostile bundles (#15 items 1-4 and 7): links, FIFOs, files that never end or grow, a config
parsed before its hash, external data, oversize files, and configs no voice has. Each bundle
is built here from the tiny generated voice; every refusal is one line and comes in bounded
time (a FIFO is never opened for reading, a character device never read)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.library.fingerprint import fingerprint, same_files, sizes_pending
from agent.library.voices import VoiceLibrary
from agent.mqtt.publisher import model_event_fields
from agent.settings import Settings
from agent.voice.bundle import (
    BundleError,
    check_sha256,
    read_bundle,
    resolve_bundle_dir,
    verify_bundle,
    write_manifest,
)
from agent.voice.options import VoiceOptions
from agent.voice.split import SplitError, split_model
from agent.voice.voice import SynthesisParams, Voice, VoiceLoadError
from tests.support import make_tiny_voice

VOICE = make_tiny_voice.VOICE
MODEL, CONFIG = f"{VOICE}.onnx", f"{VOICE}.onnx.json"

pytestmark = pytest.mark.timeout(60)  # a hang (the defect) fails instead of blocking the run


def set_entry(bundle: Path, name: str, *, size: int | None = None,
              sha256: str | None = None) -> None:
    """Rewrite the manifest entry of ``name`` (size and sha256 of the file there now unless
    given), as an attacker who can write the bundle would."""
    path = bundle / "manifest.json"
    manifest = json.loads(path.read_text())
    target = bundle / name
    if sha256 is None:
        sha256 = hashlib.sha256(target.read_bytes()).hexdigest()
    if size is None:
        size = target.stat().st_size
    manifest["files"][name] = {"sha256": sha256, "size": size}
    path.write_text(json.dumps(manifest))


def one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


def in_thread(call: Callable[[], object], timeout: float = 20.0) -> BaseException | None:
    """Run ``call`` on a daemon thread; its exception, or fail when it does not end (a hang
    would otherwise hold the whole test run)."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    assert outcome, f"{call} did not end within {timeout} s"
    return outcome[0]


# -- 1. only regular files, never more than the manifest's size ---------------------------------

@pytest.fixture()
def fifo_model(tiny_voice_dir: Path) -> Path:
    (tiny_voice_dir / MODEL).unlink()
    os.mkfifo(tiny_voice_dir / MODEL)
    set_entry(tiny_voice_dir, MODEL, size=0, sha256=hashlib.sha256(b"").hexdigest())
    return tiny_voice_dir


def test_a_fifo_is_refused_without_waiting_on_it(fifo_model: Path) -> None:
    error = in_thread(lambda: verify_bundle(fifo_model))
    assert isinstance(error, BundleError) and "FIFO" in str(error), error
    error = in_thread(lambda: Voice.load(fifo_model))
    assert isinstance(error, VoiceLoadError) and "FIFO" in str(error), error
    # the watcher's cheap checks neither block nor call it a copy in progress
    assert in_thread(lambda: sizes_pending(fifo_model)) is None
    assert not sizes_pending(fifo_model)
    assert MODEL in {name for name, _, _ in fingerprint(fifo_model).files}


def test_a_link_to_dev_zero_is_refused_in_bounded_time(tiny_voice_dir: Path) -> None:
    (tiny_voice_dir / MODEL).unlink()
    (tiny_voice_dir / MODEL).symlink_to("/dev/zero")
    set_entry(tiny_voice_dir, MODEL, size=0, sha256=hashlib.sha256(b"").hexdigest())
    error = in_thread(lambda: verify_bundle(tiny_voice_dir))
    assert isinstance(error, BundleError) and "symbolic link" in str(error), error
    error = in_thread(lambda: Voice.load(tiny_voice_dir))
    assert isinstance(error, VoiceLoadError) and "symbolic link" in str(error), error


def test_a_file_that_grows_past_its_manifest_size_fails(tiny_voice_dir: Path) -> None:
    bundle = read_bundle(tiny_voice_dir)  # sizes checked: as they were
    with (tiny_voice_dir / MODEL).open("ab") as handle:
        handle.write(b"\0" * 4096)  # ... and then it grew
    with pytest.raises(BundleError, match="longer than the") as exc:
        check_sha256(bundle)
    one_line(exc)


def test_the_running_library_is_not_stalled_by_a_fifo(tiny_voice_dir: Path) -> None:
    """A reload of a live voice whose model became a FIFO ends, is rejected with the reason,
    and the old voice keeps serving; a later valid update loads (the reload lock is free)."""
    events: list[dict[str, Any]] = []
    settings = Settings(models={"dir": tiny_voice_dir.parent, "default_voice": VOICE})
    library = VoiceLibrary(settings, on_event=lambda e: events.append(model_event_fields(e)),
                           settle_s=0)
    before = library.get()
    (tiny_voice_dir / MODEL).rename(tiny_voice_dir.parent / "saved.onnx")
    os.mkfifo(tiny_voice_dir / MODEL)
    set_entry(tiny_voice_dir, MODEL, size=0, sha256=hashlib.sha256(b"").hexdigest())
    assert in_thread(lambda: library.reload(VOICE)) is None
    assert events[-1]["event"] == "model_rejected" and "FIFO" in events[-1]["reason"]
    assert library.get() is before and not same_files(tiny_voice_dir, before.bundle)
    (tiny_voice_dir / MODEL).unlink()
    make_tiny_voice.build_bundle(tiny_voice_dir.parent, version="2.0.0", gain=0.4)
    assert in_thread(lambda: library.reload(VOICE)) is None
    assert events[-1]["event"] == "model_loaded" and library.get().version == "2.0.0"


# -- 2. no links; hashed before parsed, parsed from the bytes hashed -----------------------------

def test_a_linked_config_is_refused_even_with_a_matching_hash(tiny_voice_dir: Path,
                                                               tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.json"
    shutil.move(tiny_voice_dir / CONFIG, outside)
    (tiny_voice_dir / CONFIG).symlink_to(outside)
    set_entry(tiny_voice_dir, CONFIG)  # the manifest agrees with what the link points at
    with pytest.raises(BundleError, match="symbolic link") as exc:
        verify_bundle(tiny_voice_dir)
    one_line(exc)
    with pytest.raises(VoiceLoadError, match="symbolic link"):
        Voice.load(tiny_voice_dir)


def test_any_link_in_the_bundle_directory_is_refused(tiny_voice_dir: Path) -> None:
    (tiny_voice_dir / "notes.txt").symlink_to("/etc/hostname")  # not even in the manifest
    with pytest.raises(BundleError, match=r"notes\.txt: a symbolic link"):
        verify_bundle(tiny_voice_dir)


def staged(tiny_voice_dir: Path, tmp_path: Path) -> Path:
    voice_dir = tmp_path / "staged" / VOICE
    voice_dir.mkdir(parents=True)
    shutil.copytree(tiny_voice_dir, voice_dir / "1.0.0")
    return voice_dir


@pytest.mark.parametrize("target", ["outside", "../outside-rel", "1.0.0/../../outside-rel",
                                    "current"])
def test_current_must_name_a_version_directory_inside_the_voice(
        tiny_voice_dir: Path, tmp_path: Path, target: str) -> None:
    voice_dir = staged(tiny_voice_dir, tmp_path)
    shutil.copytree(tiny_voice_dir, tmp_path / "staged" / "outside-rel")
    shutil.copytree(tiny_voice_dir, tmp_path / "outside")
    link = str(tmp_path / "outside") if target == "outside" else target
    (voice_dir / "current").symlink_to(link)
    with pytest.raises(BundleError, match="version directory inside") as exc:
        verify_bundle(resolve_bundle_dir(voice_dir))
    one_line(exc)


def test_the_library_refuses_a_current_that_leaves_the_voice(tiny_voice_dir: Path,
                                                             tmp_path: Path) -> None:
    voice_dir = staged(tiny_voice_dir, tmp_path)
    (voice_dir / "current").symlink_to("1.0.0")
    events: list[dict[str, Any]] = []
    settings = Settings(models={"dir": voice_dir.parent, "default_voice": VOICE})
    library = VoiceLibrary(settings, on_event=lambda e: events.append(model_event_fields(e)),
                           settle_s=0)
    before = library.get()
    make_tiny_voice.build_bundle(tmp_path, version="6.6.6", gain=0.3, bundle=tmp_path / "evil")
    (voice_dir / ".tmp-link").symlink_to(tmp_path / "evil")
    os.replace(voice_dir / ".tmp-link", voice_dir / "current")
    library.reload(VOICE)
    assert events[-1]["event"] == "model_rejected", events[-1]
    assert "version directory inside" in events[-1]["reason"]
    assert library.get() is before


def test_a_staged_current_still_loads(tiny_voice_dir: Path, tmp_path: Path) -> None:
    voice_dir = staged(tiny_voice_dir, tmp_path)
    (voice_dir / "current").symlink_to("1.0.0")
    assert verify_bundle(resolve_bundle_dir(voice_dir)).version == "1.0.0"


def test_the_config_is_hashed_before_it_is_parsed(tiny_voice_dir: Path) -> None:
    config = tiny_voice_dir / CONFIG
    size = config.stat().st_size
    config.write_bytes(b"{" + b" " * (size - 1))  # same size, not JSON, sha256 differs
    with pytest.raises(VoiceLoadError, match="sha256 does not match") as exc:
        Voice.load(tiny_voice_dir)
    assert "config" not in one_line(exc).split(":")[-1]


def test_a_model_renamed_over_after_its_hash_is_never_read(
        tiny_voice_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """onnxruntime reads the open file that was checked and hashed, not the name: another model
    renamed over it once its hash matched (here: a quieter one) is not what loads."""
    import agent.voice.voice as voice_module

    other = make_tiny_voice.build_bundle(tmp_path, gain=0.05, bundle=tmp_path / "other")
    checked = voice_module.check_model

    def check_then_swap(*args: Any) -> Any:
        result = checked(*args)
        os.replace(other / MODEL, tiny_voice_dir / MODEL)
        return result

    monkeypatch.setattr(voice_module, "check_model", check_then_swap)
    voice = Voice.load(tiny_voice_dir, VoiceOptions(stream_first_frames=0))
    ids = voice.frontend.ids(voice.sentences("Hello.")[0])
    peak = float(abs(voice.ids_to_audio(ids, SynthesisParams(noise_scale=0.0))).max())
    assert peak > 0.2, "the model renamed over the checked one was loaded"


@pytest.fixture()
def opens() -> Iterator[list[str]]:
    """Paths opened while the test runs (audit hook: what ``open``/``os.open`` see)."""
    seen: list[str] = []
    active = [True]

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if active[0] and event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
            seen.append(os.fsdecode(args[0]))

    sys.addaudithook(hook)
    yield seen
    active[0] = False


def test_the_config_is_read_once_and_parsed_from_those_bytes(tiny_voice_dir: Path,
                                                              opens: list[str]) -> None:
    Voice.load(tiny_voice_dir, VoiceOptions(stream_first_frames=0))
    assert opens.count(str(tiny_voice_dir / CONFIG)) == 1


# -- 3. external data ------------------------------------------------------------------------

def external_data_bundle(bundle: Path, *, listed: bool) -> Path:
    """The tiny voice with its weights in ``weights.bin`` (in the manifest when ``listed``)."""
    import onnx

    model = onnx.load(str(bundle / MODEL))
    onnx.save_model(model, str(bundle / MODEL), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
    write_manifest(bundle, voice=VOICE, version="1.1.0", sample_rate=make_tiny_voice.SAMPLE_RATE,
                   variants={"fp32": MODEL}, config=CONFIG, source="test")
    if listed:
        set_entry(bundle, "weights.bin")
    return bundle


@pytest.mark.parametrize("listed", [True, False], ids=["in-manifest", "not-in-manifest"])
def test_external_data_is_refused(tiny_voice_dir: Path, listed: bool) -> None:
    bundle = external_data_bundle(tiny_voice_dir, listed=listed)
    with pytest.raises(BundleError, match="external file") as exc:
        verify_bundle(bundle)  # what `models verify` runs
    one_line(exc)
    with pytest.raises(VoiceLoadError, match="external file"):
        Voice.load(bundle)


def test_a_tampered_external_weights_file_is_not_served(tiny_voice_dir: Path) -> None:
    bundle = external_data_bundle(tiny_voice_dir, listed=False)
    weights = bundle / "weights.bin"
    data = bytearray(weights.read_bytes())
    data[400] ^= 0x01  # the lowest mantissa bit of one weight: still plays, differently
    weights.write_bytes(bytes(data))
    with pytest.raises(BundleError, match="external file"):
        verify_bundle(bundle)
    with pytest.raises(VoiceLoadError, match="external file"):
        Voice.load(bundle, VoiceOptions(stream_first_frames=0))


# -- 4. size bound ---------------------------------------------------------------------------

def oversize(bundle: Path, size: int) -> None:
    """The model replaced by a sparse file of ``size`` bytes, its manifest entry matching the
    size (and some sha256: it must never be computed)."""
    (bundle / MODEL).unlink()
    with (bundle / MODEL).open("wb") as handle:
        os.truncate(handle.fileno(), size)
    set_entry(bundle, MODEL, size=size, sha256="0" * 64)


def test_an_oversize_file_is_refused_before_it_is_read(tiny_voice_dir: Path,
                                                        opens: list[str]) -> None:
    oversize(tiny_voice_dir, 3 << 30)
    opens.clear()
    with pytest.raises(BundleError, match="above the limit") as exc:
        verify_bundle(tiny_voice_dir, max_file_bytes=1 << 20)
    assert "max_model_bytes" in one_line(exc)
    with pytest.raises(VoiceLoadError, match="above the limit"):
        Voice.load(tiny_voice_dir, VoiceOptions(max_model_bytes=256 << 20))
    assert str(tiny_voice_dir / MODEL) not in opens


def test_an_oversize_voice_is_rejected_and_the_old_one_keeps_serving(tiny_voice_dir: Path) -> None:
    events: list[dict[str, Any]] = []
    settings = Settings(models={"dir": tiny_voice_dir.parent, "default_voice": VOICE,
                                "max_model_bytes": 1 << 20})
    library = VoiceLibrary(settings, on_event=lambda e: events.append(model_event_fields(e)),
                           settle_s=0)
    before = library.get()
    oversize(tiny_voice_dir, 2 << 30)  # above the setting, below the default
    library.reload(VOICE)
    assert events[-1]["event"] == "model_rejected"
    assert "above the limit of 1048576" in events[-1]["reason"]
    assert library.get() is before
    assert list(before.synthesize("Still here."))


def test_the_size_bound_has_one_default() -> None:
    from agent.settings import ModelSettings
    from agent.voice.bundle import DEFAULT_MAX_FILE_BYTES

    assert ModelSettings().max_model_bytes == DEFAULT_MAX_FILE_BYTES
    assert VoiceOptions().max_model_bytes == DEFAULT_MAX_FILE_BYTES


def test_the_split_step_is_bounded(tiny_voice_dir: Path) -> None:
    with pytest.raises(SplitError, match="above the"):
        split_model(tiny_voice_dir / MODEL, max_bytes=100)


# -- 7. config sanity ------------------------------------------------------------------------

def rewrite_config(bundle: Path, change: Callable[[dict[str, Any]], None],
                   sample_rate: int = make_tiny_voice.SAMPLE_RATE) -> None:
    path = bundle / CONFIG
    config = json.loads(path.read_text())
    change(config)
    path.write_text(json.dumps(config, ensure_ascii=False))
    write_manifest(bundle, voice=VOICE, version="1.2.0", sample_rate=sample_rate,
                   variants={"fp32": MODEL}, config=CONFIG, source="test")


@pytest.mark.parametrize("rate", [200_000, 4000])
def test_a_sample_rate_out_of_range_is_refused(tiny_voice_dir: Path, rate: int) -> None:
    rewrite_config(tiny_voice_dir, lambda c: c["audio"].update(sample_rate=rate), rate)
    with pytest.raises(VoiceLoadError, match=rf"sample rate {rate} Hz is outside 8000\.\.48000"):
        Voice.load(tiny_voice_dir)


def test_a_phoneme_id_beyond_the_embedding_is_refused_at_load(tiny_voice_dir: Path) -> None:
    rewrite_config(tiny_voice_dir, lambda c: c["phoneme_id_map"].update({"a": [10**6]}))
    with pytest.raises(VoiceLoadError, match=r"'a' maps to id 1000000, beyond the model's 256 "
                                             r"symbols") as exc:
        Voice.load(tiny_voice_dir)
    one_line(exc)


def test_a_negative_phoneme_id_is_refused(tiny_voice_dir: Path) -> None:
    rewrite_config(tiny_voice_dir, lambda c: c["phoneme_id_map"].update({"a": [-3]}))
    with pytest.raises(VoiceLoadError, match="'a' maps to"):
        Voice.load(tiny_voice_dir)


def test_a_duration_model_whose_phonemes_last_too_short_is_refused(tiny_voice_dir: Path) -> None:
    """A graph with Piper's duration predictor (a ``/dp/`` node) whose phonemes last a few ms at
    the config's rate was made for another rate. The tiny voice makes 64 samples per id."""
    import onnx

    model = onnx.load(str(tiny_voice_dir / MODEL))
    model.graph.node[4].name = "/dp/Cast"
    onnx.save(model, str(tiny_voice_dir / MODEL))
    write_manifest(tiny_voice_dir, voice=VOICE, version="1.3.0",
                   sample_rate=make_tiny_voice.SAMPLE_RATE, variants={"fp32": MODEL},
                   config=CONFIG, source="test")
    with pytest.raises(VoiceLoadError, match=r"a phoneme lasts 4 ms .* not 16000") as exc:
        Voice.load(tiny_voice_dir)
    one_line(exc)
