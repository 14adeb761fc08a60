"""The ``[cache]`` section: the start-up cache and the phrase cache."""

from __future__ import annotations

from pydantic import Field

from agent.settings.base import Section
from agent.settings.paths import AbsPath, default_cache_dir


class CacheSettings(Section):
    dir: AbsPath = Field(
        default_factory=default_cache_dir,
        description="Directory for the phrase cache and optimised-model cache.",
    )
    max_mb: int = Field(default=256, ge=0, le=1_000_000,
                        description="Phrase cache size limit (MiB).")
    warm_phrases: list[str] = Field(
        default_factory=list, max_length=1000,
        description="Phrases pre-synthesized after each model load.",
    )

