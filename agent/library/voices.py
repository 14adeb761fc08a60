"""The installed voices and their lifecycle: load, validate, swap atomically, roll back.

A :class:`VoiceLibrary` owns the live :class:`Voice` of every installed voice; a request keeps the
one :meth:`VoiceLibrary.get` gave it. :meth:`VoiceLibrary.reload` validates a changed bundle off
the serving path before it replaces the live voice and reports every outcome through ``on_event``;
:meth:`activate` and :meth:`rollback` switch staged versions (:mod:`.staging`). Design:
docs/internals.md#the-voice-library.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.library.events import ReloadResult, model_event, still_serving, without_models_dir
from agent.library.fingerprint import Fingerprint, fingerprint, manifest_version, sizes_pending
from agent.library.lexicon import LexiconHolder
from agent.library.options import voice_options
from agent.library.requantize import Requantizer
from agent.library.staging import (
    CURRENT,
    NAME,
    PREVIOUS,
    link_target,
    no_previous_reason,
    replace_symlink,
    staged_versions,
)
from agent.library.validation import Validator
from agent.library.variants import UnservedCheck
from agent.logs import get_logger
from agent.outcomes import VoiceEvent
from agent.settings import Settings
from agent.voice.bundle import installed_voices, resolve_bundle_dir
from agent.voice.memory import trim_heap
from agent.voice.options import VoiceOptions
from agent.voice.voice import Voice, VoiceLoadError

if TYPE_CHECKING:
    from agent.hardware.effective import EffectiveProfile

__all__ = ["ReloadResult", "VoiceLibrary", "VoiceNotFound"]

log = get_logger(__name__)

EventSink = Callable[[VoiceEvent], None]


class VoiceNotFound(LookupError):
    """No installed voice has the requested name (or version)."""


class VoiceLibrary:
    """Installed voices of one models directory, loaded and warm. Thread-safe."""

    def __init__(self, settings: Settings, options: VoiceOptions | None = None,
                 on_event: EventSink | None = None, settle_s: float | None = None) -> None:
        """``options`` are what every voice loads with (default: :func:`voice_options` of
        ``settings`` without a hardware profile); ``options.variant`` is the variant wanted."""
        self.settings = settings
        self.models_dir = settings.models.dir
        self.default_voice = settings.models.default_voice
        self.options = options or voice_options(settings)
        self.on_event = on_event
        self.settle_s = settings.models.debounce_s * 2 if settle_s is None else settle_s
        self._lock = threading.Lock()  # guards _live and _seen
        self._reload_lock = threading.Lock()  # one validation at a time
        self._live: dict[str, Voice] = {}
        self._seen: dict[str, Fingerprint] = {}
        self._last: dict[str, ReloadResult] = {}
        self._pending_since: dict[str, float] = {}
        self._preloaded: dict[str, tuple[Voice | VoiceLoadError, Fingerprint]] = {}
        """Voices validated by :meth:`preload`, waiting for :meth:`get` to swap them in."""
        self._refused: dict[str, tuple[Fingerprint, str]] = {}
        """The files each voice was last refused for, and why: the answer until they change."""
        self._recheck: set[str] = set()  # checked again though unchanged: the trust changed
        self._validator = Validator(settings, self.options)
        self._unserved = UnservedCheck(self._is_current, self._emit)
        self._requantizer = Requantizer(on_done=self._requantized)

    @classmethod
    def for_settings(cls, settings: Settings, on_event: EventSink | None = None,
                     profile: EffectiveProfile | None = None) -> VoiceLibrary:
        """A library whose sessions use the effective hardware ``profile`` (threads, variant;
        :func:`agent.hardware.effective.profile_or_reason`, None: one thread and fp32), its
        voices sharing the device lexicon (:class:`agent.library.lexicon.LexiconHolder`)."""
        lexicon = LexiconHolder.for_settings(settings)
        return cls(settings, voice_options(settings, profile, lexicon=lexicon), on_event=on_event)

    # -- discovery ------------------------------------------------------------------------

    def names(self) -> list[str]:
        """Names of the voices installed and of the live ones (one whose manifest went missing
        keeps serving what is loaded), sorted."""
        installed = installed_voices(self.models_dir) if self.models_dir.is_dir() else []
        with self._lock:
            return sorted(set(installed) | set(self._live))

    def bundle_dir(self, name: str) -> Path:
        """Where voice ``name`` lives (after following a staged ``current`` link)."""
        if not NAME.match(name) or name not in self.names():
            have = ", ".join(self.names()) or "none"
            raise VoiceNotFound(f"no voice named {name!r} (installed: {have})")
        return resolve_bundle_dir(self.models_dir / name)

    # -- serving --------------------------------------------------------------------------

    def get(self, name: str | None = None) -> Voice:
        """The live voice ``name`` (default voice when ``None``), loading it on first use (or
        taking the one :meth:`preload` loaded). Raises VoiceNotFound or VoiceLoadError."""
        name = name or self.default_voice
        with self._lock:
            voice = self._live.get(name)
        if voice is not None:
            return voice
        self._raise_if_refused(name)  # at once, not after a reload in progress
        with self._reload_lock:
            with self._lock:
                voice = self._live.get(name)
            if voice is None:
                preloaded = self._preloaded.pop(name, None)
                if preloaded is None:
                    self._raise_if_refused(name)
                loaded, seen = preloaded if preloaded is not None else self._load(name)
                if isinstance(loaded, VoiceLoadError):
                    self._refuse(name, seen, loaded)
                    raise loaded
                voice = loaded
                self._swap_in(name, voice, seen)
            return voice

    def _raise_if_refused(self, name: str) -> None:
        """Raise the error voice ``name`` was refused with while its files are unchanged."""
        with self._lock:
            refused = self._refused.get(name)
        if refused is not None and fingerprint(self.bundle_dir(name)) == refused[0]:
            raise VoiceLoadError(refused[1])

    def _refuse(self, name: str, seen: Fingerprint, error: VoiceLoadError) -> ReloadResult:
        """Keep ``error`` as the answer for these files of ``name`` (without the host's paths:
        it goes over the network) and report it."""
        said = without_models_dir(error, self.models_dir)
        with self._lock:
            self._seen[name] = seen  # don't retry the same broken files
            self._refused[name] = (seen, said)
            live = self._live.get(name)
        reason = said if live is None else still_serving(error, self.models_dir, live)
        return self._report(ReloadResult(name, "rejected", reason=reason,
                                         version=manifest_version(seen.bundle_dir)))

    def preload(self, name: str | None = None) -> threading.Thread | None:
        """Start loading voice ``name`` (default voice when ``None``) on a helper thread; the
        next :meth:`get` of it waits for that load and swaps the voice in (reporting it then, so
        ``on_event`` may still be set after this call). Returns the thread, or None when there
        is no such voice (``get`` reports that). The daemon calls this before importing the rest
        of itself: onnxruntime loads without the GIL, so imports and load overlap."""
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

    def _load(self, name: str) -> tuple[Voice | VoiceLoadError, Fingerprint]:
        """Validate voice ``name`` as it is on disk now: the voice, or why it was refused."""
        seen = fingerprint(self.bundle_dir(name))
        try:
            return self._validate(name, seen), seen
        except VoiceLoadError as exc:
            return exc, seen

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

    def _reload_one(self, name: str, *, settle: bool = True, force: bool = False,
                    ) -> ReloadResult:
        """Re-check ``name``; ``force`` (an activation): validate it even if no one uses it."""
        try:
            bundle_dir = self.bundle_dir(name)
        except VoiceNotFound as exc:
            with self._lock:
                live = name in self._live
            # A voice directory that vanished keeps serving from memory until it comes back.
            if live:
                return self._report(ReloadResult(name, "rejected", reason=str(exc)))
            return ReloadResult(name, "unchanged")
        seen = fingerprint(bundle_dir)
        skip = self._skip_reason(name, bundle_dir, seen, settle, force)
        if skip is not None:
            return skip
        try:
            voice = self._validate(name, seen)
        except VoiceLoadError as exc:
            return self._refuse(name, seen, exc)
        self._swap_in(name, voice, seen)
        return self._last[name]

    def _skip_reason(self, name: str, bundle_dir: Path, now: Fingerprint,
                     settle: bool, force: bool = False) -> ReloadResult | None:
        """Why ``name`` needs no validation now (unchanged, unused, being written, refused);
        ``force``: a voice not live is always validated."""
        with self._lock:
            seen = self._seen.get(name)
            live_voice = self._live.get(name)
            refused = self._refused.get(name)
            recheck = seen == now and name in self._recheck  # no settling: files unchanged
            self._recheck.discard(name)
        if refused is not None and refused[0] == now:
            return ReloadResult(name, "rejected", reason=refused[1],
                                version=manifest_version(bundle_dir))
        unused = live_voice is None and seen is None and name != self.default_voice
        if not (force and live_voice is None) and ((seen == now and not recheck) or unused):
            return ReloadResult(name, "unchanged")  # unused voices are validated on first use
        settling = time.time_ns() - now.newest_mtime_ns < self.settle_s * 1e9
        if settle and not recheck and (settling or sizes_pending(bundle_dir)):
            since = self._pending_since.setdefault(name, time.monotonic())
            if time.monotonic() - since < self.settings.models.pending_timeout_s:
                return ReloadResult(name, "pending", reason="bundle still being written")
        self._pending_since.pop(name, None)
        if live_voice is not None and self._validator.still_serves(bundle_dir, live_voice):
            with self._lock:
                self._seen[name] = now  # touched, re-copied, or a file it does not serve
                recovered = self._refused.pop(name, None) is not None
            if recovered:  # readable again and still the files it serves: health recovers
                self._last[name] = ReloadResult(name, "unchanged", version=live_voice.version)
            self._unserved.check(name, live_voice, now)
            return ReloadResult(name, "unchanged", version=live_voice.version)
        return None

    def _validate(self, name: str, seen: Fingerprint) -> Voice:
        return self._validator.validate(name, seen.bundle_dir)

    def _swap_in(self, name: str, voice: Voice, seen: Fingerprint) -> None:
        with self._lock:
            old = self._live.get(name)
            self._live[name] = voice
            self._seen[name] = seen
            self._refused.pop(name, None)
        choice = self._validator.choice(voice)
        self._report(ReloadResult(name, "loaded", version=voice.version,
                                  signed_by=self.signed_by(voice)), voice=voice, replaced=old,
                     variant_reason=choice.reason if choice else None)
        self._unserved.check(name, voice, seen)
        if choice is not None and choice.stale and self.settings.models.requantize_stale:
            self._requantizer.start(name, voice.bundle.dir)
        if old is not None:
            # Requests still holding the old voice keep it alive; whatever is already free
            # goes back to the OS now instead of piling up over reloads.
            del old
            trim_heap()

    def _report(self, result: ReloadResult, voice: Voice | None = None,
                replaced: Voice | None = None, variant_reason: str | None = None,
                ) -> ReloadResult:
        self._last[result.voice] = result
        self._emit(model_event(result, voice, replaced, variant_reason))
        return result

    def _emit(self, event: VoiceEvent) -> None:
        if self.on_event is not None:
            try:
                self.on_event(event)
            except Exception:  # a broken sink must not break the lifecycle
                log.exception("model_event_sink_failed")

    def close(self) -> None:
        """Stop background work that outlives a call (a re-quantizer run); the daemon's stop."""
        self._requantizer.close()

    def _requantized(self, name: str) -> None:
        """Thread ``requantize``: the bundle was rewritten whole (renamed into place)."""
        with self._reload_lock:
            self._reload_one(name, settle=False)

    def _is_current(self, name: str, voice: Voice, seen: Fingerprint) -> bool:
        """``voice`` is still live as ``name`` and its files are still those of ``seen``."""
        with self._lock:
            return self._live.get(name) is voice and self._seen.get(name) == seen

    def retrust(self, paths: Sequence[Path], required: bool) -> str | None:
        """Apply changed trusted keys (SIGHUP; :meth:`Validator.retrust`): the next :meth:`reload`
        checks every live voice again (one no longer trusted keeps serving, rejected)."""
        with self._reload_lock:
            changed = self._validator.retrust(paths, required)
            if changed is not None:
                with self._lock:
                    self._recheck = set(self._seen)
                    self._refused.clear()
        return changed

    def signed_by(self, voice: Voice) -> str | None:
        """The id of the trusted key that signed ``voice``; None for an unsigned one."""
        return self._validator.signed_by(voice)

    # -- staged versions ------------------------------------------------------------------

    def versions(self, name: str) -> list[str]:
        """Versions of a staged voice (sub-directories with a manifest), sorted by name."""
        voice_dir = self.models_dir / name
        if not NAME.match(name) or not voice_dir.is_dir():
            raise VoiceNotFound(f"no voice named {name!r}")
        return staged_versions(voice_dir)

    def activate(self, name: str, version: str, *, remember: bool = True) -> ReloadResult:
        """Point the staged voice ``name`` at ``version`` and validate it now, in use or not
        (the one decision of ``models activate`` and the ``reload`` command); the old target
        becomes ``previous`` unless ``remember`` is false (:meth:`rollback`). ``rejected``:
        ``current`` is switched back (removed when there was none), so it always names a
        version that passed, and a voice unused before stays unused."""
        if not NAME.match(version) or version not in self.versions(name):
            raise VoiceNotFound(f"voice {name!r} has no version {version!r} "
                                f"(has: {', '.join(self.versions(name)) or 'none'})")
        current = self.models_dir / name / CURRENT
        with self._reload_lock:
            before = link_target(current)
            with self._lock:
                was_live = name in self._live
            if before != version:
                replace_symlink(current, version)
            result = self._reload_one(name, settle=False, force=True)
            if result.outcome != "rejected":
                if before not in (None, version) and remember:
                    replace_symlink(current.with_name(PREVIOUS), str(before))
            elif before != version:
                replace_symlink(current, before) if before else current.unlink(missing_ok=True)
                if was_live:
                    self._reload_one(name, settle=False)
                else:
                    with self._lock:
                        self._seen.pop(name, None)  # validated on first use again, not now
        return result

    def rollback(self, name: str | None = None) -> ReloadResult:
        """Go back to the version live before the last :meth:`activate`, once: a rollback
        clears ``previous``, so a second one is refused instead of going forward again."""
        name = name or self.default_voice
        if not NAME.match(name) or not (self.models_dir / name).is_dir():
            raise VoiceNotFound(f"no such voice {name!r}")
        target = link_target(self.models_dir / name / PREVIOUS)
        if target is None:
            raise VoiceNotFound(no_previous_reason(self.models_dir / name))
        result = self.activate(name, target, remember=False)
        if result.outcome != "rejected":
            (self.models_dir / name / PREVIOUS).unlink(missing_ok=True)
        return result

    def status(self) -> dict[str, Any]:
        """Loaded voices and the last reload result of each, for health reports."""
        voices = [
            {"voice": v.name, "version": v.version, "variant": v.variant, "sha256": v.sha256,
             "loaded_at": v.loaded_at, "provider": v.provider, "sample_rate": v.sample_rate,
             "streaming": v.streaming, "session_cache": v.engine.cache,
             "signed_by": self.signed_by(v),
             "text_rules": getattr(v.frontend.normalizer, "language", None),
             "problems": self._validator.problems(v) + self._unserved.problems(v.name)}
            for v in self.loaded()
        ]
        return {"voices": voices, "default": self.default_voice, "installed": self.names(),
                "last_reload": {k: r.as_dict() for k, r in sorted(self._last.items())}}
