"""What the fleet is told is true (#28 items 1, 3, 5), against a real Mosquitto and the agent:

- a ``reload`` with a ``version`` answers ``done`` only once that version serves, for a voice
  not used since the start too (``failed`` with the reason otherwise, as ``models activate``
  says it), and ``current`` moves only then;
- a settings file that would not start the agent (SIGHUP or the ``reload`` command) makes
  health degraded with the file and the error until a reload reads a good one;
- a missing default voice's health reason names it, ``models.dir`` and what is installed.

Nothing of it names a local directory: it goes over the network.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest

from agent.mqtt.topics import Namespace
from agent.settings import Settings
from agent.voice.bundle import write_manifest
from agent.voice.signature import generate_keypair, load_private_key, sign_bundle
from tests.support import make_tiny_voice
from tests.support.broker import Broker, Recorder, agent_env, agent_settings, daemon, running_agent
from tests.support.cli import agent_cli

pytestmark = [pytest.mark.broker, pytest.mark.alsa]

VOICE = make_tiny_voice.VOICE
OTHER = "tiny-two"
DEV = Namespace("tts").device("t1")


def stage(models: Path, version: str, gain: float) -> Path:
    """``models/tiny-two/<version>/``: the tiny voice under another name, its own model bytes."""
    bundle = models / OTHER / version
    bundle.mkdir(parents=True)
    make_tiny_voice.build_model(bundle / f"{VOICE}.onnx", gain=gain)
    make_tiny_voice.build_config(bundle / f"{VOICE}.onnx.json")
    write_manifest(bundle, voice=OTHER, version=version, sample_rate=make_tiny_voice.SAMPLE_RATE,
                   variants={"fp32": f"{VOICE}.onnx"}, config=f"{VOICE}.onnx.json",
                   source="tests/test_reload_truth.py")
    return bundle


def watching(broker: Broker) -> Recorder:
    return Recorder(broker.settings(), [DEV.events.as_filter(), DEV.status.as_filter(),
                                        DEV.health.as_filter()], "controller")


def answer(controller: Recorder, request_id: str, **command: Any) -> dict[str, Any]:
    controller.publish(DEV.command("reload"), {"id": request_id, **command})
    return controller.wait_json(DEV.events, lambda e: e["id"] == request_id and e["final"], 60)


def loaded_versions(health: dict[str, Any]) -> dict[str, str]:
    return {v["voice"]: v["version"] for v in health["voices"]["voices"]}


def test_a_version_reload_of_a_voice_not_used_yet_is_done_only_once_it_serves(
        mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path) -> None:
    """Item 1: before, ``reload --voice tiny-two --version 2.0.0`` answered ``done`` and
    switched nothing (tiny-two was not loaded since the start, so nothing was validated and
    ``current`` went back), even for an unsigned version under ``require_signature``."""
    models = tiny_voice_dir.parent
    generate_keypair(tmp_path / "fleet")
    key = load_private_key(tmp_path / "fleet.key")
    sign_bundle(tiny_voice_dir, key)
    for version, gain in (("1.0.0", 0.5), ("2.0.0", 0.6), ("3.0.0", 0.7)):
        bundle = stage(models, version, gain)
        if version != "2.0.0":  # 2.0.0 stays unsigned
            sign_bundle(bundle, key)
    voice_dir = models / OTHER
    (voice_dir / "current").symlink_to("1.0.0")
    base = agent_settings(mqtt_broker, models, tmp_path / "agent")
    settings = base.model_copy(update={"models": Settings(models={
        **base.models.model_dump(), "trusted_keys": [tmp_path / "fleet.pub"],
        "require_signature": True}).models})
    with watching(mqtt_broker) as controller, running_agent(settings):
        controller.wait_json(DEV.status, lambda p: p["state"] == "online")

        refused = answer(controller, "up-2", voice=OTHER, version="2.0.0")
        assert refused["event"] == "failed", refused
        assert "unsigned" in refused["reason"] and "models.require_signature" in refused["reason"]
        assert os.readlink(voice_dir / "current") == "1.0.0"
        assert not (voice_dir / "previous").is_symlink()
        health = controller.wait_json(DEV.health, lambda h: any(
            OTHER in r and "unsigned" in r for r in h["reasons"]), 60)
        assert health["state"] == "degraded"
        assert loaded_versions(health) == {VOICE: "1.0.0"}  # tiny-two stays unused
        # the same decision as `models activate` on the device: the same words, exit 2
        cli = agent_cli("models", "activate", OTHER, "2.0.0", env=agent_env(settings))
        assert cli.returncode == 2, cli.stdout + cli.stderr
        said = cli.stderr.strip().splitlines()[-1].split(f"{OTHER} 2.0.0: rejected: ", 1)[1]
        assert refused["reason"] == f"{OTHER}: {said}", (refused, cli.stderr)
        assert os.readlink(voice_dir / "current") == "1.0.0"

        done = answer(controller, "up-3", voice=OTHER, version="3.0.0")
        assert done["event"] == "done", done
        assert os.readlink(voice_dir / "current") == "3.0.0"
        assert os.readlink(voice_dir / "previous") == "1.0.0"
        health = controller.wait_json(
            DEV.health, lambda h: loaded_versions(h).get(OTHER) == "3.0.0", 60)
        assert health["state"] == "ok", health["reasons"]  # the rejection is behind it
        controller.publish(DEV.command("speak"), {"id": "s1", "text": "New.", "voice": OTHER})
        final = controller.wait_json(DEV.events, lambda e: e["id"] == "s1" and e["final"], 60)
        assert (final["event"], final["version"]) == ("finished", "3.0.0"), final
        for text in (refused["reason"], json.dumps(health)):
            assert str(models) not in text and str(models.resolve()) not in text


def test_a_missing_default_voice_and_a_broken_settings_file_say_what_to_fix(
        mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path) -> None:
    """Items 5 and 3, the daemon as a process with ``--config``: health named no voice, no
    directory and nothing installed ("no voice loaded"), and a reload of a broken settings
    file left health as it was (one log line; the next restart would fail in ExecStartPre)."""
    models = tiny_voice_dir.parent
    settings = agent_settings(mqtt_broker, models, tmp_path / "agent", voice="nobody")
    config = tmp_path / "etc" / "agent.toml"
    config.parent.mkdir()
    good = '[health]\ninterval_s = 60\n'
    config.write_text(good, encoding="utf-8")

    def settings_reasons(health: dict[str, Any]) -> list[str]:
        return [r for r in health["reasons"] if r.startswith("settings file not usable")]

    with watching(mqtt_broker) as controller, \
            daemon(settings, tmp_path / "agent.log", "--config", str(config)) as agent:
        controller.wait_json(DEV.status, lambda p: p["state"] == "online", 120)
        health = controller.wait_json(DEV.health, lambda h: h["state"] == "failing", 60)
        assert health["reasons"][0] == (
            "no voice loaded: models.default_voice 'nobody' is not installed in models.dir "
            f"(installed: {VOICE})"), health["reasons"]
        assert health["voices"]["installed"] == [VOICE]

        config.write_text("[health\ninterval_s = 60\n", encoding="utf-8")  # invalid TOML
        agent.send_signal(signal.SIGHUP)
        health = controller.wait_json(DEV.health, lambda h: settings_reasons(h) != [], 60)
        reason = settings_reasons(health)[0]
        assert reason.startswith("settings file not usable: agent.toml: invalid TOML: "), reason
        assert "would not start with this file" in reason
        assert health["settings"]["state"] == "degraded"

        config.write_text(good, encoding="utf-8")
        mark = controller.json_on(DEV.health)[-1]["uptime_s"]
        done = answer(controller, "check-1")  # the reload command checks the file too
        assert done["event"] == "done", done
        controller.wait_json(DEV.health, lambda h: h["uptime_s"] > mark and settings_reasons(h)
                             == [] and h["settings"] == {"state": "ok", "reason": None}, 60)

        config.write_text(good + "[models]\nvoices = 1\n", encoding="utf-8")
        failed = answer(controller, "check-2")
        assert failed["event"] == "failed", failed
        assert failed["reason"].startswith(
            "settings file not usable: agent.toml: unknown setting models.voices"), failed
        controller.wait_json(DEV.health, lambda h: any(
            "agent.toml: unknown setting models.voices" in r for r in settings_reasons(h)), 60)

        config.write_text(good, encoding="utf-8")
        mark = controller.json_on(DEV.health)[-1]["uptime_s"]
        agent.send_signal(signal.SIGHUP)
        health = controller.wait_json(DEV.health, lambda h: h["uptime_s"] > mark
                                      and settings_reasons(h) == [], 60)
        for text in (json.dumps(health), failed["reason"], reason):
            assert str(config.parent) not in text and str(models) not in text

        shutil.copytree(tiny_voice_dir, models / "nobody")  # what the reason said to fix
        write_manifest(models / "nobody", voice="nobody", version="1.0.0",
                       sample_rate=make_tiny_voice.SAMPLE_RATE,
                       variants={"fp32": f"{VOICE}.onnx"}, config=f"{VOICE}.onnx.json",
                       source="tests/test_reload_truth.py")
        written = (models / "nobody" / "manifest.json").stat().st_mtime - 60
        os.utime(models / "nobody" / "manifest.json", (written, written))  # a finished copy
        assert answer(controller, "fixed")["event"] == "done"
        health = controller.wait_json(DEV.health, lambda h: h["state"] == "ok", 60)
        assert loaded_versions(health) == {"nobody": "1.0.0"}
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(60) == 0
