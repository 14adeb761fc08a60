"""A voice load from the start-up cache holds no copy of the model (#26 item 4).

The model file is hashed as it streams past on a helper thread; only a cache miss reads it into
memory. A hit still refuses a model that no longer matches its manifest, and the model's facts
come from the switchable graph's record, made from verified bytes, never from a claim in the
model's own metadata.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import onnx
import onnxruntime
import pytest

import agent.voice.bundle as bundle_module
from agent.hardware.runtime import RuntimeOptions
from agent.voice import model_source, sessions
from agent.voice.bundle import write_manifest
from agent.voice.config import VoiceLoadError
from agent.voice.files import HashingReader, UnsafeFileError
from agent.voice.graph_scan import ModelFacts, scan_model
from agent.voice.options import VoiceOptions
from agent.voice.voice import Voice
from tests.support import make_tiny_voice, quant_voice


def options(cache: Path, *, stream: bool = True) -> VoiceOptions:
    """Streaming on (a switchable graph where the voice is a Piper graph) or off (whole)."""
    return VoiceOptions(runtime=RuntimeOptions(optimized_cache_dir=cache),
                        stream_first_frames=1 if stream else 0, stream_growth=2)


def spy(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[int]:
    """Count calls of ``module.name``, each calling through to the real function."""
    calls: list[int] = []
    real: Callable[..., Any] = getattr(module, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)
    monkeypatch.setattr(module, name, counted)
    return calls


def model_of(bundle: Path) -> Path:
    return next(bundle.glob("*.onnx"))


@pytest.mark.parametrize("kind", ["tiny", "streaming"])
def test_a_cache_hit_reads_no_copy_of_the_model(kind: str, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    build = make_tiny_voice.build_bundle if kind == "tiny" else quant_voice.build_bundle
    bundle, cache = build(tmp_path / "models"), tmp_path / "ort"
    reads = spy(monkeypatch, model_source, "read_model")
    scans = spy(monkeypatch, bundle_module, "scan_model")
    # The tiny voice is no Piper graph: streaming off, it loads whole without trying a split
    # (a split tried reads the model to look for its anchors, at every load).
    chosen = options(cache, stream=kind == "streaming")
    first = Voice.load(bundle, chosen)
    assert first.engine.cache == "stored" and len(reads) == 1
    reads.clear()
    scans.clear()
    again = Voice.load(bundle, chosen)
    assert again.engine.cache == "hit"
    assert reads == [], "a cache hit read the model into memory"
    data = model_of(bundle).read_bytes()
    assert again.facts == scan_model(io.BytesIO(data), len(data)) == first.facts
    if kind == "streaming":  # the facts came from the switchable graph's record
        assert again.engine.facts == first.facts and scans == []
    else:  # a whole graph records none: scanned in the streamed pass
        assert again.engine.facts is None and scans == [1]
    assert [c.audio for c in again.synthesize("Hello there.")] == \
        [c.audio for c in first.synthesize("Hello there.")]


@pytest.mark.parametrize("kind", ["tiny", "streaming"])
def test_a_cache_hit_still_refuses_a_model_that_no_longer_matches(kind: str,
                                                                 tmp_path: Path) -> None:
    build = make_tiny_voice.build_bundle if kind == "tiny" else quant_voice.build_bundle
    bundle, cache = build(tmp_path / "models"), tmp_path / "ort"
    Voice.load(bundle, options(cache))
    model = model_of(bundle)
    data = bytearray(model.read_bytes())
    data[-1] ^= 0xFF  # same size, one byte off: the cache entry still matches its key
    model.write_bytes(bytes(data))
    with pytest.raises(VoiceLoadError, match="sha256 does not match the manifest"):
        Voice.load(bundle, options(cache))


def test_a_model_cannot_claim_its_own_facts_or_window_padding(tmp_path: Path) -> None:
    bundle, cache = quant_voice.build_bundle(tmp_path / "models"), tmp_path / "ort"
    model = model_of(bundle)
    graph = onnx.load(str(model))
    claims = {sessions.FACTS_KEY: json.dumps({"symbols": 9, "predicts_durations": False}),
              sessions.PAD_KEY: "0", "agent.other": "x", "author": "kept"}
    for key, value in claims.items():
        graph.metadata_props.add(key=key, value=value)
    onnx.save(graph, str(model))
    write_manifest(bundle, voice=quant_voice.VOICE, version="2.0.0",
                   sample_rate=quant_voice.SAMPLE_RATE, variants={"fp32": model.name},
                   config=f"{quant_voice.VOICE}.onnx.json", source="tests")
    data = model.read_bytes()
    scanned = scan_model(io.BytesIO(data), len(data))
    for _ in range(2):  # built, then from the cache
        voice = Voice.load(bundle, options(cache))
        assert voice.engine.facts == voice.facts == scanned
        assert voice.engine.pad != 0
        meta = voice.session.get_modelmeta().custom_metadata_map
        assert meta["author"] == "kept" and "agent.other" not in meta


@pytest.mark.parametrize("text", ['{"symbols": 0, "predicts_durations": true}',
                                  '{"symbols": "256", "predicts_durations": true}',
                                  '{"symbols": 256, "predicts_durations": 1}',
                                  '[256, true]', "not json", None])
def test_a_recorded_fact_not_in_its_form_is_no_fact(text: str | None) -> None:
    assert sessions._recorded_facts(text) is None


def test_recorded_facts_read_back() -> None:
    facts = ModelFacts(256, predicts_durations=True)
    assert sessions._recorded_facts(sessions._facts_text(facts)) == facts
    none = ModelFacts(None, predicts_durations=False)
    assert sessions._recorded_facts(sessions._facts_text(none)) == none


def test_the_hashing_reader_hashes_every_byte_once_read_or_skipped(tmp_path: Path) -> None:
    data = os.urandom(3 * 65536 + 17)
    path = tmp_path / "blob"
    path.write_bytes(data)
    with path.open("rb") as handle:
        reader = HashingReader(path, handle, len(data))
        assert reader.read(5) == data[:5]
        assert reader.seek(70000, 1) == 70005  # skipped, hashed
        assert reader.read(3) == data[70005:70008]
        with pytest.raises(OSError, match="only forward"):
            reader.seek(10)
        assert reader.finish() == hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("size_error", [-1, 1])
def test_the_hashing_reader_refuses_a_file_of_another_size(size_error: int,
                                                          tmp_path: Path) -> None:
    path = tmp_path / "blob"
    path.write_bytes(b"x" * 1000)
    with path.open("rb") as handle, pytest.raises(UnsafeFileError, match=r"1000 bytes|longer"):
        HashingReader(path, handle, 1000 - size_error).finish()


def test_a_scan_through_the_hashing_reader_sees_the_hashed_bytes(tmp_path: Path) -> None:
    bundle = quant_voice.build_bundle(tmp_path / "models")
    model = model_of(bundle)
    data = model.read_bytes()
    with model.open("rb") as handle:
        reader = HashingReader(model, handle, len(data))
        facts = scan_model(reader, len(data))
        assert reader.finish() == hashlib.sha256(data).hexdigest()
    assert facts == scan_model(io.BytesIO(data), len(data))
    assert onnxruntime.InferenceSession(data).get_inputs()  # the bytes are a real model
