"""Deployment settings: one frozen object read once from a TOML file and the environment.

One module per TOML section; :mod:`agent.settings.load` reads them, :mod:`agent.settings.errors`
words the problems, :mod:`agent.settings.paths` holds the defaults that depend on where the agent
runs. How to configure a device: docs/configuration.md.
"""

from agent.settings.audio import AudioSettings, effective_audio
from agent.settings.base import NAME_PATTERN
from agent.settings.cache import CacheSettings
from agent.settings.chimes import CHIME_NAME_PATTERN, ChimeSettings
from agent.settings.errors import ConfigError
from agent.settings.health import HealthSettings
from agent.settings.load import load_settings
from agent.settings.log import LogSettings
from agent.settings.models import ModelSettings
from agent.settings.mqtt import JournalSettings, MqttSettings
from agent.settings.root import DEFAULT_CONFIG_PATH, OTHER_VARIABLES, Settings
from agent.settings.synthesis import SynthesisSettings
from agent.settings.text import TextSettings
from agent.settings.wyoming import WyomingSettings

__all__ = [
    "CHIME_NAME_PATTERN",
    "DEFAULT_CONFIG_PATH",
    "NAME_PATTERN",
    "OTHER_VARIABLES",
    "AudioSettings",
    "CacheSettings",
    "ChimeSettings",
    "ConfigError",
    "HealthSettings",
    "JournalSettings",
    "LogSettings",
    "ModelSettings",
    "MqttSettings",
    "Settings",
    "SynthesisSettings",
    "TextSettings",
    "WyomingSettings",
    "effective_audio",
    "load_settings",
]
