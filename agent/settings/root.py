"""The deployment settings as one object: :class:`Settings`, one field per TOML table.

Sources, strongest first: keyword arguments (tests), ``TTS_AGENT_`` environment variables
(``__`` for nesting), the TOML file, defaults. How they are read and checked is in
:mod:`agent.settings.load`; docs/configuration.md is generated from the field descriptions.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from pydantic import Field
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from agent.settings.audio import AudioSettings
from agent.settings.base import NAME_PATTERN
from agent.settings.cache import CacheSettings
from agent.settings.chimes import ChimeSettings
from agent.settings.health import HealthSettings
from agent.settings.log import LogSettings
from agent.settings.models import ModelSettings
from agent.settings.mqtt import MqttSettings
from agent.settings.synthesis import SynthesisSettings
from agent.settings.text import TextSettings
from agent.settings.wyoming import WyomingSettings

DEFAULT_CONFIG_PATH = Path("/etc/tts-agent/agent.toml")
ENV_PREFIX = "TTS_AGENT_"
OTHER_VARIABLES = ("ESPEAK_LIBRARY", "ESPEAK_DATA", "DEMO_START_S", "TEST_*", "BENCH_*")
"""``TTS_AGENT_`` variables that are not settings (espeak-ng's location; how long
``./build.sh demo`` waits; the tests' and benches' switches): after the prefix, these names or
these prefixes (``*``)."""


class Settings(BaseSettings):
    """Everything a deployment can configure."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
        toml_file=None,
    )

    device_id: str = Field(
        default_factory=socket.gethostname, pattern=NAME_PATTERN,
        description="This device's id in topics and events (default: hostname).",
    )
    models: ModelSettings = Field(default_factory=ModelSettings, description="Voice models.")
    synthesis: SynthesisSettings = Field(default_factory=SynthesisSettings,
                                         description="Synthesis.")
    text: TextSettings = Field(default_factory=TextSettings,
                               description="Reading request text.")
    cache: CacheSettings = Field(default_factory=CacheSettings, description="Caches.")
    chimes: ChimeSettings = Field(default_factory=ChimeSettings,
                                  description="Chimes before announcements.")
    audio: AudioSettings = Field(default_factory=AudioSettings, description="ALSA output.")
    mqtt: MqttSettings = Field(default_factory=MqttSettings, description="MQTT channel.")
    health: HealthSettings = Field(default_factory=HealthSettings, description="Health reports.")
    log: LogSettings = Field(default_factory=LogSettings, description="Logging.")
    wyoming: WyomingSettings = Field(default_factory=WyomingSettings,
                                     description="Wyoming TTS server (Home Assistant).")
    profile: str | None = Field(
        default=None, pattern=NAME_PATTERN,
        description="Hardware profile name; unset = detect from the system.",
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, TomlConfigSettingsSource(settings_cls))

    def masked(self) -> dict[str, Any]:
        """The effective settings as JSON-able data, secrets masked."""
        return self.model_dump(mode="json")  # SecretStr dumps as "**********"
