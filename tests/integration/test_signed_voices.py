"""Signed voices end to end (#15 item 12): ``tts-agent models keygen / sign / verify`` as real
processes, and a running agent (real Mosquitto, real playback into an ALSA file PCM, the tiny
generated voice) that requires signatures: an unsigned staged version is refused on ``reload``
and ``current`` stays; once signed it loads, and the event and the health report name the key."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.mqtt.topics import Namespace
from agent.settings import Settings
from tests.support import make_tiny_voice
from tests.support.broker import Broker, Recorder, agent_env, agent_settings, running_agent
from tests.support.cli import agent_cli

VOICE = make_tiny_voice.VOICE
DEV = Namespace("tts").device("t1")


def tts_agent(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return agent_cli(*args, env=env, timeout=300)


def keygen(prefix: Path) -> str:
    done = tts_agent("models", "keygen", str(prefix))
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["key_id"])


def sign(bundle: Path, key: Path) -> subprocess.CompletedProcess[str]:
    return tts_agent("models", "sign", str(bundle), "--key", str(key))


def cli_env(models: Path, tmp_path: Path, keys: list[Path], required: bool) -> dict[str, str]:
    settings = Settings(models={"dir": models, "default_voice": VOICE, "trusted_keys": keys,
                                "require_signature": required},
                        cache={"dir": tmp_path / "cache"}, log={"level": "warning"})
    return agent_env(settings)


def test_keygen_sign_verify_from_the_command_line(tiny_voice_dir: Path, tmp_path: Path) -> None:
    models = tiny_voice_dir.parent
    old, new = tmp_path / "keys" / "release-1", tmp_path / "keys" / "release-2"
    old.parent.mkdir()
    old_id, new_id = keygen(old), keygen(new)
    assert (old.with_suffix(".key").stat().st_mode & 0o777) == 0o600
    again = tts_agent("models", "keygen", str(old))
    assert again.returncode == 2 and "already exists" in again.stderr
    required = cli_env(models, tmp_path, [Path(f"{old}.pub"), Path(f"{new}.pub")], True)

    unsigned = tts_agent("models", "verify", env=required)
    assert unsigned.returncode == 2
    assert f"{VOICE}: FAILED:" in unsigned.stdout and "unsigned" in unsigned.stdout

    signed = sign(tiny_voice_dir, Path(f"{new}.key"))
    assert signed.returncode == 0, signed.stderr
    assert json.loads(signed.stdout)["key_id"] == new_id
    ok = tts_agent("models", "verify", env=required)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert f"{VOICE}: ok (signed by {new_id})" in ok.stdout
    assert old_id != new_id

    # The manifest edited after signing: refused, with the reason, even when not required.
    manifest = tiny_voice_dir / "manifest.json"
    data = json.loads(manifest.read_text())
    data["source"] = "someone else"
    manifest.write_text(json.dumps(data))
    optional = cli_env(models, tmp_path, [Path(f"{old}.pub"), Path(f"{new}.pub")], False)
    tampered = tts_agent("models", "verify", env=optional)
    assert tampered.returncode == 2
    assert "changed after it was signed" in tampered.stdout

    # sign refuses a bundle whose files do not match its manifest: nothing is vouched for.
    (tiny_voice_dir / f"{VOICE}.onnx.json").write_text("{}")
    refused = sign(tiny_voice_dir, Path(f"{old}.key"))
    assert refused.returncode == 2 and "not signed" in refused.stderr
    bad_key = tts_agent("models", "verify",
                        env={**optional, "TTS_AGENT_MODELS__TRUSTED_KEYS":
                             json.dumps([str(tmp_path / "missing.pub")])})
    assert bad_key.returncode == 2 and "public key file not found" in bad_key.stderr
    assert "Traceback" not in bad_key.stderr


def test_deep_json_is_refused_with_its_reason_before_or_after_the_signature(
        tiny_voice_dir: Path, tmp_path: Path) -> None:
    """#27: the signature is checked over the manifest's raw bytes before they are parsed, and
    every parse is bounded: an unsigned manifest nested 1,000 deep is refused as unsigned; a
    signature file nested 4,096 deep, or a deep manifest signed by a trusted key, is a reason
    (both ended ``models verify`` with "unexpected RecursionError ... (a bug)" before)."""
    from agent.voice.signature import load_private_key, sign_bundle

    prefix = tmp_path / "release"
    keygen(prefix)
    required = cli_env(tiny_voice_dir.parent, tmp_path, [Path(f"{prefix}.pub")], True)
    (tiny_voice_dir / "manifest.json").write_bytes(b"[" * 1000 + b"]" * 1000)
    unsigned = tts_agent("models", "verify", env=required)
    assert unsigned.returncode == 2, unsigned.stdout + unsigned.stderr
    assert "unsigned (no manifest.json.sig)" in unsigned.stdout
    gate = tts_agent("check-config", "--gate", env=required)
    assert gate.returncode == 0 and "unsigned (no manifest.json.sig)" in gate.stderr, gate.stderr

    sign_bundle(tiny_voice_dir, load_private_key(Path(f"{prefix}.key")))  # vouches for it
    signed_deep = tts_agent("models", "verify", env=required)
    assert signed_deep.returncode == 2, signed_deep.stdout + signed_deep.stderr
    assert "the signed manifest is not JSON: nested too deeply" in signed_deep.stdout

    (tiny_voice_dir / "manifest.json.sig").write_bytes(b"[" * 4096)
    deep_sig = tts_agent("models", "verify", env=required)
    assert deep_sig.returncode == 2, deep_sig.stdout + deep_sig.stderr
    assert "unreadable signature file: nested too deeply" in deep_sig.stdout
    for result in (unsigned, gate, signed_deep, deep_sig):
        assert "a bug" not in result.stderr and "Recursion" not in result.stdout + result.stderr


@pytest.fixture()
def staged(tiny_voice_dir: Path, tmp_path: Path) -> tuple[Path, Path, str]:
    """models/tiny-test/{1.0.0 (signed), 2.0.0 (unsigned)}, current -> 1.0.0; the key pair."""
    models = tmp_path / "staged"
    voice_dir = models / VOICE
    voice_dir.mkdir(parents=True)
    shutil.copytree(tiny_voice_dir, voice_dir / "1.0.0")
    make_tiny_voice.build_bundle(models, version="2.0.0", gain=0.8, bundle=voice_dir / "2.0.0")
    (voice_dir / "current").symlink_to("1.0.0")
    prefix = tmp_path / "fleet"
    key_id = keygen(prefix)
    assert sign(voice_dir / "1.0.0", Path(f"{prefix}.key")).returncode == 0
    return models, prefix, key_id


@pytest.fixture()
def controller(mqtt_broker: Broker) -> Iterator[Recorder]:
    with Recorder(mqtt_broker.settings(), [DEV.events.as_filter(), DEV.status.as_filter(),
                                           DEV.health.as_filter()], "controller") as recorder:
        yield recorder


def signer_in_health(report: dict[str, Any]) -> list[tuple[str, str | None]]:
    return [(v["version"], v["signed_by"]) for v in report["voices"]["voices"]]


@pytest.mark.broker
@pytest.mark.alsa
def test_running_agent_refuses_an_unsigned_version_and_names_the_signer(
        mqtt_broker: Broker, staged: tuple[Path, Path, str], controller: Recorder,
        tmp_path: Path) -> None:
    models, prefix, key_id = staged
    settings = agent_settings(mqtt_broker, models, tmp_path / "agent")
    settings = settings.model_copy(update={"models": Settings(models={
        **settings.models.model_dump(), "trusted_keys": [Path(f"{prefix}.pub")],
        "require_signature": True}).models})
    with running_agent(settings):
        controller.wait_json(DEV.status, lambda p: p["state"] == "online")
        controller.publish(DEV.command("speak"), {"id": "s1", "text": "Signed voice."})
        final = controller.wait_json(DEV.events, lambda e: e["id"] == "s1" and e["final"], 60)
        assert final["event"] == "finished" and final["version"] == "1.0.0"
        controller.wait_json(DEV.health, lambda h: signer_in_health(h) == [("1.0.0", key_id)],
                             60)

        controller.publish(DEV.command("reload"), {"id": "r1", "voice": VOICE,
                                                   "version": "2.0.0"})
        answer = controller.wait_json(DEV.events, lambda e: e["id"] == "r1" and e["final"], 60)
        assert answer["event"] == "failed" and "unsigned" in answer["reason"]
        rejected = controller.wait_json(
            DEV.events, lambda e: e["event"] == "model_rejected" and e["version"] == "2.0.0", 60)
        assert "models.require_signature" in rejected["reason"]
        assert os.readlink(models / VOICE / "current") == "1.0.0"
        controller.publish(DEV.command("speak"), {"id": "s2", "text": "Still here."})
        final = controller.wait_json(DEV.events, lambda e: e["id"] == "s2" and e["final"], 60)
        assert final["event"] == "finished" and final["version"] == "1.0.0"

        assert sign(models / VOICE / "2.0.0", Path(f"{prefix}.key")).returncode == 0
        controller.publish(DEV.command("reload"), {"id": "r2", "voice": VOICE,
                                                   "version": "2.0.0"})
        answer = controller.wait_json(DEV.events, lambda e: e["id"] == "r2" and e["final"], 60)
        assert answer["event"] == "done", answer
        loaded = controller.wait_json(
            DEV.events, lambda e: e["event"] == "model_loaded" and e["version"] == "2.0.0", 60)
        assert loaded["signed_by"] == key_id
        assert os.readlink(models / VOICE / "current") == "2.0.0"
        controller.wait_json(DEV.health, lambda h: signer_in_health(h) == [("2.0.0", key_id)],
                             60)


@pytest.mark.broker
@pytest.mark.alsa
def test_an_unsigned_default_voice_is_refused_at_start_with_the_reason(
        mqtt_broker: Broker, tiny_voice_dir: Path, controller: Recorder, tmp_path: Path) -> None:
    prefix = tmp_path / "fleet"
    keygen(prefix)
    settings = agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent")
    settings = settings.model_copy(update={"models": Settings(models={
        **settings.models.model_dump(), "trusted_keys": [Path(f"{prefix}.pub")],
        "require_signature": True}).models})
    with running_agent(settings):
        rejected = controller.wait_json(DEV.events, lambda e: e["event"] == "model_rejected", 60)
        assert "unsigned" in rejected["reason"] and rejected["voice"] == VOICE
        controller.publish(DEV.command("speak"), {"id": "s1", "text": "Not with this voice."})
        final = controller.wait_json(DEV.events, lambda e: e["id"] == "s1" and e["final"], 60)
        assert final["event"] == "failed" and "unsigned" in final["reason"]
        health = controller.wait_json(DEV.health, lambda h: h["state"] == "failing", 60)
        assert health["voices"]["voices"] == []
        assert "unsigned" in health["voices"]["last_reload"][VOICE]["reason"]


@pytest.mark.broker
@pytest.mark.alsa
def test_a_key_removed_at_sighup_applies_at_once_and_the_loaded_voice_says_so(
        mqtt_broker: Broker, staged: tuple[Path, Path, str], controller: Recorder,
        tmp_path: Path) -> None:
    """#27 item 4: two trusted keys, the live voice and a new version signed by key B; B is
    removed from models.trusted_keys and the settings are reloaded (SIGHUP's path)."""
    models, prefix_a, key_a = staged
    prefix_b = tmp_path / "other"
    key_b = keygen(prefix_b)
    for version in ("1.0.0", "2.0.0"):
        assert sign(models / VOICE / version, Path(f"{prefix_b}.key")).returncode == 0
    base = agent_settings(mqtt_broker, models, tmp_path / "agent")

    def with_keys(*prefixes: Path) -> Settings:
        return base.model_copy(update={"models": Settings(models={
            **base.models.model_dump(), "require_signature": True,
            "trusted_keys": [Path(f"{p}.pub") for p in prefixes]}).models})

    with running_agent(with_keys(prefix_a, prefix_b)) as service:
        controller.wait_json(DEV.health, lambda h: signer_in_health(h) == [("1.0.0", key_b)],
                             60)
        summary = service.reload(lambda: with_keys(prefix_a))
        assert f"trusted keys now {key_a} (required)" in summary, summary
        assert "restart needed" not in summary and "voices 1 rejected" in summary, summary
        rejected = controller.wait_json(
            DEV.events, lambda e: e["event"] == "model_rejected" and e["version"] == "1.0.0", 60)
        assert key_b in rejected["reason"] and "still serving version 1.0.0" in rejected["reason"]
        # (on a loaded machine a report may be degraded for a broker hiccup first: wait for this)
        health = controller.wait_json(DEV.health, lambda h: h["state"] == "degraded" and any(
            VOICE in r and key_b in r and "still serving" in r for r in h["reasons"]), 60)
        assert health["state"] == "degraded", health
        # the device does not go silent: the loaded voice keeps serving, and says so above
        controller.publish(DEV.command("speak"), {"id": "s1", "text": "Still here."})
        final = controller.wait_json(DEV.events, lambda e: e["id"] == "s1" and e["final"], 60)
        assert final["event"] == "finished" and final["version"] == "1.0.0"

        # a new bundle signed by the removed key is refused
        controller.publish(DEV.command("reload"), {"id": "r1", "voice": VOICE,
                                                   "version": "2.0.0"})
        answer = controller.wait_json(DEV.events, lambda e: e["id"] == "r1" and e["final"], 60)
        assert answer["event"] == "failed" and key_b in answer["reason"], answer
        assert os.readlink(models / VOICE / "current") == "1.0.0"

        # signed again by a trusted key: it loads, and health is ok again
        assert sign(models / VOICE / "2.0.0", Path(f"{prefix_a}.key")).returncode == 0
        controller.publish(DEV.command("reload"), {"id": "r2", "voice": VOICE,
                                                   "version": "2.0.0"})
        answer = controller.wait_json(DEV.events, lambda e: e["id"] == "r2" and e["final"], 60)
        assert answer["event"] == "done", answer
        controller.wait_json(DEV.health, lambda h: signer_in_health(h) == [("2.0.0", key_a)]
                             and not any(VOICE in r for r in h["reasons"]), 60)
