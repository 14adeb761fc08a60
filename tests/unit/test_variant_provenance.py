"""#19-3: a derived variant records its source; a stale one is not served; a damaged file of the
bundle that the live voice does not serve is reported, not ignored.

The bundles are the tiny generated voice with a second tiny model standing in for its int8
variant (the library only needs two models and the manifest's record); the quantizer's own
record is checked on the Piper-structured test voice it can quantize.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from agent.health.snapshot import Health
from agent.library.variants import VariantChoice, choose_variant
from agent.library.voices import VoiceLibrary
from agent.settings import Settings
from agent.voice.bundle import read_manifest, sha256_file, write_manifest
from tests.support import make_tiny_voice, quant_voice
from tests.support.recorders import ModelEvents as Events

VOICE = make_tiny_voice.VOICE
FP32, INT8 = f"{VOICE}.onnx", f"{VOICE}.int8.onnx"


def settle(bundle: Path) -> None:
    """Files written a while ago: the library does not wait for a copy to settle."""
    past = time.time() - 60
    for path in bundle.iterdir():
        os.utime(path, (past, past))


def write(bundle: Path, *, version: str = "1.0.0", derived: dict[str, Any] | None = None,
          ) -> None:
    extra = {"derived": derived} if derived is not None else None
    write_manifest(bundle, voice=VOICE, version=version, sample_rate=make_tiny_voice.SAMPLE_RATE,
                   variants={"fp32": FP32, "int8": INT8}, config=f"{FP32}.json", source="test",
                   extra=extra)
    settle(bundle)


def recorded(bundle: Path) -> dict[str, Any]:
    """The record ``tts-agent quantize`` writes, for the fp32 file as it is now."""
    return {"int8": {"from": "fp32", "file": FP32, "sha256": sha256_file(bundle / FP32)}}


@pytest.fixture()
def bundle(tiny_voice_dir: Path) -> Path:
    """The tiny voice with an int8 variant made from its fp32 model, provenance recorded."""
    make_tiny_voice.build_model(tiny_voice_dir / INT8, gain=0.3)
    write(tiny_voice_dir, derived=recorded(tiny_voice_dir))
    return tiny_voice_dir


def int8_library(models: Path, events: Events) -> VoiceLibrary:
    settings = Settings(models={"dir": models, "default_voice": VOICE, "variant": "int8",
                                "pending_timeout_s": 0.2},
                        cache={"dir": models.parent / "cache"})
    return VoiceLibrary(settings, on_event=events, settle_s=0.3)


def reload(library: VoiceLibrary) -> list[str]:
    """The outcomes of a reload once the library stops waiting for the copy to finish (a file
    whose size is not the manifest's counts as being written for ``pending_timeout_s``)."""
    deadline = time.monotonic() + 30
    while (outcomes := [r.outcome for r in library.reload()]) == ["pending"]:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return outcomes


def health_of(library: VoiceLibrary) -> tuple[str, list[str]]:
    health = Health(Settings(cache={"dir": library.models_dir.parent / "cache"}))
    health.add_provider("voices", library.status)
    snap = health.snapshot()
    return snap["state"], [r for r in snap["reasons"] if r.startswith("voice ")]


def manifest(fp32_sha: str, derived: Any = None) -> dict[str, Any]:
    data: dict[str, Any] = {"variants": {"fp32": "a.onnx", "int8": "a.int8.onnx"},
                            "files": {"a.onnx": {"sha256": fp32_sha}}}
    if derived is not None:
        data["derived"] = derived
    return data


def test_choose_variant() -> None:
    made_from = {"int8": {"from": "fp32", "sha256": "a" * 64}}
    assert choose_variant(manifest("a" * 64, made_from), "int8", auto=False) == \
        VariantChoice("int8")
    stale = choose_variant(manifest("b" * 64, made_from), "int8", auto=False)
    assert stale.variant == "fp32" and stale.stale
    assert stale.reason is not None and "int8 is stale" in stale.reason
    unknown = choose_variant(manifest("a" * 64), "int8", auto=True)
    assert unknown.variant == "int8" and not unknown.stale
    assert unknown.reason is not None and "provenance unknown" in unknown.reason
    assert choose_variant(manifest("a" * 64, {"int8": "junk"}), "int8", auto=False).variant == \
        "int8"  # a malformed record: unknown provenance, served as before
    assert choose_variant(manifest("b" * 64, made_from), "fp32", auto=False) == \
        VariantChoice("fp32")
    only_fp32 = {"variants": {"fp32": "a.onnx"}, "files": {}}
    assert choose_variant(only_fp32, "int8", auto=True).variant == "fp32"
    assert choose_variant(only_fp32, "int8", auto=False).variant == "int8"  # the load says why


def test_int8_with_its_source_recorded_is_served(bundle: Path) -> None:
    events = Events()
    library = int8_library(bundle.parent, events)
    voice = library.get()
    assert voice.variant == "int8"
    assert "variant_reason" not in events.items[0]
    assert library.status()["voices"][0]["problems"] == []
    assert health_of(library) == ("ok", [])


def test_a_stale_int8_is_not_served_after_a_new_fp32_is_pushed(bundle: Path) -> None:
    """A new fp32 model and its manifest entry, as an operator pushes a voice; the int8 file
    and its record stay as they were: fp32 serves, the event and health say why."""
    events = Events()
    library = int8_library(bundle.parent, events)
    assert library.get().variant == "int8"
    make_tiny_voice.build_model(bundle / FP32, gain=0.7)
    write(bundle, version="1.1.0", derived=read_manifest(bundle)["derived"])
    assert reload(library) == ["loaded"]
    voice = library.get()
    assert (voice.variant, voice.version) == ("fp32", "1.1.0")
    loaded = events.items[-1]
    assert loaded["event"] == "model_loaded" and loaded["variant"] == "fp32"
    assert "int8 is stale" in loaded["variant_reason"]
    state, reasons = health_of(library)
    assert state == "degraded" and len(reasons) == 1 and "int8 is stale" in reasons[0]
    # Re-quantized (a new record for the new fp32): int8 serves again and health is ok.
    make_tiny_voice.build_model(bundle / INT8, gain=0.2)
    write(bundle, version="1.1.0", derived=recorded(bundle))
    assert reload(library) == ["loaded"]
    assert library.get().variant == "int8"
    assert health_of(library) == ("ok", [])


def test_a_bundle_without_provenance_keeps_working_and_says_so(bundle: Path) -> None:
    write(bundle)  # no "derived": a bundle made before the record existed
    events = Events()
    library = int8_library(bundle.parent, events)
    assert library.get().variant == "int8"
    assert "provenance unknown" in events.items[0]["variant_reason"]
    assert health_of(library) == ("ok", [])


def test_a_damaged_fp32_while_int8_serves_is_reported(bundle: Path) -> None:
    events = Events()
    library = int8_library(bundle.parent, events)
    voice = library.get()
    data = (bundle / FP32).read_bytes()
    with (bundle / FP32).open("r+b") as handle:
        handle.truncate(len(data) // 2)
    settle(bundle)
    assert reload(library) == ["unchanged"]  # int8 keeps serving
    assert library.get() is voice
    # The load's background hash of the unserved fp32 may still be reading when the file is
    # cut, and then reports it first ("sha256 does not match"): wait for the reload's finding.
    damaged = events.wait_for_event(lambda e: e["event"] == "model_damaged"
                                    and "size" in e["reason"])
    assert damaged["files"] == [FP32] and "size" in damaged["reason"]
    state, reasons = health_of(library)
    assert state == "degraded" and FP32 in reasons[0] and "not served" in reasons[0]
    # The same size, other bytes: only a hash tells, and it runs in the background.
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0x55
    (bundle / FP32).write_bytes(bytes(flipped))
    settle(bundle)
    found = len(events.items)  # a sha256 finding from before the cut is not this one
    assert reload(library) == ["unchanged"]
    with events.cond:  # by position: an earlier finding can be an equal dict
        assert events.cond.wait_for(lambda: any(
            e["event"] == "model_damaged" and "sha256" in e["reason"]
            for e in events.items[found:]), 30.0), events.items
        later = [e for e in events.items[found:] if e["event"] == "model_damaged"]
    assert later[-1]["files"] == [FP32], later
    assert "sha256" in health_of(library)[1][0], (health_of(library), events.items)
    (bundle / FP32).write_bytes(data)  # repaired
    settle(bundle)
    reload(library)
    deadline = time.monotonic() + 30
    while health_of(library)[0] != "ok" and time.monotonic() < deadline:
        time.sleep(0.05)  # the background hash clears the finding
    assert health_of(library) == ("ok", [])
    assert library.get() is voice


def test_a_fifo_in_place_of_the_unserved_model_is_reported_not_read(bundle: Path) -> None:
    events = Events()
    library = int8_library(bundle.parent, events)
    library.get()
    (bundle / FP32).unlink()
    os.mkfifo(bundle / FP32)
    settle(bundle)
    reload(library)
    # (the start's background hash may have seen the file missing in between: reported too)
    events.wait_for_event(lambda e: e["event"] == "model_damaged"
                    and "not a regular file" in e["reason"])


def test_the_quantizer_records_the_source_of_int8(tmp_path: Path) -> None:
    from agent.quantize.int8_bundle import build_int8_bundle

    bundle_dir = quant_voice.build_bundle(tmp_path / "models")
    fp32 = bundle_dir / f"{quant_voice.VOICE}.onnx"
    source_sha = sha256_file(fp32)
    build_int8_bundle(fp32, bundle_dir, calibration=["Welcome aboard the evening service."],
                      heldout=["The ferry leaves at noon."])
    data = read_manifest(bundle_dir)
    assert data["derived"] == {"int8": {"from": "fp32", "file": fp32.name,
                                        "sha256": source_sha}}
    assert choose_variant(data, "int8", auto=False) == VariantChoice("int8")

