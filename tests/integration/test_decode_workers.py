"""Decoder windows of one sentence decoded at once (``decode_workers``): the same audio, in order,
decoded on the voice's decoder threads (the profile's choice: tests/unit/test_hardware_session.py).

Runs on the real en_US-joe-medium int8 voice, whose sentences are decoded in several windows.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from agent.hardware.runtime import RuntimeOptions
from agent.voice.options import VoiceOptions
from agent.voice.voice import SynthesisParams, Voice

QUIET = SynthesisParams(noise_scale=0.0, noise_w=0.0)
TEXT = ("The westbound train to the airport is running about eight minutes late this morning, "
        "and passengers are asked to wait on platform two. The next service departs at nine.")


def load(voice_dir: Path, cache: Path, workers: int) -> Voice:
    runtime = RuntimeOptions(intra_op_threads=2, decode_workers=workers,
                             allow_spinning=workers == 1, optimized_cache_dir=cache)
    # Growth fixed: automatic growth follows each load's warm-up timing, so two loads could cut
    # the sentence into different windows.
    return Voice.load(voice_dir, VoiceOptions(variant="int8", runtime=runtime, stream_growth=2))


def decoding_threads(voice: Voice) -> list[str]:
    """Names of the threads each window of ``voice`` is decoded on, from now on."""
    names: list[str] = []
    decode = voice._decode

    def recorded(*args, **kwargs):  # type: ignore[no-untyped-def]
        names.append(threading.current_thread().name)
        return decode(*args, **kwargs)

    voice._decode = recorded  # type: ignore[method-assign]
    return names


def test_windows_decoded_at_once_give_the_same_audio(real_voice_dir: Path,
                                                      tmp_path: Path) -> None:
    one = load(real_voice_dir, tmp_path / "ort", 1)
    two = load(real_voice_dir, tmp_path / "ort", 2)
    threads = decoding_threads(two)
    alone = [c.samples() for c in one.synthesize(TEXT, QUIET)]
    together = [c.samples() for c in two.synthesize(TEXT, QUIET)]
    assert len(together) == len(alone) > 3  # the first sentence streams in several windows
    for a, b in zip(alone, together, strict=True):
        np.testing.assert_array_equal(a, b)
    whole_one = one.ids_to_audio(one.frontend.ids(one.sentences(TEXT)[1]), QUIET)
    whole_two = two.ids_to_audio(two.frontend.ids(two.sentences(TEXT)[1]), QUIET)
    np.testing.assert_array_equal(whole_one, whole_two)
    # The first window is decoded on the caller's thread (first audio); the rest on the
    # voice's decoder threads.
    assert threads[0] == threading.current_thread().name
    assert sum(name.startswith("decode") for name in threads) >= len(threads) - 2
    assert len({name for name in threads if name.startswith("decode")}) == 2


def test_one_worker_decodes_on_the_callers_thread(real_voice_dir: Path, tmp_path: Path) -> None:
    voice = load(real_voice_dir, tmp_path / "ort", 1)
    threads = decoding_threads(voice)
    list(voice.synthesize(TEXT, QUIET))
    assert len(threads) > 3
    assert set(threads) == {threading.current_thread().name}
