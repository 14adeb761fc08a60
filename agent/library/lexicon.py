"""The device lexicon in service (``text.lexicon``), reloaded like the voices.

A :class:`LexiconHolder` is what every voice's frontend is given; :meth:`LexiconHolder.reload`
swaps the lexicon whole once a changed file has been checked, and a file that cannot be used
never replaces the one in service (it is reported in the health report's ``lexicon``). The
:class:`LexiconWatcher` runs as the daemon's ``lexicon`` add-on (:func:`build`). Design:
docs/internals.md#the-device-lexicon.
"""

from __future__ import annotations

import hashlib
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from agent.library.debounce import DebouncedWatcher
from agent.logs import get_logger
from agent.text.lexicon import Lexicon, LexiconError
from agent.text.lexicon_file import parse_lexicon, read_lexicon_file
from agent.voice.bundle import read_manifest, resolve_bundle_dir
from agent.voice.config import VoiceConfig

if TYPE_CHECKING:
    from agent.health.report import LexiconSection
    from agent.library.voices import VoiceLibrary
    from agent.settings import Settings
    from agent.text.document import Piece

__all__ = ["LexiconAddon", "LexiconContext", "LexiconHolder", "LexiconOutcome", "LexiconWatcher",
           "build", "holder_of", "voice_symbols"]

log = get_logger(__name__)

_SHA_SHOWN = 12
"""Hex digits of the file's sha256 in the health report."""

LexiconOutcome = Literal["loaded", "unchanged", "rejected"]
"""What one :meth:`LexiconHolder.reload` did."""


class LexiconContext(Protocol):
    """What the ``lexicon`` add-on reads of the daemon that builds it (:func:`build`)."""

    @property
    def voices(self) -> VoiceLibrary: ...

    @property
    def settings(self) -> Settings: ...


def voice_symbols(models_dir: Path, voice: str) -> tuple[frozenset[str], str] | None:
    """The phonemes voice ``voice``'s id map knows, and how to name it in refusals; None when
    its config cannot be read (then IPA is checked by the frontend when it is used)."""
    try:
        bundle_dir = resolve_bundle_dir(models_dir / voice)
        config = VoiceConfig.from_file(bundle_dir / read_manifest(bundle_dir)["config"])
    except Exception:  # no voice installed yet, or a damaged one: the library reports it
        return None
    return frozenset(config.phoneme_id_map), f"voice {voice}"


