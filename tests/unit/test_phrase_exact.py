"""The phrase cache's exact-request index (agent.pipeline.request_key, PhraseCache.get_exact):
a repeat is served without any text work, identically; every change of what shapes the audio
(the lexicon swapped, the normalizer's settings, the model, espeak-ng, the text code) makes the
old records unreachable; a damaged record is a miss; the records share the cache's bound."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agent.audio.format import AudioChunk
from agent.library.lexicon import LexiconHolder
from agent.pipeline import request_key as request_key_module
from agent.pipeline.jobs import SpeakRequest
from agent.pipeline.phrase_cache import REF_CHARGE, REF_MAGIC, PhraseCache, _ref_check, cache_key
from agent.pipeline.render import Rendered, render
from agent.text import espeak
from agent.text.document import plain
from agent.voice.options import TextOptions, VoiceOptions
from agent.voice.voice import SynthesisParams, Voice
from tests.support import make_tiny_voice

QUIET = SynthesisParams(noise_scale=0.0, noise_w=0.0)
TEXT = "Please welcome Nguyen on 3/12/2024."
LEXICON = 'version = 1\n\n[words]\n"Nguyen" = "{}"\n'


class Voices:
    def __init__(self, voice: Voice) -> None:
        self.voice = voice

    def get(self, name: str | None = None) -> Voice:
        return self.voice


def say(cache: PhraseCache, voice: Voice, text: str = TEXT) -> tuple[Rendered, bytes]:
    rendered = render(plain(text), Voices(voice), SpeakRequest(text, params=QUIET), cache=cache)
    return rendered, b"".join(c.audio for c in rendered.chunks)


def load(bundle: Path, **text: Any) -> Voice:
    return Voice.load(bundle, VoiceOptions(text=TextOptions(**text)))


def chunks(seed: int) -> list[AudioChunk]:
    rng = np.random.default_rng(seed)
    return [AudioChunk.from_float(rng.uniform(-1, 1, 1000), 22050, "s")]


def key(name: str) -> str:
    return cache_key(name, "voice", "a" * 64, SynthesisParams())


def test_a_repeat_is_served_identically_without_any_text_work(
        tiny_voice_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    voice = load(tiny_voice_dir)
    cache = PhraseCache(tmp_path / "phrases", 50_000_000)
    first, audio = say(cache, voice)
    assert not first.cached and cache.stats()["exact_entries"] == 1

    def no_text_work(*args: object, **kwargs: object) -> None:
        raise AssertionError("a repeat was phonemized")

    monkeypatch.setattr(voice.frontend, "sentences", no_text_work)
    again, same = say(cache, voice)
    assert again.cached and same == audio
    restarted = PhraseCache(tmp_path / "phrases", 50_000_000)  # the index is on disk
    assert say(restarted, voice)[1] == audio
    stats = restarted.stats()
    assert stats["exact_hits"] == stats["hits"] == 1 and stats["misses"] == 0
    assert stats["entries"] == stats["exact_entries"] == 1
    monkeypatch.undo()
    # another spelling of the same words: found by its phonemes, then recorded too
    spaced = TEXT.replace(" ", "  ")
    hit, spaced_audio = say(restarted, voice, spaced)
    assert hit.cached and spaced_audio == audio and restarted.stats()["exact_hits"] == 1
    assert restarted.stats()["exact_entries"] == 2 and restarted.stats()["entries"] == 1
    bypassed = PhraseCache(tmp_path / "phrases", 50_000_000, exact_index=False)
    assert say(bypassed, voice)[0].cached and bypassed.stats()["exact_hits"] == 0


def test_no_change_of_what_shapes_the_audio_serves_an_old_record(
        tiny_voice_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lexicon = tmp_path / "lexicon.toml"
    lexicon.write_text(LEXICON.format("win"), encoding="utf-8")
    holder = LexiconHolder(lexicon)
    assert holder.reload() == "loaded"
    voice = load(tiny_voice_dir, lexicon=holder)
    cache = PhraseCache(tmp_path / "phrases", 50_000_000)
    heard = {say(cache, voice)[1]}

    def fresh(voice: Voice) -> None:
        """The same text now is not the audio of any earlier state, nor a hit of any."""
        exact_hits = cache.stats()["exact_hits"]
        rendered, audio = say(cache, voice)
        assert not rendered.cached and audio not in heard
        assert cache.stats()["exact_hits"] == exact_hits
        heard.add(audio)
        assert say(cache, voice)[0].cached  # and the new state is recorded in turn
        assert cache.stats()["exact_hits"] == exact_hits + 1

    lexicon.write_text(LEXICON.format("nuh win"), encoding="utf-8")  # swapped while running
    assert holder.reload() == "loaded"
    fresh(voice)
    fresh(load(tiny_voice_dir, lexicon=holder, date_order="dmy"))  # the normalizer's setting
    swapped = make_tiny_voice.build_bundle(tmp_path, gain=0.8, bundle=tmp_path / "v2")
    fresh(load(swapped, lexicon=holder))  # another model, same name and version
    # espeak-ng or the text code otherwise: the old records are out of reach (the phonemes are
    # the same here, so the entry itself is found by them)
    for module, name in ((espeak, "_identity"), (request_key_module, "_code")):
        hits = cache.stats()["exact_hits"]
        monkeypatch.setattr(module, name, ["another"])
        assert say(cache, voice)[0].cached and cache.stats()["exact_hits"] == hits
        monkeypatch.undo()


def test_a_lexicon_swapped_during_phonemizing_is_not_recorded(tiny_voice_dir: Path,
                                                              tmp_path: Path) -> None:
    class Swapping:
        """A lexicon swapped (another key) while a text is being rewritten."""

        key = "lexicon/one"

        def rewrite(self, text: str) -> list[str]:
            if "Nguyen" in text:  # not the voice's warm-up
                self.key = "lexicon/two"
            return [text]

    voice = load(tiny_voice_dir, lexicon=Swapping())
    cache = PhraseCache(tmp_path / "phrases", 50_000_000)
    say(cache, voice)
    assert cache.stats()["entries"] == 1 and cache.stats()["exact_entries"] == 0


@pytest.mark.parametrize("damage", ["truncate", "garbage", "renamed", "other-entry", "no-key",
                                    "gone"])
def test_a_damaged_record_is_a_miss(tmp_path: Path, damage: str) -> None:
    cache = PhraseCache(tmp_path, 10_000_000)
    cache.put(key("a"), chunks(1))
    cache.put(key("b"), chunks(2))
    exact, other = key("exact"), key("other")
    cache.put_exact(exact, key("a"))
    assert cache.get_exact(exact) == chunks(1)
    ref = next(tmp_path.glob("??/*.ref"))
    data = ref.read_bytes()
    if damage == "truncate":
        ref.write_bytes(data[:-10])
    elif damage == "garbage":
        ref.write_bytes(os.urandom(len(data)))
    elif damage == "renamed":  # a valid record under another request's name
        cache.put_exact(other, key("b"))
        ref.write_bytes(next(tmp_path.glob(f"??/{other}.ref")).read_bytes())
    elif damage == "other-entry":  # the entry's key changed inside the record
        ref.write_bytes(data.replace(key("a").encode(), key("b").encode()))
    elif damage == "no-key":  # checks out, but names no entry a key can have
        ref.write_bytes(REF_MAGIC + f"../x {_ref_check(exact, '../x')}\n".encode())
    else:
        next(tmp_path.glob(f"??/{key('a')}.pcm")).unlink()
    assert cache.get_exact(exact) is None
    stats = cache.stats()
    assert stats["hits"] == 1 and stats["misses"] == 0  # the caller's full lookup counts
    assert stats["corrupt"] == (0 if damage == "gone" else 1)
    assert ref.exists() == (damage == "gone")  # a damaged record is removed


def test_records_share_the_bound_and_are_evicted_oldest_first(tmp_path: Path) -> None:
    PhraseCache(tmp_path, 10_000_000).put(key("a"), chunks(0))
    size = next(tmp_path.glob("??/*.pcm")).stat().st_size
    cache = PhraseCache(tmp_path, size + 3 * REF_CHARGE)
    for i in range(3):
        cache.put_exact(key(f"x{i}"), key("a"))
        old = time.time() - 100 + i
        os.utime(next(tmp_path.glob(f"??/{key(f'x{i}')}.ref")), (old, old))
    assert cache.stats()["exact_entries"] == 3
    assert cache.get_exact(key("x0")) is not None  # x0 is now the most recently used
    cache.put_exact(key("x3"), key("a"))
    stats = cache.stats()
    assert stats["bytes"] <= stats["max_bytes"] and stats["exact_entries"] == 3
    assert cache.get_exact(key("x1")) is None and cache.get_exact(key("x0")) is not None
    assert stats["evictions"] == 0  # records are not utterances
    assert PhraseCache(tmp_path, size + 3 * REF_CHARGE).stats()["bytes"] == stats["bytes"]
