"""Settings: file + environment, precedence, strictness, secrets."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent.settings import ConfigError, load_settings


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_and_required_names(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("TTS_AGENT_DEVICE_ID", "TTS_AGENT_MQTT__TOPIC_PREFIX", "TTS_AGENT_AUDIO__DEVICE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("TTS_AGENT_MODELS__DIR", "/srv/voices")
    monkeypatch.setenv("TTS_AGENT_MQTT__HOST", "broker.local")
    monkeypatch.setenv("TTS_AGENT_MQTT__PORT", "8883")
    settings = load_settings(None)
    import socket

    assert settings.device_id == socket.gethostname()
    assert settings.mqtt.topic_prefix == "tts"
    assert settings.audio.device == "default"
    assert settings.models.dir == Path("/srv/voices")
    assert (settings.mqtt.host, settings.mqtt.port) == ("broker.local", 8883)


def test_environment_overrides_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = write(tmp_path / "a.toml", 'device_id = "kiosk-1"\n[mqtt]\nport = 1884\nhost = "h"\n')
    monkeypatch.setenv("TTS_AGENT_MQTT__PORT", "1999")
    settings = load_settings(config)
    assert settings.device_id == "kiosk-1"
    assert settings.mqtt.host == "h"
    assert settings.mqtt.port == 1999


@pytest.mark.parametrize(
    ("toml", "needle"),
    [
        ("[mqtt]\nbogus = 1\n", "mqtt.bogus"),
        ("typo_top = 1\n", "typo_top"),
        ("[mqtt]\nport = 70000\n", "mqtt.port"),
        ("[audio]\nvolume = 1.5\n", "audio.volume"),
        ('device_id = "a/b"\n', "device_id"),
        ('[mqtt]\ngroups = ["lobby/#"]\n', "mqtt.groups"),
        ("[mqtt\n", "invalid TOML"),
    ],
)
def test_bad_config_is_a_clear_error(tmp_path: Path, toml: str, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(write(tmp_path / "bad.toml", toml))
    assert needle in str(info.value)


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_settings(tmp_path / "nope.toml")


def test_password_file_from_credentials_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "mqtt-password", "s3cret\n")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path))
    config = write(tmp_path / "c.toml", '[mqtt]\nusername = "u"\npassword_file = "mqtt-password"\n')
    settings = load_settings(config)
    secret = settings.mqtt.resolved_password()
    assert secret is not None and secret.get_secret_value() == "s3cret"


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run([sys.executable, "-m", "agent", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=60, check=False)


def test_check_config_prints_masked_settings(tmp_path: Path) -> None:
    config = write(tmp_path / "c.toml", '[mqtt]\nusername = "u"\npassword = "hunter2"\n')
    result = run_cli("check-config", "--config", str(config))
    assert result.returncode == 0, result.stderr
    assert "hunter2" not in result.stdout
    data = json.loads(result.stdout)
    assert data["mqtt"]["username"] == "u"
    assert data["mqtt"]["password"] == "**********"  # noqa: S105


def test_check_config_reports_errors_with_nonzero_exit(tmp_path: Path) -> None:
    config = write(tmp_path / "c.toml", "[audio]\nvolume = 3\n")
    result = run_cli("check-config", "--config", str(config))
    assert result.returncode != 0
    assert "audio.volume" in result.stderr
    assert "Traceback" not in result.stderr
