"""Settings: file + environment, precedence, strictness, secrets."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agent.settings import ConfigError, load_settings
from agent.settings.errors import unknown_variables
from tests.support import REPO
from tests.support.cli import in_process


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


def test_check_config_prints_masked_settings(tmp_path: Path) -> None:
    config = write(tmp_path / "c.toml", '[mqtt]\nusername = "u"\npassword = "hunter2"\n')
    result = in_process("check-config", "--config", str(config))
    assert result.returncode == 0, result.stderr
    assert "hunter2" not in result.stdout
    data = json.loads(result.stdout)
    assert data["mqtt"]["username"] == "u"
    assert data["mqtt"]["password"] == "**********"  # noqa: S105


def test_check_config_reports_errors_with_nonzero_exit(tmp_path: Path) -> None:
    config = write(tmp_path / "c.toml", "[audio]\nvolume = 3\n")
    result = in_process("check-config", "--config", str(config))
    assert result.returncode != 0
    assert "audio.volume" in result.stderr
    assert "Traceback" not in result.stderr


def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for key in list(os.environ):
        if key.upper().startswith("TTS_AGENT_"):
            monkeypatch.delenv(key)


def test_relative_paths_are_absolute_once_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    clean_environment(monkeypatch)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    config = write(tmp_path / "c.toml", '[models]\ndir = "voices"\n[cache]\ndir = "c"\n'
                   '[mqtt]\nca_file = "ca.pem"\npassword_file = "pw"\n'
                   '[health]\nprometheus_file = "m/x.prom"\n')
    settings = load_settings(config)
    assert settings.models.dir == tmp_path / "voices"
    assert settings.cache.dir == tmp_path / "c"
    assert settings.mqtt.ca_file == tmp_path / "ca.pem"
    assert settings.mqtt.password_file == tmp_path / "pw"
    assert settings.health.prometheus_file == tmp_path / "m" / "x.prom"
    monkeypatch.chdir("/")  # resolved once: a later change of directory changes nothing
    assert settings.models.dir == tmp_path / "voices"


def test_a_relative_password_file_is_in_the_credentials_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    clean_environment(monkeypatch)
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path / "creds"))
    settings = load_settings(write(tmp_path / "c.toml", '[mqtt]\npassword_file = "pw"\n'))
    assert settings.mqtt.password_file == tmp_path / "creds" / "pw"


def test_defaults_in_a_checkout_do_not_depend_on_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Run from this checkout (as root or not): its models/ and its .cache/, never a system
    directory."""
    from tests.support import REPO

    clean_environment(monkeypatch)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CACHE_DIRECTORY", "/var/cache/tts-agent")
    settings = load_settings(None)
    assert settings.models.dir == REPO / "models"
    assert settings.cache.dir == REPO / ".cache" / "tts-agent"


