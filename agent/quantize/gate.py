"""The int8 quality gate: an int8 model must sound like its fp32 original on held-out sentences.

Both models run on the same held-out inputs with the noise scales at 0 (deterministic), and every
sentence must keep its exact duration and stay within :class:`QualityBounds` of fp32 on both
phase-insensitive measures of :mod:`agent.quantize.quality`. A model that fails is refused with
:class:`QualityGateError`, and nothing is written.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from agent.logs import get_logger
from agent.quantize.errors import QuantizeError
from agent.quantize.quality import mel_distance_db, spectral_snr_db
from agent.quantize.sentences import Feeds

__all__ = [
    "DEFAULT_BOUNDS",
    "QualityBounds",
    "QualityGateError",
    "QualityReport",
    "SentenceQuality",
    "check_quality",
    "gate_models",
    "measure_quality",
]

log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class QualityBounds:
    """What the int8 model must achieve against fp32 on every held-out sentence (noise 0)."""

    min_spectral_snr_db: float = 8.0
    """SNR of the STFT magnitudes (phase-insensitive); a broken model scores near 0 dB."""
    max_mel_distance_db: float = 6.0
    """RMS log-mel difference (dB, floor 80 dB below peak); int8 hiss raises it."""

    def to_json(self) -> dict[str, float]:
        return asdict(self)


DEFAULT_BOUNDS = QualityBounds()


@dataclass(frozen=True, slots=True)
class SentenceQuality:
    """int8 against fp32 for one held-out sentence."""

    text: str
    samples_fp32: int
    samples_int8: int
    spectral_snr_db: float
    mel_distance_db: float

    @property
    def same_duration(self) -> bool:
        return self.samples_fp32 == self.samples_int8


@dataclass(frozen=True, slots=True)
class QualityReport:
    """The quality gate's measurements over the held-out sentences."""

    sentences: tuple[SentenceQuality, ...]

    @property
    def durations_match(self) -> bool:
        return all(s.same_duration for s in self.sentences)

    def _values(self, name: str) -> list[float]:
        return [float(getattr(s, name)) for s in self.sentences if s.same_duration]

    def to_json(self) -> dict[str, Any]:
        snr, mel = self._values("spectral_snr_db"), self._values("mel_distance_db")
        return {
            "sentences": len(self.sentences),
            "durations_match": self.durations_match,
            "spectral_snr_db": {"min": _round(min(snr, default=float("nan"))),
                                "median": _round(float(np.median(snr)) if snr else float("nan"))},
            "mel_distance_db": {"max": _round(max(mel, default=float("nan"))),
                                "median": _round(float(np.median(mel)) if mel else float("nan"))},
        }


def _round(value: float) -> float | None:
    return round(value, 2) if np.isfinite(value) else None


class QualityGateError(QuantizeError):
    """The int8 model is not close enough to fp32; no bundle was written."""

    def __init__(self, message: str, report: QualityReport) -> None:
        super().__init__(message)
        self.report = report


def measure_quality(reference: Callable[[Feeds], np.ndarray],
                    candidate: Callable[[Feeds], np.ndarray],
                    heldout: Sequence[tuple[str, Feeds]], sample_rate: int) -> QualityReport:
    """Run both models on every held-out input and compare their audio.

    ``reference`` / ``candidate`` map model inputs to audio (e.g. a session's first output);
    pass noise scales 0 in the inputs so the comparison is deterministic.
    """
    if not heldout:
        raise QuantizeError("no held-out sentences for the quality gate")
    results = []
    for text, feeds in heldout:
        ref = np.asarray(reference(feeds), dtype=np.float32).reshape(-1)
        out = np.asarray(candidate(feeds), dtype=np.float32).reshape(-1)
        if ref.size == out.size and np.all(np.isfinite(out)):
            results.append(SentenceQuality(text, ref.size, out.size, spectral_snr_db(ref, out),
                                           mel_distance_db(ref, out, sample_rate)))
        else:
            results.append(SentenceQuality(text, ref.size, out.size, float("-inf"), float("inf")))
    return QualityReport(tuple(results))


def check_quality(report: QualityReport, bounds: QualityBounds) -> None:
    """Raise :class:`QualityGateError` unless every sentence is within ``bounds``."""
    problems: list[str] = []
    changed = [s for s in report.sentences if not s.same_duration]
    if changed:
        first = changed[0]
        problems.append(f"durations differ on {len(changed)} sentence(s), e.g. {first.text!r}: "
                        f"{first.samples_int8} samples instead of {first.samples_fp32}")
    same = [s for s in report.sentences if s.same_duration]
    low = [s.spectral_snr_db for s in same if not s.spectral_snr_db >= bounds.min_spectral_snr_db]
    if low:
        problems.append(f"spectral SNR below {bounds.min_spectral_snr_db} dB on {len(low)} "
                        f"sentence(s) (worst {min(low):.1f} dB)")
    far = [s.mel_distance_db for s in same if not s.mel_distance_db <= bounds.max_mel_distance_db]
    if far:
        problems.append(f"mel distance above {bounds.max_mel_distance_db} dB on {len(far)} "
                        f"sentence(s) (worst {max(far):.1f} dB)")
    if problems:
        raise QualityGateError("int8 model rejected: " + "; ".join(problems), report)


def gate_models(fp32: Path, int8: Path, heldout: Sequence[tuple[str, Feeds]], *,
                sample_rate: int, bounds: QualityBounds, threads: int) -> QualityReport:
    """Run both model files on ``threads`` onnxruntime threads, measure, and apply the gate
    (raises :class:`QualityGateError`); the report when the int8 model passed."""
    from agent.hardware.runtime import RuntimeOptions
    from agent.voice.onnx_session import create_session

    runtime = RuntimeOptions(intra_op_threads=threads)
    reference, _ = create_session(fp32, runtime)
    candidate, _ = create_session(int8, runtime)
    report = measure_quality(lambda f: reference.run(None, f)[0],
                             lambda f: candidate.run(None, f)[0], heldout, sample_rate)
    log.info("quality_gate", **{k: v for k, v in report.to_json().items() if k != "sentences"})
    check_quality(report, bounds)
    return report
