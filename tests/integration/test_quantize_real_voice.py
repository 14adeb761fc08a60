"""int8 quantization of the real en_US-joe-medium voice (prepared by build.sh): the gate holds on
real weights. The recipe's pieces are tested on a tiny voice in tests/unit/test_quantize.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.quantize.gate import DEFAULT_BOUNDS
from agent.quantize.int8_bundle import build_int8_bundle
from agent.quantize.sentences import packaged_corpus, read_sentences


@pytest.mark.slow
@pytest.mark.voice
def test_real_voice_int8_keeps_durations_and_quality(real_voice_dir: Path,
                                                      tmp_path: Path) -> None:
    calibration = read_sentences(packaged_corpus("calibration"))[:8]
    heldout = read_sentences(packaged_corpus("heldout"))[:4]
    model = real_voice_dir / "en_US-joe-medium.onnx"
    bundle, report = build_int8_bundle(model, tmp_path / "en_US-joe-medium",
                                       calibration=calibration, heldout=heldout)
    assert report.durations_match
    for sentence in report.sentences:
        assert sentence.samples_int8 == sentence.samples_fp32
        assert sentence.spectral_snr_db >= DEFAULT_BOUNDS.min_spectral_snr_db
        assert sentence.mel_distance_db <= DEFAULT_BOUNDS.max_mel_distance_db
    assert bundle.model_path("int8").stat().st_size < 0.7 * bundle.model_path("fp32").stat().st_size
