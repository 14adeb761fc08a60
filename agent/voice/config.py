"""A Piper voice config (``*.onnx.json``): parsed from the bytes that matched the manifest, and
checked for values no voice has (docs/voices.md, "What a bundle may hold")."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent import jsonbound
from agent.voice.files import UnsafeFileError, open_regular

__all__ = ["MAX_CONFIG_BYTES", "MAX_SAMPLE_RATE", "MIN_SAMPLE_RATE", "VoiceConfig",
           "VoiceLoadError"]

MAX_CONFIG_BYTES = 1 << 20
MIN_SAMPLE_RATE, MAX_SAMPLE_RATE = 8000, 48000
"""Sample rates a voice config may give (Hz): Piper's voices use 16000 and 22050."""
_LANGUAGE = re.compile(r"^[A-Za-z]{2,3}(?:[_-][A-Za-z0-9]{1,8}){0,4}$")
"""A language code (``en_US``, ``en-us``, ``cmn``, ``en-gb-x-rp``); anything else is ignored."""


class VoiceLoadError(Exception):
    """A voice could not be loaded: bad bundle, bad config, wrong model signature, bad output."""


@dataclass(frozen=True, slots=True)
class VoiceConfig:
    """What a Piper ``.onnx.json`` says about its voice."""

    espeak_voice: str
    sample_rate: int
    phoneme_id_map: Mapping[str, Sequence[int]]
    length_scale: float = 1.0
    noise_scale: float = 0.667
    noise_w: float = 0.8
    num_speakers: int = 1
    speaker_id_map: Mapping[str, int] = field(default_factory=dict)
    languages: tuple[str, ...] = ()
    """The voice's languages: ``language.code`` (Piper's, e.g. ``en_US``), then
    ``espeak.voice`` (e.g. ``en-us``); what :mod:`agent.text.scripts` judges text by."""

    @classmethod
    def from_file(cls, path: Path) -> VoiceConfig:
        """The config in the regular file ``path`` (at most :data:`MAX_CONFIG_BYTES`); a voice
        reads its config with :meth:`from_bytes`, from the bytes that matched the manifest."""
        try:
            with open_regular(path) as handle:
                data = handle.read(MAX_CONFIG_BYTES + 1)
        except (OSError, UnsafeFileError) as exc:
            raise VoiceLoadError(f"{path}: unreadable voice config: {exc}") from exc
        return cls.from_bytes(data, path)

    @classmethod
    def from_bytes(cls, raw: bytes, path: Path) -> VoiceConfig:
        """Parse and check a config's bytes (``path`` names it in errors)."""
        if len(raw) > MAX_CONFIG_BYTES:
            raise VoiceLoadError(f"{path}: voice config larger than {MAX_CONFIG_BYTES} bytes")
        try:
            data: Any = jsonbound.loads(raw, max_bytes=MAX_CONFIG_BYTES)
        except jsonbound.JsonError as exc:  # bounded: nesting, size, numbers
            raise VoiceLoadError(f"{path}: unreadable voice config: {exc}") from None
        try:
            inference = data.get("inference", {})
            id_map = {str(k): [int(i) for i in v] for k, v in data["phoneme_id_map"].items()}
            config = cls(
                espeak_voice=str(data["espeak"]["voice"]),
                sample_rate=int(data["audio"]["sample_rate"]),
                phoneme_id_map=id_map,
                length_scale=float(inference.get("length_scale", 1.0)),
                noise_scale=float(inference.get("noise_scale", 0.667)),
                noise_w=float(inference.get("noise_w", 0.8)),
                num_speakers=int(data.get("num_speakers", 1)),
                speaker_id_map={str(k): int(v) for k, v in data.get("speaker_id_map", {}).items()},
                languages=_languages(data),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise VoiceLoadError(f"{path}: not a usable Piper voice config: {exc!r}") from exc
        config.check(path)
        return config

    def check(self, path: Path) -> None:
        """Refuse values no voice has: a sample rate outside :data:`MIN_SAMPLE_RATE` ..
        :data:`MAX_SAMPLE_RATE`, negative phoneme ids, scales that are not positive numbers."""
        if not MIN_SAMPLE_RATE <= self.sample_rate <= MAX_SAMPLE_RATE:
            raise VoiceLoadError(f"{path}: sample rate {self.sample_rate} Hz is outside "
                                 f"{MIN_SAMPLE_RATE}..{MAX_SAMPLE_RATE} Hz")
        for symbol, ids in self.phoneme_id_map.items():
            if not ids or min(ids) < 0:
                raise VoiceLoadError(f"{path}: phoneme {symbol!r} maps to {list(ids)}; ids "
                                     "are numbers from 0")
        if not (math.isfinite(self.length_scale) and 0 < self.length_scale <= 100):
            raise VoiceLoadError(f"{path}: length_scale {self.length_scale} is not in (0, 100]")
        if self.num_speakers < 1:
            raise VoiceLoadError(f"{path}: num_speakers {self.num_speakers} is below 1")

    def check_symbols(self, symbols: int, path: Path) -> None:
        """Refuse phoneme ids the model's embedding (``symbols`` rows) does not have."""
        for symbol, ids in self.phoneme_id_map.items():
            if max(ids) >= symbols:
                raise VoiceLoadError(
                    f"{path}: phoneme {symbol!r} maps to id {max(ids)}, beyond the model's "
                    f"{symbols} symbols (ids 0..{symbols - 1})")


def _languages(data: Mapping[str, object]) -> tuple[str, ...]:
    """``language.code`` and ``espeak.voice`` of a config, where they look like language codes."""
    language, espeak = data.get("language"), data.get("espeak")
    codes = (language.get("code") if isinstance(language, Mapping) else None,
             espeak.get("voice") if isinstance(espeak, Mapping) else None)
    return tuple(dict.fromkeys(c for c in codes if isinstance(c, str) and _LANGUAGE.match(c)))
