"""The ``[mqtt]`` and ``[mqtt.journal]`` sections of the deployment settings.

Every field has a description and its bounds; unknown keys are errors.
"""

from __future__ import annotations

from typing import Literal

from pydantic import (
    Field,
    SecretStr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from agent.settings.base import Section
from agent.settings.paths import AbsPath, SecretPath

__all__ = ["JournalSettings", "MqttSettings"]


_PREFIX_PATTERN = r"^[A-Za-z0-9_-][A-Za-z0-9_/-]{0,63}$"
"""A topic prefix: one or more levels, no wildcards, no leading ``$`` or ``/``."""
MAX_TOPIC_SLASHES = 7
"""Slashes a topic may have on the tightest common broker (AWS IoT Core; agent.mqtt.limits)."""
_BELOW_PREFIX = {"topic_prefix": 4, "ha_prefix": 3}
"""Slashes the deepest topic adds below each prefix: ``{prefix}/group/{group}/cmd/{name}`` and
``{ha_prefix}/device/{node}/config`` (``tests/unit/test_broker_limits.py`` builds them all)."""
DEFAULT_SYNC_LEAD_S = 3.0
"""The lead from now to a synchronized start when nothing says what the members need (s):
``send --sync`` with no member's health, and Home Assistant's group entity by default."""
MAX_SYNC_LEAD_S = 3600.0
"""As far ahead as a synchronized start may be (agent.pipeline.admit.MAX_START_AHEAD_S)."""
MAX_GROUP_LENGTH = 64
"""Longest group name: with the longest prefix and command, a group topic stays within the
256 bytes AWS IoT Core allows."""


class JournalSettings(Section):
    """The request journal (:mod:`agent.mqtt.journal`; not systemd's journal)."""

    enabled: bool = Field(
        default=True, description="Keep accepted, unfinished speak requests on disk, so that each "
        "gets its final event after a crash (`failed`, `agent restarted`, unless replayed).")
    file: AbsPath | None = Field(
        default=None, description="The journal file; default "
        "<cache.dir>/devices/<device_id>/requests.journal.")
    replay: bool = Field(
        default=False, description="After a crash, play again each journalled request that had "
        "not begun and has not expired (the text is then kept in the journal).")
    max_entries: int = Field(
        default=1024, ge=1, le=100_000, description="Most unfinished requests journalled; a "
        "speak request beyond it is rejected (busy).")
    max_bytes: int = Field(
        default=4 * 1024 * 1024, ge=4096, le=1 << 30, description="Most bytes of unfinished "
        "requests journalled; a speak request beyond it is rejected (busy).")


class MqttSettings(Section):
    enabled: bool = Field(default=True, description="Connect to an MQTT broker.")
    host: str = Field(default="localhost", min_length=1, max_length=253, description="Broker host.")
    port: int = Field(default=1883, ge=1, le=65535, description="Broker port.")
    topic_prefix: str = Field(
        default="tts", pattern=_PREFIX_PATTERN,
        description="First level(s) of every topic, at most 4; no wildcards.",
    )
    protocol: Literal["5", "3.1.1"] = Field(default="5", description="MQTT protocol version.")
    client_id: str | None = Field(
        default=None, max_length=128, description="Client id; default tts-agent-<device_id>."
    )
    keepalive_s: int = Field(default=30, ge=5, le=3600, description="MQTT keepalive (s).")
    session_expiry_s: int = Field(
        default=3600, ge=0, le=2**32 - 1,
        description="Persistent session lifetime after a disconnect (s), MQTT 5.",
    )
    username: str | None = Field(default=None, max_length=256, description="Broker user name.")
    password: SecretStr | None = Field(default=None,
                                       description="Broker password (prefer password_file).")
    password_file: SecretPath | None = Field(
        default=None,
        description="File holding the broker password; relative to $CREDENTIALS_DIRECTORY if set.",
    )
    tls: bool = Field(default=False, description="Connect with TLS.")
    ca_file: AbsPath | None = Field(default=None,
                                    description="CA bundle used to verify the broker.")
    cert_file: AbsPath | None = Field(default=None, description="Client certificate (mutual TLS).")
    key_file: AbsPath | None = Field(default=None, description="Client private key (mutual TLS).")
    groups: list[str] = Field(
        default_factory=list, max_length=32,
        description="Group names whose command topics this device also follows (each at most "
                    "64 bytes).",
    )
    hermes: bool = Field(default=True, description="Speak Hermes (Rhasspy/Snips) hermes/tts/say.")
    site_id: str | None = Field(
        default=None, max_length=128, description="Hermes site id; default the device id."
    )
    max_payload_bytes: int = Field(
        default=65536, ge=256, le=10_000_000, description="Largest command payload accepted."
    )
    intake_queue: int = Field(
        default=256, ge=1, le=100_000, description="Commands buffered between network and workers."
    )
    reconnect_min_s: float = Field(
        default=1.0, gt=0, le=60,
        description="Longest wait between reconnect attempts in the first seconds of an "
                    "outage (s, jittered); later waits double from it up to reconnect_max_s.")
    reconnect_max_s: float = Field(default=60.0, gt=0, le=3600,
                                   description="Longest reconnect delay (s).")
    connect_timeout_s: float = Field(default=5.0, gt=0, le=600, description=(
        "Longest wait for the TCP connect and TLS handshake to the broker (s)."))
    progress_interval_s: float = Field(default=5.0, ge=1.0, le=3600, description=(
        "An open speak request quiet this long gets a `progress` event (s); at most one per "
        "request per interval."))
    journal: JournalSettings = Field(default_factory=JournalSettings,
                                     description="The request journal.")
    ha_discovery: bool = Field(default=False, description=(
        "Announce the device to Home Assistant through MQTT discovery (docs/home-assistant.md); "
        "switched off, a discovery message this agent published before is removed."))
    ha_prefix: str = Field(
        default="homeassistant", pattern=_PREFIX_PATTERN,
        description="Home Assistant's discovery prefix (its MQTT integration's setting); "
                    "no wildcards, apart from topic_prefix.")
    ha_device_name: str | None = Field(
        default=None, min_length=1, max_length=64,
        description="The device's name in Home Assistant; default the device id.")
    ha_priority: Literal["low", "normal", "high", "urgent"] = Field(
        default="normal", description="Priority of a plain-text message from Home Assistant's "
        "notify entity (a JSON speak command sent there carries its own).")
    ha_group_lead_s: float = Field(
        default=DEFAULT_SYNC_LEAD_S, gt=0, le=MAX_SYNC_LEAD_S, description="Seconds from "
        "Home Assistant's message to the synchronized start of a group entity's speech "
        "(docs/home-assistant.md#group-speech); every member of a group must agree.")

    @field_validator("groups")
    @classmethod
    def _check_groups(cls, groups: list[str]) -> list[str]:
        for group in groups:
            if not group or any(c in group for c in "/+#\0"):
                raise ValueError(f"group name {group!r} must be non-empty and free of / + #")
            if len(group.encode("utf-8", errors="replace")) > MAX_GROUP_LENGTH:
                raise ValueError(f"group name {group[:20]!r}... is longer than "
                                 f"{MAX_GROUP_LENGTH} bytes")
        return groups

    @field_validator("topic_prefix", "ha_prefix")
    @classmethod
    def _check_depth(cls, prefix: str, info: ValidationInfo) -> str:
        below = _BELOW_PREFIX[str(info.field_name)]
        if prefix.count("/") + below > MAX_TOPIC_SLASHES:
            raise ValueError(
                f"{info.field_name} {prefix!r} has {prefix.count('/') + 1} levels; at most "
                f"{MAX_TOPIC_SLASHES - below + 1}, so that the deepest topic under it keeps within "
                f"{MAX_TOPIC_SLASHES} slashes (AWS IoT Core's limit; docs/fleet.md)")
        return prefix

    @model_validator(mode="after")
    def _check_tls(self) -> MqttSettings:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("cert_file and key_file must be given together")
        if self.password is not None and self.password_file is not None:
            raise ValueError("give password or password_file, not both")
        return self

    @model_validator(mode="after")
    def _check_ha_prefix(self) -> MqttSettings:
        if self.ha_prefix.endswith("/") or "//" in self.ha_prefix:
            raise ValueError(f"ha_prefix {self.ha_prefix!r} has an empty topic level")
        ours, theirs = self.topic_prefix + "/", self.ha_prefix + "/"
        if ours.startswith(theirs) or theirs.startswith(ours):
            raise ValueError(f"ha_prefix {self.ha_prefix!r} and topic_prefix "
                             f"{self.topic_prefix!r} must not contain each other")
        return self

    def resolved_password(self) -> SecretStr | None:
        """The broker password, reading ``password_file`` (made absolute at load)."""
        if self.password_file is None:
            return self.password
        return SecretStr(self.password_file.read_text(encoding="utf-8").rstrip("\r\n"))