def test_defaults_of_an_installed_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from agent.settings import paths as settings_paths

    clean_environment(monkeypatch)
    monkeypatch.setattr(settings_paths, "checkout_root", lambda: None)  # as in site-packages
    monkeypatch.delenv("CACHE_DIRECTORY", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    settings = load_settings(None)
    assert settings.models.dir == Path("/var/lib/tts-agent/models")
    assert settings.cache.dir == (Path("/var/cache/tts-agent") if os.geteuid() == 0
                                  else tmp_path / "xdg" / "tts-agent")
    monkeypatch.setenv("CACHE_DIRECTORY", str(tmp_path / "unit-cache"))
    assert load_settings(None).cache.dir == tmp_path / "unit-cache"
    assert "installed" in settings_paths.path_rule()


@pytest.mark.parametrize(
    ("variable", "line"),
    [
        ("TTS_AGENT_DEVICEID", "TTS_AGENT_DEVICEID: unknown setting "
                               "(did you mean TTS_AGENT_DEVICE_ID?)"),
        ("TTS_AGENT_MQTT_HOST", "TTS_AGENT_MQTT_HOST: unknown setting "
                                "(did you mean TTS_AGENT_MQTT__HOST?)"),
        ("tts_agent_profil", "tts_agent_profil: unknown setting "
                             "(did you mean TTS_AGENT_PROFILE?)"),
        ("TTS_AGENT_MQTT__HOTS", "TTS_AGENT_MQTT__HOTS: unknown setting mqtt.hots "
                                 "(did you mean TTS_AGENT_MQTT__HOST?)"),
        ("TTS_AGENT_ZZZZ", "TTS_AGENT_ZZZZ: unknown setting"),
    ],
)
def test_unknown_environment_variables_are_refused(
    monkeypatch: pytest.MonkeyPatch, variable: str, line: str,
) -> None:
    clean_environment(monkeypatch)
    monkeypatch.setenv(variable, "x")
    with pytest.raises(ConfigError) as info:
        load_settings(None)
    assert info.value.problems == [line]


def test_variables_that_are_not_settings_are_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    clean_environment(monkeypatch)
    for name in ("TTS_AGENT_ESPEAK_DATA", "TTS_AGENT_TEST_INSTALL", "TTS_AGENT_BENCH_CACHE"):
        monkeypatch.setenv(name, "1")
    monkeypatch.setenv("TTS_AGENT_DEVICE_ID", "kiosk-1")
    assert load_settings(None).device_id == "kiosk-1"


@pytest.mark.parametrize(
    ("toml", "line"),
    [
        ("[mqtt]\nhots = 1\n", "unknown setting mqtt.hots (did you mean mqtt.host?)"),
        ("deviceid = 1\n", "unknown setting deviceid (did you mean device_id?)"),
        ("[mqt]\nhost = 1\n", "unknown setting mqt (did you mean mqtt?)"),
        ("[mqtt.journal]\nenable = false\n",
         "unknown setting mqtt.journal.enable (did you mean mqtt.journal.enabled?)"),
        ("[mqtt]\nport = 70000\n", "mqtt.port must be at most 65535 (got 70000)"),
        ("[mqtt]\nport = \"x\"\n", "mqtt.port must be a whole number"),
        ("[log]\nlevel = \"loud\"\n",
         "log.level must be one of 'debug', 'info', 'warning' or 'error'"),
        ("[audio]\ndevice = \"\"\n", "audio.device must have at least 1 character"),
        ("[mqtt]\ncert_file = \"c\"\n", "mqtt: cert_file and key_file must be given together"),
        ("host = \"broker\"\n", "unknown setting host (did you mean mqtt.host?)"),
        ("[mqtt]\ndefault_voice = \"v\"\n",
         "unknown setting mqtt.default_voice (did you mean models.default_voice?)"),
        ("[synthesis]\nintra_op_threads = 1.5\n",
         "synthesis.intra_op_threads must be a whole number"),
        ("[synthesis]\nproviders = [\"gpu\"]\n",
         "synthesis.providers[0] must be one of 'tensorrt', 'cuda' or 'cpu'"),
    ],
)
def test_validation_messages_are_in_the_agents_words(tmp_path: Path, toml: str, line: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    clean_environment(monkeypatch)
    config = write(tmp_path / "c.toml", toml)
    with pytest.raises(ConfigError) as info:
        load_settings(config)
    assert info.value.problems == [f"{config}: {line}"]
    assert "Input should" not in str(info.value) and "Extra inputs" not in str(info.value)


def test_one_line_per_problem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clean_environment(monkeypatch)
    monkeypatch.setenv("TTS_AGENT_AUDIO__VOLUME", "2")
    config = write(tmp_path / "c.toml", '[mqtt]\nport = 0\nhots = "h"\n[log]\nlevel = 3\n')
    with pytest.raises(ConfigError) as info:
        load_settings(config)
    assert sorted(info.value.problems) == sorted([
        "TTS_AGENT_AUDIO__VOLUME: audio.volume must be at most 1.0 (got 2)",
        f"{config}: mqtt.port must be at least 1 (got 0)",
        f"{config}: unknown setting mqtt.hots (did you mean mqtt.host?)",
        f"{config}: log.level must be one of 'debug', 'info', 'warning' or 'error'",
    ])
    assert str(info.value).count("\n") == 3


@pytest.mark.parametrize(
    "toml",
    [
        '[mqtt]\npassword = "hunter2"\npassword_file = "pw"\n',
        '[mqtt]\npassword = ["hunter2"]\n',
        '[mqtt]\npasswrd = "hunter2"\n',
        '[mqtt]\npassword = "hunter2"\nport = "hunter2"\n',
    ],
)
def test_secrets_never_appear_in_messages(tmp_path: Path, toml: str,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    clean_environment(monkeypatch)
    monkeypatch.setenv("TTS_AGENT_MQTT__PASSWROD", "hunter2")
    with pytest.raises(ConfigError) as info:
        load_settings(write(tmp_path / "c.toml", toml))
    assert "hunter2" not in str(info.value)
    assert "unknown setting mqtt.passwrod (did you mean TTS_AGENT_MQTT__PASSWORD?)" in str(
        info.value)


def test_an_unparsable_variable_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    clean_environment(monkeypatch)
    monkeypatch.setenv("TTS_AGENT_MQTT__GROUPS", "[kitchen")
    with pytest.raises(ConfigError) as info:
        load_settings(None)
    assert len(info.value.problems) == 1
    assert "written in JSON" in info.value.problems[0]


def test_an_oversized_config_file_is_refused(tmp_path: Path) -> None:
    config = write(tmp_path / "big.toml", "# " + "x" * (1 << 20) + "\n")
    with pytest.raises(ConfigError, match="larger than"):
        load_settings(config)


def test_every_agent_variable_the_scripts_set_is_accepted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """build.sh and install.sh run the agent with these variables in its environment; one the
    settings do not know is refused at start (``TTS_AGENT_DEMO_START_S``, which the demo reads
    for itself, made every agent command of an emulated platform's ``./build.sh demo`` exit
    with "unknown setting")."""
    names = {name for script in ("build.sh", "systemd/install.sh")
             for name in re.findall(r"\bTTS_AGENT_[A-Z0-9_]*[A-Z0-9]",
                                    (REPO / script).read_text(encoding="utf-8"))}
    assert "TTS_AGENT_DEMO_START_S" in names
    for name in names:
        monkeypatch.setenv(name, "1")
    assert list(unknown_variables()) == []
