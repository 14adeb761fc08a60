"""``tts-agent prepare``: the first start after install finds its cache (#19 item 4).

A streaming voice's first load builds the switchable graph and measures the decoder's padding,
then stores both in ``<cache.dir>/ort``; later loads read them. ``tts-agent prepare`` does that
load ahead of time, with the settings file the daemon will run with, so the daemon's very first
start is a cache hit. Checked on real processes: ``tts-agent prepare`` as a command, then
``tts-agent run`` with the same settings file, over a real Mosquitto, its health read over MQTT
(``voices[].session_cache``) and its log searched for the build steps.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agent.mqtt.topics import Namespace
from agent.settings import Settings
from tests.support import slow_voice
from tests.support.broker import Broker, Recorder, agent_env, agent_settings, daemon
from tests.support.cli import agent_cli
from tests.support.notify_socket import NotifySocket

pytestmark = [pytest.mark.broker]

IN_THE_FILE = ("TTS_AGENT_MODELS__", "TTS_AGENT_CACHE__", "TTS_AGENT_LOG__")
"""Settings the TOML file gives (the rest, the broker's port, comes from the environment)."""
BUILD_STEPS = ("decoder_window_measured", "onnx_optimized_cache_stored")
"""Log events of a load that builds (the switchable graph, its padding measured, stored)."""


def setup(broker: Broker, tmp_path: Path) -> tuple[Settings, Path]:
    """Settings for a streaming test voice, and the TOML file naming its models and cache (as
    /etc/tts-agent/agent.toml does for the installed service)."""
    models = tmp_path / "models"
    slow_voice.build_bundle(models)  # not slowed here: only its switchable graph matters
    settings = agent_settings(broker, models, tmp_path / "agent", voice=slow_voice.VOICE)
    config = tmp_path / "agent.toml"
    config.write_text(f'[models]\ndir = "{models}"\ndefault_voice = "{slow_voice.VOICE}"\n'
                      f'[cache]\ndir = "{tmp_path / "cache"}"\n'
                      '[log]\nlevel = "info"\nformat = "json"\n', encoding="utf-8")
    return settings, config


def env_without_paths(settings: Settings) -> dict[str, str]:
    """The agent's settings as environment, less what the TOML file says (models, cache, log)."""
    return {k: v for k, v in agent_env(settings).items() if not k.startswith(IN_THE_FILE)}


def prepare(config: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return agent_cli("--config", config, "prepare", *args, env=env, timeout=300)


def first_start(settings: Settings, config: Path, tmp_path: Path, name: str,
                notify: NotifySocket) -> tuple[dict[str, Any], str]:
    """Start the daemon with ``config``; (its voice in health once it is ready, its log)."""
    log_path = tmp_path / f"{name}.log"
    dev = Namespace("tts").device(settings.device_id)
    with Recorder(settings.mqtt, [dev.health.as_filter()], f"watch-{name}") as recorder, \
            daemon(settings, log_path, "--config", str(config), env=notify.env(),
                   drop_env=tuple(k for k in agent_env(settings)
                                  if k.startswith(IN_THE_FILE))) as process:
        notify.receive_until("READY", timeout=120)
        health = recorder.wait_json(dev.health, lambda h: bool(h["voices"]["voices"]), 60)
        process.terminate()
        process.wait(30)
    (voice,) = health["voices"]["voices"]
    return voice, log_path.read_text(encoding="utf-8", errors="replace")


def test_after_prepare_the_first_start_reads_the_cache_and_builds_nothing(
        mqtt_broker: Broker, tmp_path: Path, notify: NotifySocket) -> None:
    settings, config = setup(mqtt_broker, tmp_path)
    env = env_without_paths(settings)
    done = prepare(config, env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (f"{slow_voice.VOICE} 2.0.0 (fp32): ready (built and stored "
                                   f"in the cache) in {tmp_path / 'cache' / 'ort'}")
    assert list((tmp_path / "cache" / "ort").glob("*.onnx"))  # prepare did the building
    voice, log = first_start(settings, config, tmp_path, "first", notify)
    assert voice["session_cache"] == "hit"
    assert voice["streaming"] is not None  # the switchable graph, from the cache
    assert not [step for step in BUILD_STEPS if step in log]
    loaded = [json.loads(line) for line in log.splitlines()
              if line.startswith("{") and '"voice_loaded"' in line]
    assert [e["session_cache"] for e in loaded] == ["hit"]
    again = prepare(config, env)
    assert again.returncode == 0 and "ready (already in the cache)" in again.stdout


def test_without_prepare_the_first_start_builds(
        mqtt_broker: Broker, tmp_path: Path, notify: NotifySocket) -> None:
    settings, config = setup(mqtt_broker, tmp_path)
    voice, log = first_start(settings, config, tmp_path, "cold", notify)
    assert voice["session_cache"] == "stored"
    assert all(step in log for step in BUILD_STEPS)


def test_prepare_refuses_what_it_cannot_prepare(mqtt_broker: Broker, tmp_path: Path) -> None:
    settings, config = setup(mqtt_broker, tmp_path)
    env = env_without_paths(settings)
    unknown = prepare(config, env, "--voice", "nope")
    assert unknown.returncode == 2
    assert unknown.stderr.strip().splitlines()[-1].startswith(
        "tts-agent prepare: error: no voice named 'nope'")
    model = tmp_path / "models" / slow_voice.VOICE / f"{slow_voice.VOICE}.onnx"
    model.write_bytes(model.read_bytes()[:-10])  # damaged: its sha256 no longer matches
    broken = prepare(config, env)
    assert broken.returncode == 1
    assert f"tts-agent prepare: error: {slow_voice.VOICE}: cannot be loaded" in broken.stderr
    empty = tmp_path / "empty.toml"
    empty.write_text(f'[models]\ndir = "{tmp_path / "none"}"\n', encoding="utf-8")
    nothing = prepare(empty, env)
    assert nothing.returncode == 1 and "no voices installed in" in nothing.stderr
