"""The installed voices and their lifecycle: load, validate, swap atomically, roll back.

A :class:`VoiceLibrary` owns the live :class:`Voice` of every installed voice. Requests take the
current voice with :meth:`VoiceLibrary.get` and keep that object for the whole request, so a reload
never changes the model under a request that is already synthesizing: new requests get the new
model, running ones finish on the old one, and the old session is released when its last user is
done.

:meth:`VoiceLibrary.reload` compares what is on disk (mtimes and sizes of the bundle's files, then
the manifest's sha256) with what is loaded, and validates a changed bundle off the serving path
before it replaces the live voice:

1. the manifest is present and every file matches its size and sha256;
2. onnxruntime loads it with the profile's session options;
3. its inputs are Piper's, its config and manifest agree on the sample rate;
4. a warm-up synthesis yields finite, non-silent audio of plausible length.

A bundle still being written (a file changed within ``settle_s``, or sizes that do not match the
manifest yet) is left for the next check instead of being rejected. A rejected bundle never replaces
the live voice; every outcome is reported through ``on_event`` as ``model_loaded`` or
``model_rejected`` and kept in :meth:`VoiceLibrary.status`.

Staged layout: ``models/<voice>/<version>/`` with a ``current`` symlink. :meth:`activate` points
``current`` at another version (atomically, by renaming a new symlink over it) and records the old
target in a ``previous`` symlink, which is what :meth:`rollback` goes back to.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agent.logs import get_logger
from agent.settings import Settings
from agent.voice.bundle import (
    MANIFEST_NAME,
    BundleError,
    read_manifest,
    resolve_bundle_dir,
    sha256_file,
)
from agent.voice.memory import trim_heap
from agent.voice.onnx_session import RuntimeOptions
from agent.voice.voice import Voice, VoiceLoadError

__all__ = ["ReloadResult", "VoiceLibrary", "VoiceNotFound"]

log = get_logger(__name__)

EventSink = Callable[[dict[str, Any]], None]
_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$")
MIN_WARMUP_S, MAX_WARMUP_S = 0.03, 5.0  # "Ready." spoken in a plausible time


class VoiceNotFound(LookupError):
    """No installed voice has the requested name (or version)."""


@dataclass(frozen=True, slots=True)
class ReloadResult:
    """The outcome of one reload attempt of one voice."""

    voice: str
    outcome: str
    """``loaded``, ``rejected``, ``unchanged`` or ``pending`` (bundle still being written)."""
    version: str | None = None
    reason: str | None = None
    at: float = field(default_factory=time.time)

    def as_dict(self) -> dict[str, Any]:
        return {"voice": self.voice, "outcome": self.outcome, "version": self.version,
                "reason": self.reason, "at": self.at}


@dataclass(frozen=True, slots=True)
class _Fingerprint:
    """What a bundle looked like on disk: target dir and (mtime_ns, size) of each file."""

    bundle_dir: Path
    files: tuple[tuple[str, int, int], ...]

    @property
    def newest_mtime_ns(self) -> int:
        return max((m for _, m, _ in self.files), default=0)


def _fingerprint(bundle_dir: Path) -> _Fingerprint:
    files = []
    for path in sorted(bundle_dir.iterdir()) if bundle_dir.is_dir() else []:
        if path.name.startswith(".") or not path.is_file():
            continue
        st = path.stat()
        files.append((path.name, st.st_mtime_ns, st.st_size))
    return _Fingerprint(bundle_dir.resolve(), tuple(files))


class VoiceLibrary:
    """Installed voices of one models directory, loaded and warm. Thread-safe."""

    def __init__(
        self,
        settings: Settings,
        runtime: RuntimeOptions | None = None,
        variant: str | None = None,
        on_event: EventSink | None = None,
        settle_s: float | None = None,
    ) -> None:
        self.settings = settings
        self.models_dir = settings.models.dir
        self.default_voice = settings.models.default_voice
        self.runtime = runtime or RuntimeOptions()
        if self.runtime.optimized_cache_dir is None:
            self.runtime = replace(self.runtime, optimized_cache_dir=settings.cache.dir / "ort")
        self.variant = variant or (
            "fp32" if settings.models.variant == "auto" else settings.models.variant
        )
        self.on_event = on_event
        self.settle_s = settings.models.debounce_s * 2 if settle_s is None else settle_s
        self._lock = threading.Lock()  # guards _live and _seen
        self._reload_lock = threading.Lock()  # one validation at a time
        self._live: dict[str, Voice] = {}
        self._seen: dict[str, _Fingerprint] = {}
        self._last: dict[str, ReloadResult] = {}
        self._pending_since: dict[str, float] = {}
        self._preloaded: dict[str, tuple[Voice | VoiceLoadError, _Fingerprint]] = {}
        """Voices validated by :meth:`preload`, waiting for :meth:`get` to swap them in."""

    @classmethod
    def for_settings(cls, settings: Settings, on_event: EventSink | None = None,
                     profile: Any = None) -> VoiceLibrary:
        """A library whose sessions use the effective hardware profile (threads, variant).

        ``profile`` is what :func:`agent.hardware.profile_or_reason` resolved: an
        :class:`agent.hardware.EffectiveProfile`, or None when there is none (then the library
        runs with one thread and fp32).
        """
        if profile is None:
            return cls(settings, on_event=on_event)
        return cls(settings, runtime=profile.runtime_options(),
                   variant=profile.runtime.model_variant, on_event=on_event)

    # -- discovery ------------------------------------------------------------------------

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
        if not _VERSION.match(name) or name not in self.names():
            have = ", ".join(self.names()) or "none"
            raise VoiceNotFound(f"no voice named {name!r} in {self.models_dir} (installed: {have})")
        return resolve_bundle_dir(self.models_dir / name)

    # -- serving --------------------------------------------------------------------------

    def get(self, name: str | None = None) -> Voice:
        """The live voice ``name`` (default voice when ``None``), loading it on first use (or
        taking the one :meth:`preload` loaded).

        Raises :class:`VoiceNotFound` or :class:`VoiceLoadError`.
        """
        name = name or self.default_voice
        with self._lock:
            voice = self._live.get(name)
        if voice is not None:
            return voice
        with self._reload_lock:
            with self._lock:
                voice = self._live.get(name)
            if voice is None:
                preloaded = self._preloaded.pop(name, None)
                loaded, fingerprint = preloaded if preloaded is not None else self._load(name)
                if isinstance(loaded, VoiceLoadError):
                    raise loaded
                voice = loaded
                self._swap_in(name, voice, fingerprint)
            return voice

    def preload(self, name: str | None = None) -> threading.Thread | None:
        """Start loading voice ``name`` (default voice when ``None``) on a helper thread; the
        next :meth:`get` of it waits for that load and swaps the voice in (reporting it then, so
        ``on_event`` may still be set after this call). Returns the thread, or None when there
        is no such voice (``get`` reports that).

        The daemon calls this before importing the rest of itself: onnxruntime builds the session
        and hashes the model without holding the GIL, so on two cores the imports and the load
        proceed together (``bench/compare_piper.py``, start-up to READY).
        """
        name = name or self.default_voice
        try:
            self.bundle_dir(name)
        except VoiceNotFound:
            return None
        self._reload_lock.acquire()  # released by the thread: get() waits for the load

        def load() -> None:
            try:
                with self._lock:
                    live = name in self._live
                if not live:
                    self._preloaded[name] = self._load(name)
            except BaseException as exc:  # VoiceNotFound (gone meanwhile): get() reports it
                log.warning("voice_preload_failed", voice=name, error=str(exc))
            finally:
                self._reload_lock.release()

        thread = threading.Thread(target=load, name="voice-preload", daemon=True)
        try:
            thread.start()
        except BaseException:  # no thread (resource limits): get() loads it itself
            self._reload_lock.release()
            raise
        log.debug("voice_preload_started", voice=name)
        return thread

    def _load(self, name: str) -> tuple[Voice | VoiceLoadError, _Fingerprint]:
        """Validate voice ``name`` as it is on disk now: the voice, or why it was refused."""
        fingerprint = _fingerprint(self.bundle_dir(name))
        try:
            return self._validate(name, fingerprint), fingerprint
        except VoiceLoadError as exc:
            return exc, fingerprint

    def loaded(self) -> list[Voice]:
        """The live voices."""
        with self._lock:
            return list(self._live.values())

    def load_all(self) -> list[Voice]:
        """Load (and warm) every installed voice; returns them. Raises on the first failure."""
        return [self.get(name) for name in self.names()]

    # -- lifecycle ------------------------------------------------------------------------

    def reload(self, name: str | None = None) -> list[ReloadResult]:
        """Re-check installed voices (or just ``name``) and swap in those that changed and pass
        validation. Runs on the caller's thread (the model watcher or the MQTT command worker)."""
        names = [name] if name else sorted(set(self.names()) | set(self._live))
        results = []
        with self._reload_lock:
            for voice in names:
                results.append(self._reload_one(voice))
        return results

    def _reload_one(self, name: str, *, settle: bool = True) -> ReloadResult:
        try:
            bundle_dir = self.bundle_dir(name)
        except VoiceNotFound as exc:
            with self._lock:
                live = name in self._live
            # A voice directory that vanished keeps serving from memory until it comes back.
            if live:
                return self._report(ReloadResult(name, "rejected", reason=str(exc)))
            return ReloadResult(name, "unchanged")
        fingerprint = _fingerprint(bundle_dir)
        skip = self._skip_reason(name, bundle_dir, fingerprint, settle)
        if skip is not None:
            return skip
        try:
            voice = self._validate(name, fingerprint)
        except VoiceLoadError as exc:
            with self._lock:
                self._seen[name] = fingerprint  # don't retry the same broken files
            return self._report(ReloadResult(name, "rejected", reason=str(exc),
                                             version=_manifest_version(bundle_dir)))
        self._swap_in(name, voice, fingerprint)
        return self._last[name]

    def _skip_reason(self, name: str, bundle_dir: Path, fingerprint: _Fingerprint,
                     settle: bool) -> ReloadResult | None:
        """Why ``name`` needs no validation now (unchanged, unused, still being written)."""
        with self._lock:
            seen = self._seen.get(name)
            live_voice = self._live.get(name)
        if seen == fingerprint or (live_voice is None and seen is None
                                   and name != self.default_voice):
            return ReloadResult(name, "unchanged")  # unused voices are validated on first use
        if live_voice is not None and self._same_model(bundle_dir, live_voice):
            with self._lock:
                self._seen[name] = fingerprint  # touched or re-copied, same bytes
            return ReloadResult(name, "unchanged", version=live_voice.version)
        settling = time.time_ns() - fingerprint.newest_mtime_ns < self.settle_s * 1e9
        if settle and (settling or self._sizes_pending(bundle_dir)):
            since = self._pending_since.setdefault(name, time.monotonic())
            if time.monotonic() - since < self.settings.models.pending_timeout_s:
                return ReloadResult(name, "pending", reason="bundle still being written")
        self._pending_since.pop(name, None)
        return None

    def _same_model(self, bundle_dir: Path, voice: Voice) -> bool:
        """True when the files on disk are byte for byte those the live voice was loaded from
        (a ``touch`` or a re-copy of the same files): their sha256 equals the live voice's."""
        if bundle_dir.resolve() != voice.bundle.dir.resolve():
            return False
        try:
            files = read_manifest(bundle_dir)["files"]
            return all(
                name in files and files[name].get("sha256") == digest
                and sha256_file(bundle_dir / name) == digest
                for name, digest in voice.bundle.sha256.items()
            )
        except (BundleError, OSError):
            return False

    @staticmethod
    def _sizes_pending(bundle_dir: Path) -> bool:
        """True while a file's size differs from the manifest (a copy still in progress)."""
        try:
            files = read_manifest(bundle_dir)["files"]
        except BundleError:
            return False
        for file_name, entry in files.items():
            try:
                if (bundle_dir / file_name).stat().st_size != entry.get("size"):
                    return True
            except FileNotFoundError:
                return True
        return False

    def _validate(self, name: str, fingerprint: _Fingerprint) -> Voice:
        synthesis = self.settings.synthesis
        try:
            voice = Voice.load(
                fingerprint.bundle_dir,
                variant=self._variant_for(fingerprint.bundle_dir),
                runtime=self.runtime,
                max_chars=synthesis.max_text_chars,
                phoneme_cache_size=synthesis.phoneme_cache_size,
                sentence_silence_s=synthesis.sentence_silence_s,
                max_clause_phonemes=synthesis.max_clause_phonemes,
                stream_first_frames=synthesis.stream_first_frames,
                stream_growth=synthesis.stream_growth,
                stream_max_window_frames=synthesis.stream_max_window_frames,
            )
        except VoiceLoadError:
            raise
        except Exception as exc:  # anything else a broken bundle can provoke
            raise VoiceLoadError(f"{fingerprint.bundle_dir}: {exc}") from exc
        if voice.name != name:
            raise VoiceLoadError(f"{fingerprint.bundle_dir}: manifest names voice {voice.name!r}, "
                                 f"directory is {name!r}")
        warmup_audio_s = voice.warmup_audio_s
        if not MIN_WARMUP_S <= warmup_audio_s <= MAX_WARMUP_S:
            raise VoiceLoadError(f"{name}: warm-up audio lasted {warmup_audio_s:.2f} s, "
                                 f"not a plausible length for {voice.warmup_text!r}")
        return voice

    def _variant_for(self, bundle_dir: Path) -> str:
        try:
            variants = read_manifest(bundle_dir)["variants"]
        except BundleError:
            return self.variant
        if self.variant in variants or self.settings.models.variant != "auto":
            return self.variant
        fallback = "fp32" if "fp32" in variants else sorted(variants)[0]
        log.warning("variant_unavailable", wanted=self.variant, using=fallback, dir=str(bundle_dir))
        return str(fallback)

    def _swap_in(self, name: str, voice: Voice, fingerprint: _Fingerprint) -> None:
        with self._lock:
            old = self._live.get(name)
            self._live[name] = voice
            self._seen[name] = fingerprint
        self._report(ReloadResult(name, "loaded", version=voice.version), voice=voice,
                     replaced=old)
        if old is not None:
            # Requests still holding the old voice keep it alive; whatever is already free
            # goes back to the OS now instead of piling up over reloads.
            del old
            trim_heap()

    def _report(self, result: ReloadResult, voice: Voice | None = None,
                replaced: Voice | None = None) -> ReloadResult:
        self._last[result.voice] = result
        event: dict[str, Any]
        if result.outcome == "loaded" and voice is not None:
            event = {"event": "model_loaded", "voice": voice.name, "version": voice.version,
                     "variant": voice.variant, "sha256": dict(voice.bundle.sha256),
                     "load_s": round(voice.load_s, 3), "provider": voice.provider,
                     "previous_version": replaced.version if replaced else None}
            log.info("model_loaded", voice=voice.name, version=voice.version,
                     variant=voice.variant)
        else:
            event = {"event": "model_rejected", "voice": result.voice, "version": result.version,
                     "reason": result.reason}
            log.warning("model_rejected", voice=result.voice, version=result.version,
                        reason=result.reason)
        if self.on_event is not None:
            try:
                self.on_event(event)
            except Exception:  # a broken sink must not break the lifecycle
                log.exception("model_event_sink_failed")
        return result

    # -- staged versions ------------------------------------------------------------------

    def versions(self, name: str) -> list[str]:
        """Versions of a staged voice (sub-directories with a manifest), sorted by name."""
        voice_dir = self.models_dir / name
        if not _VERSION.match(name) or not voice_dir.is_dir():
            raise VoiceNotFound(f"no voice named {name!r} in {self.models_dir}")
        return sorted(
            entry.name for entry in voice_dir.iterdir()
            if entry.is_dir() and not entry.is_symlink() and not entry.name.startswith(".")
            and (entry / MANIFEST_NAME).is_file()
        )

    def activate(self, name: str, version: str) -> ReloadResult:
        """Point the staged voice ``name`` at ``version`` and reload it now.

        The switch is undone when the new version is rejected, so ``current`` always names a
        version that passed validation.
        """
        if not _VERSION.match(version) or version not in self.versions(name):
            raise VoiceNotFound(f"voice {name!r} has no version {version!r} "
                                f"(has: {', '.join(self.versions(name)) or 'none'})")
        voice_dir = self.models_dir / name
        current = voice_dir / "current"
        before = os.readlink(current) if current.is_symlink() else None
        if before == version:
            return ReloadResult(name, "unchanged", version=version)
        with self._reload_lock:
            _replace_symlink(current, version)
            result = self._reload_one(name, settle=False)
            if result.outcome == "loaded":
                if before is not None:
                    _replace_symlink(voice_dir / "previous", before)
            elif before is not None:
                _replace_symlink(current, before)
                self._reload_one(name, settle=False)
        return result

    def rollback(self, name: str | None = None) -> ReloadResult:
        """Go back to the version that was live before the last :meth:`activate`."""
        name = name or self.default_voice
        previous = self.models_dir / name / "previous"
        if not previous.is_symlink():
            raise VoiceNotFound(f"voice {name!r} has no previous version to roll back to "
                                "(rollback needs the staged layout models/<voice>/<version>/)")
        return self.activate(name, os.readlink(previous))

    def status(self) -> dict[str, Any]:
        """Loaded voices and the last reload result of each, for health reports."""
        voices = [
            {"voice": v.name, "version": v.version, "variant": v.variant, "sha256": v.sha256,
             "loaded_at": v.loaded_at, "provider": v.provider, "sample_rate": v.sample_rate,
             "streaming": v.streaming}
            for v in self.loaded()
        ]
        return {"voices": voices, "default": self.default_voice,
                "last_reload": {k: r.as_dict() for k, r in sorted(self._last.items())}}


def _replace_symlink(link: Path, target: str) -> None:
    """Atomically make ``link`` point at ``target`` (relative), replacing what was there."""
    tmp = link.with_name(f".{link.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(target)
    os.replace(tmp, link)


def _manifest_version(bundle_dir: Path) -> str | None:
    try:
        return str(read_manifest(bundle_dir)["version"])
    except BundleError:
        return None
