"""``tts-agent quantize``: a voice bundle with a quality-gated int8 variant next to fp32.

:func:`build_int8_bundle` calibrates on phoneme ids the voice's own frontend makes of the
calibration sentences (:mod:`agent.quantize.sentences`), quantizes with a
:class:`~agent.quantize.recipe.Recipe`, runs the quality gate on the held-out sentences
(:mod:`agent.quantize.gate`), and only then writes the bundle, with what was done recorded in
its manifest (``quantization``) and what the int8 model was made from (``derived``: the fp32
file's name and sha256, see :mod:`agent.library.variants`; the agent does not serve an int8
model whose source is no longer the bundle's fp32 one). Everything runs on the caller's thread.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.logs import get_logger
from agent.quantize.errors import QuantizeError
from agent.quantize.gate import DEFAULT_BOUNDS, QualityBounds, QualityReport, gate_models
from agent.quantize.recipe import DEFAULT_RECIPE, Recipe, quantize_model
from agent.quantize.sentences import CalibrationReader, Feeds, sentence_feeds, sentences_sha256
from agent.voice.bundle import (
    Bundle,
    BundleError,
    read_manifest,
    sha256_file,
    verify_bundle,
    write_manifest,
)

__all__ = ["DERIVED_KEY", "INT8_SUFFIX", "build_int8_bundle", "derived_record",
           "manifest_quantization"]

log = get_logger(__name__)

INT8_SUFFIX = ".int8.onnx"
DERIVED_KEY = "derived"
"""The manifest's map of derived variants to their source, read by
:func:`agent.library.variants.choose_variant` (the daemon does not import this module)."""


def derived_record(source_variant: str, source_file: str, source_sha256: str,
                   ) -> dict[str, str]:
    """The manifest's record of one derived variant: ``derived[<variant>]``."""
    return {"from": source_variant, "file": source_file, "sha256": source_sha256}


@dataclass(frozen=True, slots=True)
class _Origin:
    voice: str
    version: str
    source: str


def _origin(onnx_path: Path, version: str | None, source: str | None) -> _Origin:
    """Voice name, version and source: from the manifest beside the model when it has one."""
    voice = onnx_path.name.removesuffix(".onnx")
    try:
        manifest = read_manifest(onnx_path.parent)
    except BundleError:
        manifest = {}
    if manifest.get("variants", {}).get("fp32") == onnx_path.name:
        verify_bundle(onnx_path.parent)  # never quantize a damaged model
        return _Origin(str(manifest["voice"]), version or str(manifest["version"]),
                       source or str(manifest.get("source", "local")))
    return _Origin(voice, version or "1.0.0", source or "local")


@dataclass(frozen=True, slots=True)
class _Inputs:
    """What the input voice gives the quantizer: where it came from and the model inputs."""

    origin: _Origin
    config_path: Path
    sample_rate: int
    calibration: list[tuple[str, Feeds]]
    heldout: list[tuple[str, Feeds]]


def _inputs(onnx_path: Path, calibration: Sequence[str], heldout: Sequence[str],
            version: str | None, source: str | None) -> _Inputs:
    """Check the input voice and make the model inputs of both sentence sets."""
    from agent.text.frontend import Frontend
    from agent.voice.voice import VoiceConfig, VoiceLoadError

    config_path = onnx_path.with_name(onnx_path.name + ".json")
    for path in (onnx_path, config_path):
        if not path.is_file():
            raise QuantizeError(f"not a file: {path}")
    if set(calibration) & set(heldout):
        raise QuantizeError("calibration and held-out sentences overlap")
    try:
        origin = _origin(onnx_path, version, source)
        config = VoiceConfig.from_file(config_path)
    except (BundleError, VoiceLoadError) as exc:
        raise QuantizeError(str(exc)) from exc
    frontend = Frontend(config.espeak_voice, config.phoneme_id_map)
    # Noise scales 0: the model is deterministic, so the same sentences give the same ranges.
    scales = (0.0, config.length_scale, 0.0)
    return _Inputs(origin, config_path, config.sample_rate,
                   sentence_feeds(frontend, calibration, scales),
                   sentence_feeds(frontend, heldout, scales))


