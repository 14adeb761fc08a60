"""The persistent phrase cache: keys, round trips, corruption, LRU bound, concurrent writers."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

import numpy as np
import pytest

from agent.audio.format import AudioChunk, AudioFormat
from agent.pipeline.phrase_cache import PhraseCache, cache_key
from agent.voice.voice import SynthesisParams


def chunks(seed: int, n: int = 2, frames: int = 1000) -> list[AudioChunk]:
    rng = np.random.default_rng(seed)
    return [AudioChunk.from_float(rng.uniform(-1, 1, frames), 22050, f"sentence {i}")
            for i in range(n)]


def key(text: str, **params: float) -> str:
    return cache_key(text, "voice", "a" * 64, SynthesisParams(**params))


def test_key_depends_on_everything_that_changes_audio() -> None:
    base = cache_key("Hello.", "v", "a" * 64, SynthesisParams())
    assert base == cache_key("Hello.", "v", "a" * 64, SynthesisParams())
    assert base != cache_key("Hello!", "v", "a" * 64, SynthesisParams())
    assert base != cache_key("Hello.", "w", "a" * 64, SynthesisParams())
    assert base != cache_key("Hello.", "v", "b" * 64, SynthesisParams())  # model swapped
    assert base != cache_key("Hello.", "v", "a" * 64, SynthesisParams(length_scale=1.2))
    assert base != cache_key("Hello.", "v", "a" * 64, SynthesisParams(noise_scale=0.0))
    assert base != cache_key("Hello.", "v", "a" * 64, SynthesisParams(), chunking=(60,))
    assert cache_key("Hello.", "v", "a" * 64, SynthesisParams(), chunking=(60, 40, 8, 400)) != \
        cache_key("Hello.", "v", "a" * 64, SynthesisParams(), chunking=(60,))  # stream windows


def test_round_trip_keeps_chunks_format_and_text(tmp_path: Path) -> None:
    cache = PhraseCache(tmp_path, 10_000_000)
    original = chunks(1)
    assert cache.get(key("x")) is None
    assert cache.put(key("x"), original)
    assert cache.get(key("x")) == original
    again = PhraseCache(tmp_path, 10_000_000).get(key("x"))  # persistent across restarts
    assert again is not None
    assert [c.text for c in again] == ["sentence 0", "sentence 1"]
    assert again[0].format == AudioFormat(22050, 2, 1)
    assert cache.stats()["hits"] == 1 and cache.stats()["misses"] == 1


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage"])
def test_corrupt_entries_are_misses_and_removed(tmp_path: Path, damage: str) -> None:
    cache = PhraseCache(tmp_path, 10_000_000)
    cache.put(key("x"), chunks(2))
    path = next(tmp_path.glob("??/*.pcm"))
    data = bytearray(path.read_bytes())
    if damage == "truncate":
        data = data[: len(data) - 10]
    elif damage == "flip":
        data[-5] ^= 0xFF
    else:
        data = bytearray(b"\x00" * 50)
    path.write_bytes(bytes(data))
    assert cache.get(key("x")) is None
    assert not path.exists()
    assert cache.stats()["corrupt"] == 1


def test_lru_eviction_keeps_the_bound(tmp_path: Path) -> None:
    entry = len(b"".join(c.audio for c in chunks(0))) + 400  # payload + header, roughly
    cache = PhraseCache(tmp_path, int(entry * 3.5))
    for i in range(3):
        cache.put(key(f"p{i}"), chunks(i))
        old = time.time() - 100 + i
        os.utime(next(tmp_path.glob(f"??/{key(f'p{i}')}.pcm")), (old, old))
    assert cache.get(key("p0")) is not None  # p0 becomes the most recently used
    cache.put(key("p3"), chunks(3))
    assert cache.get(key("p1")) is None  # least recently used went first
    assert cache.get(key("p0")) is not None
    assert cache.get(key("p3")) is not None
    stats = cache.stats()
    assert stats["bytes"] <= stats["max_bytes"]
    assert stats["evictions"] == 1


def test_entry_larger_than_bound_is_not_stored(tmp_path: Path) -> None:
    cache = PhraseCache(tmp_path, 1000)
    assert not cache.put(key("big"), chunks(0))
    assert cache.get(key("big")) is None


def test_bad_keys_are_refused(tmp_path: Path) -> None:
    cache = PhraseCache(tmp_path, 1000)
    with pytest.raises(ValueError, match="sha256"):
        cache.get("../../etc/passwd")


def _writer(root: str, seed: int) -> None:
    cache = PhraseCache(Path(root), 50_000_000)
    for _ in range(20):
        cache.put(key("shared"), chunks(seed, n=3, frames=5000))


def test_concurrent_writers_never_expose_partial_entries(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), s)) for s in (1, 2)]
    for proc in procs:
        proc.start()
    reader = PhraseCache(tmp_path, 50_000_000)
    seen = 0
    while any(p.is_alive() for p in procs):
        got = reader.get(key("shared"))
        if got is not None:
            assert got in (chunks(1, n=3, frames=5000), chunks(2, n=3, frames=5000))
            seen += 1
    for proc in procs:
        proc.join()
        assert proc.exitcode == 0
    assert reader.stats()["corrupt"] == 0
    assert not list(tmp_path.glob("??/.put-*"))  # no temporary files left behind
    assert reader.get(key("shared")) is not None


def test_cached_synthesis_serves_repeats_without_the_model(tiny_voice_dir: Path,
                                                           tmp_path: Path) -> None:
    from agent.pipeline.render import cached_synthesis
    from agent.voice.voice import Voice

    voice = Voice.load(tiny_voice_dir)
    cache = PhraseCache(tmp_path / "c", 10_000_000)
    first = list(cached_synthesis(cache, voice, "Mind the gap.  Thank you.", SynthesisParams()))
    calls: list[int] = []
    original = voice.ids_to_audio

    def counting(ids: list[int], params: SynthesisParams) -> np.ndarray:
        calls.append(len(ids))
        return original(ids, params)

    voice.ids_to_audio = counting  # type: ignore[method-assign]
    # same text after normalisation: a hit, no inference
    again = list(cached_synthesis(cache, voice, "Mind the gap. Thank you.", SynthesisParams()))
    assert again == first and calls == []
    # another speed is another phrase
    list(cached_synthesis(cache, voice, "Mind the gap. Thank you.",
                          SynthesisParams(length_scale=1.3)))
    assert calls


def test_abandoned_synthesis_is_not_cached(tiny_voice_dir: Path, tmp_path: Path) -> None:
    from agent.pipeline.render import cached_synthesis
    from agent.voice.voice import Voice

    voice = Voice.load(tiny_voice_dir)
    cache = PhraseCache(tmp_path / "c", 10_000_000)
    chunks = cached_synthesis(cache, voice, "One. Two. Three.", SynthesisParams())
    next(chunks)
    chunks.close()  # e.g. interrupted by an urgent message
    assert cache.stats()["entries"] == 0


def test_model_swap_never_plays_stale_audio(tiny_voice_dir: Path, tmp_path: Path) -> None:
    from agent.pipeline.render import cached_synthesis
    from agent.voice.voice import Voice
    from tests.support import make_tiny_voice

    cache = PhraseCache(tmp_path / "c", 10_000_000)
    old_voice = Voice.load(tiny_voice_dir)
    old = list(cached_synthesis(cache, old_voice, "Hello.", SynthesisParams()))
    make_tiny_voice.build_bundle(tiny_voice_dir.parent, version="2", gain=0.1)
    new_voice = Voice.load(tiny_voice_dir)
    assert new_voice.sha256 != old_voice.sha256
    new = list(cached_synthesis(cache, new_voice, "Hello.", SynthesisParams()))
    assert cache.stats()["hits"] == 0 and cache.stats()["entries"] == 2
    assert [c.frames for c in new] == [c.frames for c in old]  # a miss: synthesized anew


def test_warmer_fills_the_cache_after_a_load(tiny_voice_dir: Path, tmp_path: Path) -> None:
    from agent.pipeline.phrase_warm import PhraseWarmer
    from agent.pipeline.render import cached_synthesis
    from agent.voice.voice import Voice

    voice = Voice.load(tiny_voice_dir)
    cache = PhraseCache(tmp_path / "c", 10_000_000)
    warmer = PhraseWarmer(cache, ["Doors closing.", "Next stop: Central."])
    warmer.start()
    warmer.warm(voice)
    deadline = time.monotonic() + 30
    while cache.stats()["entries"] < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    warmer.stop()
    assert cache.stats()["entries"] == 2
    list(cached_synthesis(cache, voice, "Doors closing.", SynthesisParams()))
    assert cache.stats()["hits"] == 1


def rewrite_config(bundle: Path, version: str, **inference: float) -> None:
    """A config-only update, as an operator pushes one: new inference defaults, new version,
    the model file untouched."""
    import json

    from agent.voice.bundle import read_manifest, write_manifest

    manifest = read_manifest(bundle)
    config_path = bundle / manifest["config"]
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["inference"].update(inference)
    config_path.write_text(json.dumps(config, ensure_ascii=False), encoding="utf-8")
    write_manifest(bundle, voice=manifest["voice"], version=version,
                   sample_rate=manifest["sample_rate"], variants=manifest["variants"],
                   config=manifest["config"], source=manifest["source"])


def test_config_only_update_is_another_phrase(tiny_voice_dir: Path, tmp_path: Path) -> None:
    """#15-6: the model file is the same, the config's default length_scale is not: the cached
    phrase of the old config must not be served for the new one."""
    from agent.pipeline.render import cached_synthesis
    from agent.voice.voice import Voice

    cache = PhraseCache(tmp_path / "c", 10_000_000)
    old_voice = Voice.load(tiny_voice_dir)
    list(cached_synthesis(cache, old_voice, "Hello.", SynthesisParams()))
    rewrite_config(tiny_voice_dir, "2.0.0", length_scale=2.0)
    new_voice = Voice.load(tiny_voice_dir)
    assert new_voice.sha256 == old_voice.sha256  # only the config changed
    assert new_voice.config.length_scale == 2.0
    new = list(cached_synthesis(cache, new_voice, "Hello.", SynthesisParams()))
    assert cache.stats()["hits"] == 0 and cache.stats()["entries"] == 2
    assert new == list(new_voice.synthesize("Hello.", SynthesisParams()))
    list(cached_synthesis(cache, new_voice, "Hello.", SynthesisParams()))
    assert cache.stats()["hits"] == 1  # and the new entry is served from then on


def test_sentence_silence_and_variant_are_part_of_the_key(tiny_voice_dir: Path,
                                                          tmp_path: Path) -> None:
    """The silence appended to each sentence is in the cached audio: another setting is
    another phrase. So is another variant of the same model bytes."""
    from agent.pipeline.render import cached_synthesis
    from agent.voice.bundle import read_manifest, write_manifest
    from agent.voice.options import VoiceOptions
    from agent.voice.voice import Voice

    cache = PhraseCache(tmp_path / "c", 10_000_000)
    plain = Voice.load(tiny_voice_dir)
    list(cached_synthesis(cache, plain, "Hello.", SynthesisParams()))
    padded = Voice.load(tiny_voice_dir, VoiceOptions(sentence_silence_s=0.2))
    chunks_padded = list(cached_synthesis(cache, padded, "Hello.", SynthesisParams()))
    assert cache.stats()["hits"] == 0
    assert chunks_padded == list(padded.synthesize("Hello.", SynthesisParams()))
    manifest = read_manifest(tiny_voice_dir)
    model = manifest["variants"]["fp32"]
    write_manifest(tiny_voice_dir, voice=manifest["voice"], version="1.0.0",
                   sample_rate=manifest["sample_rate"], variants={"fp32": model, "int8": model},
                   config=manifest["config"], source="test")
    other = Voice.load(tiny_voice_dir, VoiceOptions(variant="int8"))
    list(cached_synthesis(cache, other, "Hello.", SynthesisParams()))
    assert cache.stats()["hits"] == 0 and cache.stats()["entries"] == 3
