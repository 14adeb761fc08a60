"""The local tune override: what ``tts-agent tune`` measured as best on this machine.

A small JSON file (default ``<cache.dir>/tune.json``, setting ``synthesis.tune_file``) written
atomically by ``tts-agent tune`` and read at start-up by
:func:`agent.hardware.effective.resolve_profile`. It is used only while the hardware fingerprint
still matches (an SD card moved to another board, or a container given other CPUs, must not
inherit a stale thread count).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent import jsonbound
from agent.fsutil import atomic_write
from agent.hardware.runtime import ModelVariant, ThreadAffinity

__all__ = ["TuneFileError", "TuneMeasurement", "TuneOverride", "read_tune", "write_tune"]

TUNE_FORMAT: Literal[1] = 1
MAX_TUNE_BYTES = 256 * 1024


class TuneFileError(Exception):
    """The tune file exists but cannot be read or is invalid."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class TuneMeasurement(_Strict):
    """One row of the tune table."""

    variant: ModelVariant
    intra_op_threads: int = Field(ge=1, le=256)
    inter_op_threads: int = Field(ge=1, le=64)
    thread_affinity: ThreadAffinity
    rtf_median: float = Field(ge=0, description="Synthesis seconds per second of audio (median).")
    rtf_best: float = Field(ge=0)
    runs: int = Field(ge=1)
    audio_s: float = Field(ge=0, description="Seconds of audio synthesized per run.")


class TuneOverride(_Strict):
    """The stored result; its settings override the profile (explicit settings still win)."""

    format: Literal[1] = TUNE_FORMAT
    created_at: str
    fingerprint: str = Field(max_length=2000, description="HardwareInfo.fingerprint() measured on.")
    hardware: str = Field(max_length=500, description="Readable summary of the machine.")
    profile: str = Field(max_length=64)
    voice: str = Field(max_length=128)
    voice_version: str = Field(max_length=64)
    onnxruntime: str = Field(max_length=32)
    intra_op_threads: int = Field(ge=1, le=256)
    inter_op_threads: int = Field(ge=1, le=64)
    thread_affinity: ThreadAffinity
    model_variant: ModelVariant | None = Field(
        default=None, description="Set only when more than one variant was measured."
    )
    rtf: float = Field(ge=0, description="Median RTF of the chosen setting.")
    results: list[TuneMeasurement] = Field(default_factory=list, max_length=512)


def read_tune(path: Path) -> TuneOverride | None:
    """The stored override, or None when there is none; :class:`TuneFileError` if it is bad."""
    try:
        if path.stat().st_size > MAX_TUNE_BYTES:
            raise TuneFileError(f"{path}: larger than {MAX_TUNE_BYTES} bytes")
        data = jsonbound.loads(path.read_bytes(), max_bytes=MAX_TUNE_BYTES)
    except FileNotFoundError:
        return None
    except (OSError, jsonbound.JsonError) as exc:
        raise TuneFileError(f"{path}: unreadable: {exc}") from exc
    try:
        return TuneOverride.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(root)"
        raise TuneFileError(f"{path}: field {loc}: {first['msg']}") from exc


def write_tune(path: Path, tune: TuneOverride) -> None:
    """Write ``tune`` atomically (temporary file, fsync, rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, (tune.model_dump_json(indent=2) + "\n").encode(), prefix=".tune-")
