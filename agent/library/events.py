"""What the library reports: a :class:`ReloadResult` per reload attempt of a voice, the
``model_loaded`` / ``model_rejected`` events made of them, and ``model_damaged`` when a file of
a live voice's bundle that it does not serve is damaged: each a typed
:class:`agent.outcomes.VoiceEvent` (the service publishes all three)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.logs import get_logger
from agent.outcomes import VoiceEvent, VoiceEventKind

if TYPE_CHECKING:
    from agent.voice.voice import Voice

__all__ = ["ReloadResult", "damage_event", "model_event", "still_serving", "without_models_dir"]

log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class ReloadResult:
    """The outcome of one reload attempt of one voice."""

    voice: str
    outcome: str
    """``loaded``, ``rejected``, ``unchanged`` or ``pending`` (bundle still being written)."""
    version: str | None = None
    reason: str | None = None
    at: float = field(default_factory=time.time)
    signed_by: str | None = None
    """Of a ``loaded`` voice: the id of the trusted key that signed it (None: unsigned)."""

    def as_dict(self) -> dict[str, Any]:
        return {"voice": self.voice, "outcome": self.outcome, "version": self.version,
                "reason": self.reason, "at": self.at, "signed_by": self.signed_by}


def model_event(result: ReloadResult, voice: Voice | None = None,
                replaced: Voice | None = None, variant_reason: str | None = None,
                ) -> VoiceEvent:
    """The event for ``result``, logged: ``model_loaded`` with the facts of ``voice`` (the one
    swapped in; ``replaced`` the one it replaced; ``variant_reason`` why it serves this variant
    or what is known of its provenance), else ``model_rejected`` with the reason."""
    if result.outcome == "loaded" and voice is not None:
        log.info("model_loaded", voice=voice.name, version=voice.version, variant=voice.variant,
                 variant_reason=variant_reason)
        return VoiceEvent(VoiceEventKind.LOADED, voice.name, voice.version,
                          variant=voice.variant, sha256=dict(voice.bundle.sha256),
                          load_s=round(voice.load_s, 3), provider=voice.provider,
                          previous_version=replaced.version if replaced else None,
                          signed_by=result.signed_by, variant_reason=variant_reason)
    log.warning("model_rejected", voice=result.voice, version=result.version,
                reason=result.reason)
    return VoiceEvent(VoiceEventKind.REJECTED, result.voice, result.version,
                      reason=result.reason)


def damage_event(voice: Voice, problems: dict[str, str]) -> VoiceEvent:
    """``model_damaged``, logged: files of ``voice``'s bundle that it does not serve (another
    variant's model) are missing, of the wrong size or do not match their sha256. The voice
    keeps serving; the bundle needs repair before that variant can be served."""
    reason = "; ".join(problems[name] for name in sorted(problems))
    log.warning("model_damaged", voice=voice.name, version=voice.version,
                variant=voice.variant, reason=reason)
    return VoiceEvent(VoiceEventKind.DAMAGED, voice.name, voice.version, reason=reason,
                      variant=voice.variant, files=tuple(sorted(problems)))


def without_models_dir(error: Exception, models_dir: Path) -> str:
    """``error`` said without the host's paths (it goes to health and the events): the files
    named relative to the models directory (``voice/version/file``)."""
    reason = str(error)
    for prefix in sorted({str(models_dir.resolve()), str(models_dir.absolute())}, key=len,
                         reverse=True):
        reason = reason.replace(prefix + "/", "")
    return reason


def still_serving(error: Exception, models_dir: Path, live: Voice) -> str:
    """Why a live voice cannot reload (:func:`without_models_dir`), and that the version loaded
    before keeps serving."""
    return f"{without_models_dir(error, models_dir)}; cannot reload, still serving version " \
           f"{live.version}"