def build_int8_bundle(
    onnx_path: Path,
    out_dir: Path,
    *,
    calibration: Sequence[str],
    heldout: Sequence[str],
    recipe: Recipe = DEFAULT_RECIPE,
    bounds: QualityBounds = DEFAULT_BOUNDS,
    version: str | None = None,
    source: str | None = None,
    threads: int = 1,
) -> tuple[Bundle, QualityReport]:
    """Quantize a Piper voice and write ``out_dir`` as a bundle with ``fp32`` and ``int8``.

    ``onnx_path`` is the fp32 voice (its ``.onnx.json`` beside it); when it sits in a bundle,
    that bundle is verified first and its version and source are carried over. Everything is
    built in a hidden sibling directory and renamed into place only after the quality gate
    passed, so ``out_dir`` (which may be the input's own bundle) is never half-written.
    Raises :class:`~agent.quantize.gate.QualityGateError` (nothing written) or
    :class:`QuantizeError`.
    """
    inputs = _inputs(onnx_path, calibration, heldout, version, source)
    origin = inputs.origin
    out_dir = out_dir.absolute()
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{origin.voice}-quant-", dir=out_dir.parent))
    try:
        fp32_name, int8_name = onnx_path.name, origin.voice + INT8_SUFFIX
        shutil.copyfile(onnx_path, staging / fp32_name)
        shutil.copyfile(inputs.config_path, staging / inputs.config_path.name)
        facts = quantize_model(staging / fp32_name, staging / int8_name,
                               CalibrationReader([f for _, f in inputs.calibration]), recipe)
        report = gate_models(staging / fp32_name, staging / int8_name, inputs.heldout,
                             sample_rate=inputs.sample_rate, bounds=bounds, threads=threads)
        record = _record(recipe, bounds, report, facts, calibration=calibration,
                         heldout=heldout, calibration_inputs=len(inputs.calibration))
        derived = {"int8": derived_record("fp32", fp32_name, sha256_file(staging / fp32_name))}
        write_manifest(staging, voice=origin.voice, version=origin.version,
                       sample_rate=inputs.sample_rate,
                       variants={"fp32": fp32_name, "int8": int8_name},
                       config=inputs.config_path.name, source=origin.source,
                       extra={"quantization": record, DERIVED_KEY: derived})
        staging.chmod(0o755)
        _replace_dir(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    log.info("int8_bundle_written", voice=origin.voice, dir=str(out_dir), recipe=recipe.name,
             **report.to_json()["mel_distance_db"])
    return verify_bundle(out_dir), report


def _record(recipe: Recipe, bounds: QualityBounds, report: QualityReport, facts: dict[str, Any],
            *, calibration: Sequence[str], heldout: Sequence[str],
            calibration_inputs: int) -> dict[str, Any]:
    """The manifest's ``quantization`` record: recipe, sentence sets, gate result, facts."""
    return {
        "recipe": recipe.to_json(),
        "calibration": {"sentences": len(calibration), "inputs": calibration_inputs,
                        "sha256": sentences_sha256(calibration)},
        "heldout": {"sentences": len(heldout), "sha256": sentences_sha256(heldout)},
        "quality": report.to_json(),
        "bounds": bounds.to_json(),
        "onnxruntime": _onnxruntime_version(),
        **facts,
    }


def _replace_dir(staging: Path, target: Path) -> None:
    """Rename ``staging`` to ``target``, moving an existing ``target`` out of the way first."""
    if not target.exists():
        staging.rename(target)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{target.name}-old-", dir=target.parent))
    target.rename(old / target.name)
    staging.rename(target)
    shutil.rmtree(old, ignore_errors=True)


def _onnxruntime_version() -> str:
    import onnxruntime

    return str(onnxruntime.__version__)


def manifest_quantization(bundle_dir: Path) -> dict[str, Any] | None:
    """The ``quantization`` record of a bundle's manifest (``None`` when it has none)."""
    value = read_manifest(bundle_dir).get("quantization")
    return value if isinstance(value, dict) else None
