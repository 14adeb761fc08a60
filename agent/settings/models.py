"""The ``[models]`` section: where voices live, the default voice, signatures."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from agent.settings.base import NAME_PATTERN, Section
from agent.settings.paths import AbsPath, default_model_dir


class ModelSettings(Section):
    dir: AbsPath = Field(
        default_factory=default_model_dir,
        description="Directory holding voice bundles (models/<voice>/ or models/<voice>/current/).",
    )
    default_voice: str = Field(
        default="en_US-joe-medium",
        pattern=NAME_PATTERN,
        description="Voice used when a request names none.",
    )
    variant: Literal["auto", "fp32", "int8"] = Field(
        default="auto",
        description="Model variant to load; auto lets the hardware profile choose.",
    )
    watch: bool = Field(default=True, description="Hot-reload voices when their files change.")
    watch_polling: bool = Field(
        default=False,
        description="Use the polling observer (filesystems without inotify).",
    )
    debounce_s: float = Field(
        default=1.0, ge=0.0, le=60.0,
        description="Quiet time after the last file event before a reload is attempted (s).",
    )
    pending_timeout_s: float = Field(
        default=60.0, ge=0.0, le=3600.0,
        description="How long a bundle may look half-written (sizes not matching its manifest) "
        "before it is validated anyway and rejected (s).",
    )
    max_model_bytes: int = Field(  # = agent.voice.bundle.DEFAULT_MAX_FILE_BYTES
        default=256 << 20, ge=1 << 20, le=4 << 30, description="Largest file a voice bundle may "
        "have (bytes), refused before it is read; keep it well under the unit's MemoryMax "
        "(onnxruntime holds a model more than once).")
    trusted_keys: tuple[AbsPath, ...] = Field(default=(), description="ed25519 public keys (PEM).")
    require_signature: bool = Field(default=False, description="Refuse unsigned voices.")
    requantize_stale: bool = Field(default=False, description=(
        "Rebuild a stale int8 variant (its fp32 source changed) in the background with tts-agent "
        "quantize at the lowest CPU priority; fp32 serves meanwhile. Only on boards that can "
        "afford it: it runs in the service's cgroup (MemoryMax)."))
    @model_validator(mode="after")
    def _trust_usable(self) -> ModelSettings:  # reads the key files, if any are set
        if self.trusted_keys or self.require_signature:
            from agent.voice.signature import check_trust_settings
            check_trust_settings(self)
        return self

