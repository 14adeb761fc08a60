"""The optimised-model cache: stored on first load, used after, rebuilt when damaged,
and the audio is the same either way."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from agent.hardware.runtime import RuntimeOptions
from agent.logs import configure_logging
from agent.voice.bundle import verify_bundle
from agent.voice.onnx_session import create_session


def run(session: object, n: int = 12) -> np.ndarray:
    ids = np.arange(1, n + 1, dtype=np.int64)[None, :]
    feeds = {"input": ids, "input_lengths": np.array([n], dtype=np.int64),
             "scales": np.array([0.0, 1.0, 0.0], dtype=np.float32)}
    return np.asarray(session.run(None, feeds)[0])  # type: ignore[attr-defined]


def load(bundle_dir: Path, cache: Path | None) -> tuple[object, str]:
    bundle = verify_bundle(bundle_dir)
    model = bundle.model_path("fp32")
    session, _ = create_session(model, RuntimeOptions(optimized_cache_dir=cache),
                                model_sha256=bundle.sha256[model.name])
    return session, model.name


def test_first_load_stores_later_loads_use_it(tiny_voice_dir: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("info", "json")
    cache = tmp_path / "ort"
    plain, _ = load(tiny_voice_dir, None)
    first, _ = load(tiny_voice_dir, cache)
    files = list(cache.glob("*.onnx"))
    assert len(files) == 1
    assert "onnx_optimized_cache_stored" in capsys.readouterr().err
    second, _ = load(tiny_voice_dir, cache)
    assert "onnx_optimized_cache_hit" in capsys.readouterr().err
    np.testing.assert_array_equal(run(plain), run(second))
    np.testing.assert_array_equal(run(first), run(second))
    assert not list(cache.glob(".*"))  # no temporary files left


def test_damaged_cache_file_is_rebuilt(tiny_voice_dir: Path, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("info", "json")
    cache = tmp_path / "ort"
    load(tiny_voice_dir, cache)
    cached = next(cache.glob("*.onnx"))
    cached.write_bytes(b"truncated")
    session, _ = load(tiny_voice_dir, cache)
    err = capsys.readouterr().err
    assert "onnx_optimized_cache_bad" in err and "onnx_optimized_cache_stored" in err
    assert cached.stat().st_size > 100
    assert run(session).size > 0


def test_another_model_gets_another_entry(tiny_voice_dir: Path, tmp_path: Path) -> None:
    from tests.support import make_tiny_voice

    cache = tmp_path / "ort"
    load(tiny_voice_dir, cache)
    make_tiny_voice.build_bundle(tiny_voice_dir.parent, version="2", gain=0.2)
    load(tiny_voice_dir, cache)
    assert len(list(cache.glob("*.onnx"))) == 2


@pytest.mark.voice
def test_real_voice_sounds_the_same_from_the_cache(real_voice_dir: Path, tmp_path: Path) -> None:
    from agent.library.voices import VoiceLibrary
    from agent.settings import Settings
    from agent.voice.voice import SynthesisParams

    settings = Settings(models={"dir": real_voice_dir.parent}, cache={"dir": tmp_path})
    params = SynthesisParams(noise_scale=0.0, noise_w=0.0)
    audio = []
    for _ in range(2):  # the first load stores the optimised graph, the second uses it
        voice = VoiceLibrary(settings).get()
        audio.append(b"".join(c.audio for c in voice.synthesize("Mind the gap.", params)))
    assert list((tmp_path / "ort").glob("*.onnx"))
    assert audio[0] == audio[1]


def test_weights_live_in_a_data_file_of_the_entrys_own(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from tests.support import quant_voice

    configure_logging("info", "json")
    bundle_dir = quant_voice.build_bundle(tmp_path / "models")
    cache = tmp_path / "ort"
    plain, _ = load(bundle_dir, None)
    load(bundle_dir, cache)
    (graph,), (data,) = list(cache.glob("*.onnx")), list(cache.glob("*.data"))
    assert data.name.startswith(f"{graph.stem}-") and data.stat().st_size > graph.stat().st_size
    cached, _ = load(bundle_dir, cache)
    assert "onnx_optimized_cache_hit" in capsys.readouterr().err
    feeds = {"input": np.asarray([[1, 5, 9, 2]], np.int64),
             "input_lengths": np.asarray([4], np.int64),
             "scales": np.asarray([0.0, 1.0, 0.0], np.float32)}
    np.testing.assert_array_equal(cached.run(None, feeds)[0], plain.run(None, feeds)[0])
    # Its weights gone: the entry is rebuilt whole, under a data file of its own.
    data.unlink()
    stale = cache / f"{graph.stem}-1-deadbeef.data"  # left by an older write
    stale.write_bytes(b"old")
    rebuilt, _ = load(bundle_dir, cache)
    assert "onnx_optimized_cache_bad" in capsys.readouterr().err
    np.testing.assert_array_equal(rebuilt.run(None, feeds)[0], plain.run(None, feeds)[0])
    (new_data,) = list(cache.glob("*.data"))
    assert new_data.name != data.name and not stale.exists()
    assert not list(cache.glob(".*"))  # no temporary files left
