"""What resolving the hardware profile reads of the deployment settings, as protocols.

:func:`agent.hardware.effective.resolve_profile` takes any object of this shape;
:class:`agent.settings.Settings` is one. Naming the settings class here instead would make
``hardware`` and ``settings`` import each other (``settings`` uses ``hardware``'s types), see
docs/architecture.md#packages-and-what-they-may-import.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from agent.hardware.runtime import Provider

__all__ = ["AudioInputs", "ProfileInputs", "SynthesisInputs"]


class SynthesisInputs(Protocol):
    """``[synthesis]``: explicit onnxruntime choices (None: the profile decides)."""

    @property
    def intra_op_threads(self) -> int | None: ...
    @property
    def inter_op_threads(self) -> int | None: ...
    @property
    def execution_mode(self) -> str | None: ...
    @property
    def graph_optimization(self) -> str | None: ...
    @property
    def thread_affinity(self) -> str | None: ...
    @property
    def allow_spinning(self) -> bool | None: ...
    @property
    def providers(self) -> Sequence[Provider] | None: ...
    @property
    def profiles_dir(self) -> Path | None: ...
    @property
    def tune_file(self) -> Path | None: ...


class AudioInputs(Protocol):
    """``[audio]``: device and buffering (``model_fields_set``: which were set explicitly)."""

    @property
    def device(self) -> str: ...
    @property
    def period_frames(self) -> int | None: ...
    @property
    def buffer_periods(self) -> int | None: ...
    @property
    def queue_max(self) -> int: ...
    @property
    def model_fields_set(self) -> set[str]: ...


class _Variant(Protocol):
    @property
    def variant(self) -> str: ...


class _Directory(Protocol):
    @property
    def dir(self) -> Path: ...


class ProfileInputs(Protocol):
    """The settings as the profile resolution reads them."""

    @property
    def profile(self) -> str | None:
        """A profile forced by name (None: chosen by the hardware)."""
        ...
    @property
    def synthesis(self) -> SynthesisInputs: ...
    @property
    def audio(self) -> AudioInputs: ...
    @property
    def models(self) -> _Variant: ...
    @property
    def cache(self) -> _Directory: ...
    @property
    def health(self) -> object:
        """Read for ``thermal_limit_c`` when it has one."""
        ...
