"""The installed voices: discovery under ``models.dir`` and loaded, warm :class:`Voice` objects.

Voices are loaded on first use (or all at once with :meth:`VoiceLibrary.load_all`) and kept;
a request picks one by name, or gets the configured default.
"""

from __future__ import annotations

import threading
from pathlib import Path

from agent.bundle import MANIFEST_NAME, resolve_bundle_dir
from agent.onnx_session import RuntimeOptions
from agent.settings import Settings
from agent.voice import Voice, VoiceLoadError

__all__ = ["VoiceLibrary", "VoiceNotFound"]


class VoiceNotFound(LookupError):
    """No installed voice has the requested name."""


class VoiceLibrary:
    """Installed voices of one models directory. Thread-safe."""

    def __init__(self, settings: Settings, runtime: RuntimeOptions | None = None,
                 variant: str | None = None) -> None:
        self.settings = settings
        self.models_dir = settings.models.dir
        self.default_voice = settings.models.default_voice
        self.runtime = runtime or RuntimeOptions()
        self.variant = variant or (
            "fp32" if settings.models.variant == "auto" else settings.models.variant
        )
        self._lock = threading.Lock()
        self._loaded: dict[str, Voice] = {}

    def names(self) -> list[str]:
        """Names of the voices installed (bundles with a manifest), sorted."""
        if not self.models_dir.is_dir():
            return []
        return sorted(
            entry.name for entry in self.models_dir.iterdir()
            if not entry.name.startswith(".") and entry.is_dir()
            and (resolve_bundle_dir(entry) / MANIFEST_NAME).is_file()
        )

    def bundle_dir(self, name: str) -> Path:
        """Where voice ``name`` lives (after following a staged ``current`` link)."""
        if name not in self.names():
            have = ", ".join(self.names()) or "none"
            raise VoiceNotFound(f"no voice named {name!r} in {self.models_dir} (installed: {have})")
        return resolve_bundle_dir(self.models_dir / name)

    def get(self, name: str | None = None) -> Voice:
        """The loaded voice ``name`` (default voice when ``None``), loading it on first use.

        Raises :class:`VoiceNotFound` or :class:`VoiceLoadError`.
        """
        name = name or self.default_voice
        with self._lock:
            voice = self._loaded.get(name)
            if voice is None:
                voice = self._load(name)
                self._loaded[name] = voice
            return voice

    def _load(self, name: str) -> Voice:
        synthesis = self.settings.synthesis
        bundle_dir = self.bundle_dir(name)
        try:
            return Voice.load(
                bundle_dir,
                variant=self.variant,
                runtime=self.runtime,
                max_chars=synthesis.max_text_chars,
                phoneme_cache_size=synthesis.phoneme_cache_size,
                sentence_silence_s=synthesis.sentence_silence_s,
            )
        except VoiceLoadError:
            raise
        except Exception as exc:
            raise VoiceLoadError(f"{bundle_dir}: {exc}") from exc

    def loaded(self) -> list[Voice]:
        """The voices loaded so far."""
        with self._lock:
            return list(self._loaded.values())

    def load_all(self) -> list[Voice]:
        """Load (and warm) every installed voice; returns them."""
        return [self.get(name) for name in self.names()]
