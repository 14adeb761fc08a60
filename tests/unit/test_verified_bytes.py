"""What onnxruntime loads is the model that was verified (#27 item 1).

A process that can write a voice's model rewrites it in place (``os.pwrite``: same inode, same
size, no rename) at every point of a load: once its bytes were hashed, before onnxruntime builds
the session, before the switchable graph is made, before the optimised-model cache stores the
result. The voice serves the verified model's audio every time, and so does the cache entry
the load stored. A cache entry not built from verified bytes (no record, as an older agent
stored one; or its files changed since) is detected and rebuilt. The hooks are wiring only:
each calls through to the real function and only rewrites the file around it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import onnxruntime
import pytest

import agent.voice.bundle as bundle_module
from agent.hardware.runtime import RuntimeOptions
from agent.logs import configure_logging
from agent.voice import onnx_session, sessions
from agent.voice.bundle import read_bundle
from agent.voice.onnx_session import create_session
from agent.voice.options import VoiceOptions
from agent.voice.voice import SynthesisParams, Voice
from tests.support import make_tiny_voice, quant_voice

QUIET = SynthesisParams(noise_scale=0.0, noise_w=0.0)
PHRASE = "Tickets are sold at the green machines near the main entrance."


class Rewriter:
    """Rewrites ``model`` in place with ``rogue``'s bytes (same size), and back."""

    def __init__(self, model: Path, rogue: Path) -> None:
        self.model, self.good, self.bad = model, model.read_bytes(), rogue.read_bytes()
        assert len(self.good) == len(self.bad) and self.good != self.bad
        self.done = 0

    def _write(self, data: bytes) -> None:
        fd = os.open(self.model, os.O_WRONLY)
        try:
            assert os.pwrite(fd, data, 0) == len(data)
        finally:
            os.close(fd)

    def tamper(self) -> None:
        self._write(self.bad)
        self.done += 1

    def restore(self) -> None:
        self._write(self.good)


def after(target: Callable[..., Any], rewriter: Rewriter) -> Callable[..., Any]:
    def hooked(*args: Any, **kwargs: Any) -> Any:
        result = target(*args, **kwargs)
        rewriter.tamper()
        return result
    return hooked


def before(target: Callable[..., Any], rewriter: Rewriter) -> Callable[..., Any]:
    def hooked(*args: Any, **kwargs: Any) -> Any:
        rewriter.tamper()
        return target(*args, **kwargs)
    return hooked


POINTS: dict[str, Callable[[pytest.MonkeyPatch, Rewriter], None]] = {
    # once the model's bytes were hashed and scanned
    "after the hash": lambda mp, rw: mp.setattr(bundle_module, "scan_model",
                                                after(bundle_module.scan_model, rw)),
    # just before onnxruntime builds a session (any session: the first one is the model's)
    "before the session": lambda mp, rw: mp.setattr(
        onnxruntime, "InferenceSession", before(onnxruntime.InferenceSession, rw)),
    "before the split graph": lambda mp, rw: mp.setattr(sessions, "split_model",
                                                        before(sessions.split_model, rw)),
    "before the cache store": lambda mp, rw: mp.setattr(
        onnx_session, "_publish_cached", before(onnx_session._publish_cached, rw)),
}


def audio(voice: Voice) -> list[bytes]:
    return [chunk.audio for chunk in voice.synthesize(PHRASE, QUIET)]


@pytest.fixture(params=["tiny", "streaming"])
def case(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Path, Path, bool]]:
    """(bundle, a rogue model of the same size, whether the voice streams): the tiny voice
    loads whole (its split refused), the convolutional one through the switchable graph."""
    if request.param == "tiny":
        bundle = make_tiny_voice.build_bundle(tmp_path / "models")
        rogue = tmp_path / "rogue.onnx"
        make_tiny_voice.build_model(rogue, gain=0.05)
        yield bundle, rogue, False
    else:
        bundle = quant_voice.build_bundle(tmp_path / "models")
        rogue = tmp_path / "rogue.onnx"
        quant_voice.build_model(rogue, seed=8)
        yield bundle, rogue, True


def options(cache: Path, streams: bool) -> VoiceOptions:
    """Streaming asked for either way: the tiny voice is no VITS graph, so its split is tried,
    refused, and the whole graph loads (from the same bytes)."""
    del streams
    return VoiceOptions(runtime=RuntimeOptions(optimized_cache_dir=cache),
                        stream_first_frames=1, stream_growth=2)


