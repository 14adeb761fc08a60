"""Where a voice's model comes from while it loads: the file held open, hashed on a helper
thread, read into memory only when the optimised-model cache lacks what the session needs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

from agent.voice.bundle import Bundle, ModelFacts, check_model, read_model, verify_model

__all__ = ["ModelSource"]


@dataclass(frozen=True, slots=True)
class ModelSource:
    """How a voice gets at its model file, held open (``handle``) or opened per call."""

    bundle: Bundle
    variant: str
    handle: BinaryIO | None = None
    checked_by: Callable[[], object] | None = None
    """Waits for a check already under way (a helper thread hashing ``handle``; it raises
    :class:`BundleError` for a mismatch); None = check here."""

    def checked(self) -> None:
        """Return once the model matched its manifest sha256; raises :class:`BundleError`."""
        if self.checked_by is not None:
            self.checked_by()
        else:
            check_model(self.bundle, self.variant, self.handle)

    def read(self) -> tuple[bytes, ModelFacts]:
        """The model's bytes, matched to its sha256, and their facts (a cache miss)."""
        self._idle()
        return read_model(self.bundle, self.variant, self.handle)

    def facts(self) -> ModelFacts:
        """The model's facts, scanned in a streamed pass that matched it to its sha256."""
        self._idle()
        return verify_model(self.bundle, self.variant, self.handle)

    def _idle(self) -> None:
        if self.checked_by is not None:  # the handle is the hashing thread's until it is done
            self.checked_by()
