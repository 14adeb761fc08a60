"""Deployment settings: one object, read once, from a TOML file and the environment.

Sources, strongest first: keyword arguments (tests), environment variables
(``TTS_AGENT_`` prefix, ``__`` for nesting, e.g. ``TTS_AGENT_MQTT__PORT``), the TOML
file (``--config``, default ``/etc/tts-agent/agent.toml`` when it exists), defaults.
Unknown keys are errors so a typo never silently falls back to a default.

Secrets are :class:`pydantic.SecretStr` (masked when printed) and may be read from
files, e.g. systemd credentials in ``$CREDENTIALS_DIRECTORY``.
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

from agent.settings_sections import (
    NAME_PATTERN,
    AudioSettings,
    CacheSettings,
    HealthSettings,
    LogSettings,
    ModelSettings,
    MqttSettings,
    SynthesisSettings,
)

__all__ = [
    "DEFAULT_CONFIG_PATH",
    "AudioSettings",
    "CacheSettings",
    "ConfigError",
    "HealthSettings",
    "LogSettings",
    "ModelSettings",
    "MqttSettings",
    "Settings",
    "SynthesisSettings",
    "load_settings",
]

DEFAULT_CONFIG_PATH = Path("/etc/tts-agent/agent.toml")
ENV_PREFIX = "TTS_AGENT_"


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
    cache: CacheSettings = Field(default_factory=CacheSettings, description="Caches.")
    audio: AudioSettings = Field(default_factory=AudioSettings, description="ALSA output.")
    mqtt: MqttSettings = Field(default_factory=MqttSettings, description="MQTT channel.")
    health: HealthSettings = Field(default_factory=HealthSettings, description="Health reports.")
    log: LogSettings = Field(default_factory=LogSettings, description="Logging.")
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


class ConfigError(Exception):
    """The configuration could not be read or is invalid."""


def load_settings(config: Path | None = None, **overrides: Any) -> Settings:
    """Read the settings from ``config`` (or the default file when it exists) and the environment.

    Raises :class:`ConfigError` with a readable message for a missing/unreadable file,
    bad TOML, or fields that fail validation.
    """
    import tomllib

    from pydantic import ValidationError

    path = config
    if path is None and DEFAULT_CONFIG_PATH.is_file():
        path = DEFAULT_CONFIG_PATH
    if path is not None:
        if not path.is_file():
            raise ConfigError(f"config file not found: {path}")
        try:
            tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read config file {path}: {exc}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: invalid TOML: {exc}") from exc

    class _FileSettings(Settings):
        model_config = SettingsConfigDict(toml_file=path)

    try:
        return _FileSettings(**overrides)
    except ValidationError as exc:
        where = f" in {path} or the environment" if path else " in the environment"
        lines = [f"invalid settings{where}:"]
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"]) or "(root)"
            lines.append(f"  {loc}: {err['msg']}")
        raise ConfigError("\n".join(lines)) from exc