class LexiconHolder:
    """The lexicon in service for one file, swapped whole by :meth:`reload`. Thread-safe."""

    def __init__(self, path: Path, models_dir: Path | None = None,
                 default_voice: str | None = None) -> None:
        """``models_dir`` and ``default_voice``: whose id map IPA entries are checked against
        (None: not checked here)."""
        self.path = path
        self._symbols_of = (models_dir, default_voice)
        self._lexicon = Lexicon()
        self._loaded_at: float | None = None
        self._last_error: str | None = None
        self._lock = threading.Lock()

    @classmethod
    def for_settings(cls, settings: Settings) -> LexiconHolder | None:
        """The holder of ``text.lexicon`` with the file loaded (None when it is unset)."""
        path = settings.text.lexicon
        if path is None:
            return None
        holder = cls(path, settings.models.dir, settings.models.default_voice)
        holder.reload()
        return holder

    # -- what the frontend uses (any thread) ----------------------------------------------

    @property
    def key(self) -> str:
        return self._lexicon.key

    @property
    def current(self) -> Lexicon:
        return self._lexicon

    def rewrite(self, text: str) -> list[Piece]:
        return self._lexicon.rewrite(text)

    # -- reload (watcher, main or dispatch thread) ----------------------------------------

    def reload(self) -> LexiconOutcome:
        """Read the file again: ``loaded`` (a new lexicon in service), ``unchanged`` (same
        bytes) or ``rejected`` (the one in service kept; the reason is in :attr:`last_error`)."""
        with self._lock:
            try:
                raw = read_lexicon_file(self.path)
            except LexiconError as exc:
                return self._reject(str(exc))
            if self._lexicon.sha256 and hashlib.sha256(raw).hexdigest() == self._lexicon.sha256:
                self._last_error = None
                return "unchanged"
            try:
                lexicon = self._parse(raw)
            except LexiconError as exc:
                return self._reject(str(exc))
            except Exception as exc:  # a file the checks did not foresee never stops the agent
                log.exception("lexicon_check_crashed", path=str(self.path))
                return self._reject(f"{self.path}: cannot be read ({type(exc).__name__})")
            self._lexicon, self._loaded_at, self._last_error = lexicon, time.time(), None
        log.info("lexicon_loaded", path=str(self.path), entries=len(lexicon),
                 sha256=lexicon.sha256[:_SHA_SHOWN])
        return "loaded"

    def _parse(self, raw: bytes) -> Lexicon:
        """The lexicon of the bytes just read (what is checked is what was hashed)."""
        models_dir, voice = self._symbols_of
        known = voice_symbols(models_dir, voice) if models_dir and voice else None
        symbols, symbols_from = known if known is not None else (None, "the voice")
        return parse_lexicon(raw, str(self.path), json_format=self.path.suffix == ".json",
                             symbols=symbols, symbols_from=symbols_from)

    def _reject(self, reason: str) -> LexiconOutcome:
        self._last_error = reason
        kept = len(self._lexicon) if self._loaded_at is not None else None
        log.error("lexicon_rejected", path=str(self.path), error=reason,
                  kept_entries=kept, running="with the previous lexicon" if kept is not None
                  else "without a lexicon")
        return "rejected"

    @property
    def last_error(self) -> str | None:
        return self._last_error

    def status(self) -> LexiconSection:
        """The health report's ``lexicon`` section (``degraded`` while the file on disk is
        refused)."""
        lexicon, error = self._lexicon, self._last_error
        return {"path": str(self.path), "loaded": self._loaded_at is not None,
                "entries": len(lexicon), "sha256": lexicon.sha256[:_SHA_SHOWN] or None,
                "loaded_at": self._loaded_at, "last_error": error,
                "state": "degraded" if error else "ok", "reason": error}


class LexiconWatcher(DebouncedWatcher):
    """Reloads the holder once its file has changed and then been quiet for ``debounce_s``
    (watchdog on the file's directory: in-place writes, atomic renames, removal)."""

    def __init__(self, holder: LexiconHolder, *, debounce_s: float = 1.0,
                 polling: bool = False, poll_interval_s: float = 1.0) -> None:
        super().__init__(name="lexicon-watch", debounce_s=debounce_s, polling=polling,
                         poll_interval_s=poll_interval_s)
        self.holder = holder

    def start(self) -> None:
        name = self.holder.path.name
        # Only events about the lexicon's own name (not an editor's temp); raises when the
        # directory is missing: the add-on is left out.
        self._observe(self.holder.path.parent, recursive=False,
                      wanted=lambda paths: any(p and Path(p).name == name for p in paths))
        log.info("lexicon_watch_started", path=str(self.holder.path),
                 observer="polling" if self.polling else "inotify")

    def _fire(self) -> bool:
        try:
            self.holder.reload()
        except Exception:
            log.exception("lexicon_reload_crashed")
        return False


class LexiconAddon:
    """The daemon's ``lexicon`` add-on: the watcher, when ``models.watch`` is on."""

    name = "lexicon"

    def __init__(self, holder: LexiconHolder, watcher: LexiconWatcher | None) -> None:
        self.holder = holder
        self.watcher = watcher

    def start(self) -> None:
        if self.watcher is not None:
            self.watcher.start()

    def stop(self, timeout: float) -> None:
        if self.watcher is not None:
            self.watcher.stop(timeout)

    def on_connected(self) -> None:
        return None


def holder_of(voices: VoiceLibrary) -> LexiconHolder | None:
    """The lexicon holder a voice library's frontends are given (None: no lexicon set)."""
    holder = voices.options.text.lexicon
    return holder if isinstance(holder, LexiconHolder) else None


def build(context: LexiconContext) -> LexiconAddon | None:
    """The add-on (:mod:`agent.daemon.addons`); None without a lexicon."""
    holder = holder_of(context.voices)
    if holder is None:
        return None
    models = context.settings.models
    watcher = (LexiconWatcher(holder, debounce_s=models.debounce_s,
                              polling=models.watch_polling) if models.watch else None)
    return LexiconAddon(holder, watcher)
