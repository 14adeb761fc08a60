"""The languages of the installed voices, and whether a request's text is one they can say.

The dispatcher asks for every ``speak`` (on its own thread, before ``accepted``), so nothing here
loads a voice: the languages come from each bundle's Piper config (``language.code``,
``espeak.voice``: :attr:`agent.voice.config.VoiceConfig.languages`), read once and kept while
the bundle's fingerprint (file names, sizes, mtimes) stays the same.
"""

from __future__ import annotations

import threading
from pathlib import Path

from agent.library.fingerprint import Fingerprint, fingerprint
from agent.logs import get_logger
from agent.settings import Settings
from agent.text.document import Document
from agent.voice.bundle import BundleError, installed_voices, read_manifest, resolve_bundle_dir
from agent.voice.config import VoiceConfig, VoiceLoadError

__all__ = ["SpeechCheck", "VoiceLanguages"]

log = get_logger(__name__)


class VoiceLanguages:
    """``voice name -> languages`` of the voices installed in ``models_dir`` now. Thread-safe.

    A voice whose config cannot be read has no languages (its text is not judged here; loading
    it fails with the reason)."""

    def __init__(self, models_dir: Path) -> None:
        self.models_dir = models_dir
        self._lock = threading.Lock()
        self._seen: dict[str, tuple[Fingerprint, tuple[str, ...]]] = {}

    def __call__(self) -> dict[str, tuple[str, ...]]:
        try:
            names = installed_voices(self.models_dir)
        except OSError:
            names = []
        out: dict[str, tuple[str, ...]] = {}
        with self._lock:
            for name in names:
                bundle_dir = resolve_bundle_dir(self.models_dir / name)
                seen = fingerprint(bundle_dir)
                known = self._seen.get(name)
                if known is None or known[0] != seen:
                    known = self._seen[name] = (seen, _languages(bundle_dir))
                out[name] = known[1]
            for gone in set(self._seen) - set(names):
                del self._seen[gone]
        return out


def _languages(bundle_dir: Path) -> tuple[str, ...]:
    try:
        config = read_manifest(bundle_dir)["config"]
        return VoiceConfig.from_file(bundle_dir / str(config)).languages
    except (BundleError, VoiceLoadError, KeyError, OSError):
        return ()


class SpeechCheck:
    """``check(document, voice)``: the one-line reason a request's text cannot be spoken by its
    voices (a script they cannot say; nothing left once symbols are dropped), or None. Used by
    the dispatcher (a ``speak`` is then ``rejected``) and by ``tts-agent say``/``synth``."""

    def __init__(self, models_dir: Path, *, drop_symbols: bool = True) -> None:
        self.languages = VoiceLanguages(models_dir)
        self.drop_symbols = drop_symbols

    @classmethod
    def for_settings(cls, settings: Settings) -> SpeechCheck:
        return cls(settings.models.dir, drop_symbols=settings.text.symbols == "drop")

    def __call__(self, document: Document, voice: str) -> str | None:
        """The reason, or None; words of other scripts the voice will skip are logged."""
        from agent.text.scripts import skipped_words, speech_problem  # regex: off start-up

        languages = self.languages()
        problem = speech_problem(document, voice, languages, drop_symbols=self.drop_symbols)
        if problem is None:
            skipped = skipped_words(document, voice, languages)
            if skipped:
                log.info("text_skipped", voice=voice, words=skipped[:8],
                         reason="in a script the voice cannot speak")
        return problem
