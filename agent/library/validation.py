"""What a bundle must pass before it serves, and what the library learns on the way.

:meth:`Validator.validate` runs the checks in order: the signature over the manifest
(:mod:`agent.voice.signature`; nothing of the bundle is used before it verified), the variant to
load (:func:`agent.library.variants.choose_variant`: a stale int8 is not served), then
:meth:`agent.voice.voice.Voice.load` (sizes and sha256, onnxruntime, Piper's inputs, sample
rates, a warm-up) and the library's own plausibility checks. The signature and the variant
choice of each voice it passed are kept for the events and the health report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from weakref import WeakKeyDictionary

from agent.library.fingerprint import same_files
from agent.library.variants import VariantChoice, choose_variant
from agent.logs import get_logger
from agent.settings import Settings
from agent.voice.bundle import BundleError, read_manifest
from agent.voice.options import VoiceOptions
from agent.voice.signature import SignatureError, Signed, TrustPolicy
from agent.voice.voice import Voice, VoiceLoadError

__all__ = ["MAX_WARMUP_S", "MIN_WARMUP_S", "Validator"]

log = get_logger(__name__)

MIN_WARMUP_S, MAX_WARMUP_S = 0.03, 5.0  # "Ready." spoken in a plausible time


class Validator:
    """Validates bundles for one library (its settings and load options). Thread-safe for
    the library's use: validations run one at a time under its reload lock."""

    def __init__(self, settings: Settings, options: VoiceOptions) -> None:
        self.settings = settings
        self.options = options
        self._trust = TrustPolicy.from_files(settings.models.trusted_keys,
                                             settings.models.require_signature)
        self._signed: WeakKeyDictionary[Voice, Signed] = WeakKeyDictionary()
        """The verified signature of each signed voice (see :mod:`agent.voice.signature`)."""
        self._choices: WeakKeyDictionary[Voice, VariantChoice] = WeakKeyDictionary()
        """The variant choice each voice was loaded with."""
        self._checked_by: WeakKeyDictionary[Voice, TrustPolicy] = WeakKeyDictionary()
        """The trust policy each voice last passed (a changed policy re-checks it)."""

    def retrust(self, paths: Sequence[Path], required: bool) -> str | None:
        """Replace the trust policy (SIGHUP with changed ``models.trusted_keys``): what changed,
        None when nothing did. Raises SignatureError (the policy in force is kept)."""
        new = TrustPolicy.from_files(paths, required)
        if (new.key_ids, new.required) == (self._trust.key_ids, self._trust.required):
            return None
        self._trust = new
        keys = ", ".join(new.key_ids) or "none"
        log.warning("trusted_keys_changed", keys=new.key_ids, required=required)
        return f"trusted keys now {keys}{' (required)' if required else ''}"

    def validate(self, name: str, bundle_dir: Path) -> Voice:
        """The voice in ``bundle_dir``, loaded and warm; raises :class:`VoiceLoadError`."""
        try:  # first: nothing of a bundle is used before its signature verified
            signed = self._trust.check(bundle_dir)
        except SignatureError as exc:
            raise VoiceLoadError(str(exc)) from exc
        choice = self.choose(bundle_dir)
        options = replace(self.options, variant=choice.variant)
        try:
            voice = Voice.load(bundle_dir, options)
            if signed is not None:
                signed.confirm(voice.bundle)  # the manifest it loaded is the signed one
                self._signed[voice] = signed
            self._checked_by[voice] = self._trust
        except VoiceLoadError:
            raise
        except Exception as exc:  # anything else a broken bundle can provoke
            raise VoiceLoadError(f"{bundle_dir}: {exc}") from exc
        if voice.name != name:
            raise VoiceLoadError(f"{bundle_dir}: manifest names voice {voice.name!r}, "
                                 f"directory is {name!r}")
        warmup_audio_s = voice.warmup_audio_s
        if not MIN_WARMUP_S <= warmup_audio_s <= MAX_WARMUP_S:
            raise VoiceLoadError(f"{name}: warm-up audio lasted {warmup_audio_s:.2f} s, "
                                 f"not a plausible length for {voice.warmup_text!r}")
        self._choices[voice] = choice
        return voice

    def choose(self, bundle_dir: Path) -> VariantChoice:
        """The variant to load from ``bundle_dir``: :func:`choose_variant` of its manifest."""
        wanted = self.options.variant
        try:
            manifest = read_manifest(bundle_dir)
        except BundleError:
            return VariantChoice(wanted)  # the load says what is wrong with it
        choice = choose_variant(manifest, wanted, auto=self.settings.models.variant == "auto")
        if choice.variant != wanted:
            log.warning("variant_unavailable", wanted=wanted, using=choice.variant,
                        dir=str(bundle_dir), reason=choice.reason)
        return choice

    def still_serves(self, bundle_dir: Path, live: Voice) -> bool:
        """True when ``bundle_dir`` would give ``live`` again: the files it serves are byte
        for byte the same, so is its signature, and the same variant would be chosen."""
        return (same_files(bundle_dir, live.bundle)
                and self._trust.unchanged(bundle_dir, self._signed.get(live))
                and self._still_trusted(bundle_dir, live)
                and self.choose(bundle_dir).variant == live.variant)

    def _still_trusted(self, bundle_dir: Path, live: Voice) -> bool:
        """True when ``live`` (its unchanged files in ``bundle_dir``) passes the trust policy
        in force, checked again once after the policy changed."""
        if self._checked_by.get(live) is self._trust:
            return True
        try:
            signed = self._trust.check(bundle_dir)
        except SignatureError as exc:
            log.warning("voice_no_longer_trusted", voice=live.name, reason=str(exc))
            return False
        if signed is not None:
            self._signed[live] = signed
        else:
            self._signed.pop(live, None)
        self._checked_by[live] = self._trust
        return True

    def signed_by(self, voice: Voice) -> str | None:
        """The id of the trusted key that signed ``voice``; None for an unsigned one."""
        signed = self._signed.get(voice)
        return signed.key_id if signed is not None else None

    def choice(self, voice: Voice) -> VariantChoice | None:
        """The variant choice ``voice`` was loaded with (None: not validated here)."""
        return self._choices.get(voice)

    def problems(self, voice: Voice) -> list[str]:
        """What the health report says of ``voice``'s variant: the stale one it stands in for."""
        choice = self._choices.get(voice)
        return [choice.reason] if choice is not None and choice.stale and choice.reason else []