def model_of(bundle: Path) -> Path:
    return next(p for p in bundle.glob("*.onnx"))


@pytest.mark.parametrize("point", list(POINTS))
def test_a_model_rewritten_in_place_during_the_load_serves_the_verified_audio(
        case: tuple[Path, Path, bool], point: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    bundle, rogue, streams = case
    reference = Voice.load(bundle, options(tmp_path / "untouched", streams))
    expected = audio(reference)
    rewriter = Rewriter(model_of(bundle), rogue)
    cache = tmp_path / "ort"
    with monkeypatch.context() as mp:
        POINTS[point](mp, rewriter)
        voice = Voice.load(bundle, options(cache, streams))
    assert rewriter.done, f"the load never reached {point}"
    assert voice.streaming is not None if streams else voice.streaming is None
    assert audio(voice) == expected, f"the model rewritten {point} is what serves"
    assert voice.sha256 == reference.sha256
    # The file put back byte for byte: the entry the load stored serves the verified model.
    rewriter.restore()
    again = Voice.load(bundle, options(cache, streams))
    assert again.engine.cache == "hit"
    assert audio(again) == expected, f"the cache stored the model rewritten {point}"


def poison(bundle: Path, rogue: Path, cache: Path, streams: bool) -> None:
    """Fill the cache under the verified model's sha256 with the rogue model's graph, as an
    agent before #27 did when the file was rewritten during its load."""
    rewriter = Rewriter(model_of(bundle), rogue)
    rewriter.tamper()
    try:
        sha = read_bundle(bundle).sha256[model_of(bundle).name]
        if streams:
            part = sessions.CACHE_PART
            create_session(model_of(bundle), options(cache, True).runtime, sha, part=part,
                           graph=lambda: sessions.split_model(model_of(bundle),
                                                              sessions._measure))
        else:
            create_session(model_of(bundle), options(cache, False).runtime, sha)
    finally:
        rewriter.restore()


def assert_rebuilt(bundle: Path, cache: Path, streams: bool, expected: list[bytes],
                   capsys: pytest.CaptureFixture[str], *, logged: str) -> None:
    """The next load logs ``logged``, stores a fresh cache entry and speaks as the verified
    model does; so does the load after it, from that entry."""
    configure_logging("info", "json")
    capsys.readouterr()
    voice = Voice.load(bundle, options(cache, streams))
    assert logged in capsys.readouterr().err
    assert voice.engine.cache == "stored"
    assert audio(voice) == expected
    assert audio(Voice.load(bundle, options(cache, streams))) == expected


def test_a_cache_entry_without_a_record_is_rebuilt_from_the_verified_model(
        case: tuple[Path, Path, bool], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    bundle, rogue, streams = case
    expected = audio(Voice.load(bundle, options(tmp_path / "untouched", streams)))
    cache = tmp_path / "ort"
    poison(bundle, rogue, cache, streams)
    for record in cache.glob("*.sha256"):
        record.unlink()  # entries of agents before #27 have none
    assert_rebuilt(bundle, cache, streams, expected, capsys, logged="onnx_optimized_cache_bad")


@pytest.mark.parametrize("which", ["graph", "data"])
def test_a_cache_entry_rewritten_after_it_was_recorded_is_rebuilt(
        case: tuple[Path, Path, bool], which: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    bundle, rogue, streams = case
    cache = tmp_path / "ort"
    expected = audio(Voice.load(bundle, options(cache, streams)))
    # The rogue model's entry, same key layout elsewhere: its bytes are what an attacker has.
    other = tmp_path / "other"
    poison(bundle, rogue, other, streams)
    suffix = ".onnx" if which == "graph" else ".data"
    (target,), (source,) = list(cache.glob(f"*{suffix}")), list(other.glob(f"*{suffix}"))
    bad = source.read_bytes()
    if which == "graph":  # the rogue graph names the rogue data file: give it ours
        ours, theirs = next(cache.glob("*.data")).name, next(other.glob("*.data")).name
        bad = bad.replace(theirs.encode(), ours.encode())
        shutil.copyfile(next(other.glob("*.data")), next(cache.glob("*.data")))
    else:
        bad = bad[:target.stat().st_size].ljust(target.stat().st_size, b"\0")
    with open(target, "r+b") as handle:  # in place: the same file, as the record names it
        handle.write(bad)
        handle.truncate()
    assert_rebuilt(bundle, cache, streams, expected, capsys,
                   logged="sha256 differs from the record")
