"""Signed voices: ed25519 over manifest.json, the trust policy, and the library refusing what it
does not trust (#15 item 12). Real keys (cryptography), the tiny generated voice, real files."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import stat
import threading
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from pydantic import ValidationError

from agent.library.voices import VoiceLibrary
from agent.mqtt.publisher import model_event_fields
from agent.settings import Settings
from agent.voice.bundle import MANIFEST_NAME, read_bundle, write_manifest
from agent.voice.signature import (
    SIGNATURE_NAME,
    SignatureError,
    Signed,
    TrustPolicy,
    generate_keypair,
    load_private_key,
    load_public_key,
    sign_bundle,
)
from agent.voice.voice import VoiceLoadError
from tests.support import make_tiny_voice

VOICE = make_tiny_voice.VOICE


@pytest.fixture()
def keys(tmp_path: Path) -> dict[str, tuple[Path, Path, str]]:
    """Two key pairs ("old", "new": a rotation) and one nobody trusts ("rogue")."""
    folder = tmp_path / "keys"
    folder.mkdir()
    return {name: generate_keypair(folder / name) for name in ("old", "new", "rogue")}


def sign(bundle: Path, pair: tuple[Path, Path, str]) -> None:
    sign_bundle(bundle, load_private_key(pair[0]))


def library(models: Path, events: list[dict[str, Any]], **models_settings: Any) -> VoiceLibrary:
    settings = Settings(models={"dir": models, "default_voice": VOICE, "watch": False,
                                **models_settings})
    return VoiceLibrary(settings, on_event=lambda e: events.append(model_event_fields(e)),
                        settle_s=0.0)


# -- keys -----------------------------------------------------------------------------------


def test_keygen_writes_a_private_key_only_its_owner_reads(
        keys: dict[str, tuple[Path, Path, str]]) -> None:
    private, public, key_id = keys["old"]
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert private.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    raw = load_public_key(public).key.public_bytes(Encoding.Raw, PublicFormat.Raw)
    assert key_id == hashlib.sha256(raw).hexdigest()[:16] == load_public_key(public).key_id
    with pytest.raises(SignatureError, match="already exists"):
        generate_keypair(private.with_suffix(""))
    assert keys["new"][2] != key_id


def test_keys_that_are_not_usable_are_refused(
        keys: dict[str, tuple[Path, Path, str]], tmp_path: Path) -> None:
    private, public, _ = keys["old"]
    private.chmod(0o644)
    with pytest.raises(SignatureError, match="readable by others"):
        load_private_key(private)
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    rsa_pub = tmp_path / "rsa.pub"
    rsa_pub.write_bytes(rsa_key.public_key().public_bytes(
        Encoding.PEM, PublicFormat.SubjectPublicKeyInfo))
    with pytest.raises(SignatureError, match="not an ed25519 public key"):
        load_public_key(rsa_pub)
    with pytest.raises(SignatureError, match="not a PEM public key"):
        load_public_key(_write(tmp_path / "garbage.pub", b"hello"))
    with pytest.raises(SignatureError, match="not found"):
        load_public_key(tmp_path / "missing.pub")
    link = tmp_path / "link.pub"
    link.symlink_to(public)
    with pytest.raises(SignatureError, match="cannot open"):
        load_public_key(link)


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_settings_refuse_a_requirement_without_keys_and_bad_key_files(
        keys: dict[str, tuple[Path, Path, str]], tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="require_signature is set but"):
        Settings(models={"require_signature": True})
    with pytest.raises(ValidationError, match="public key file not found"):
        Settings(models={"trusted_keys": [tmp_path / "nope.pub"]})
    with pytest.raises(ValidationError, match="not a PEM public key"):
        Settings(models={"trusted_keys": [keys["old"][0]]})  # the private key by mistake
    settings = Settings(models={"trusted_keys": [keys["old"][1], keys["new"][1]],
                                "require_signature": True})
    assert len(settings.models.trusted_keys) == 2


# -- the policy -----------------------------------------------------------------------------


def test_a_signed_bundle_verifies_and_names_its_key(
        tiny_voice_dir: Path, keys: dict[str, tuple[Path, Path, str]]) -> None:
    sign(tiny_voice_dir, keys["new"])
    document = json.loads((tiny_voice_dir / SIGNATURE_NAME).read_text())
    manifest = (tiny_voice_dir / MANIFEST_NAME).read_bytes()
    assert document["manifest_sha256"] == hashlib.sha256(manifest).hexdigest()
    load_public_key(keys["new"][1]).key.verify(base64.b64decode(document["signature"]), manifest)
    # Rotation: both the old and the new key are trusted; either signature verifies.
    policy = TrustPolicy.from_files([keys["old"][1], keys["new"][1]], required=True)
    signed = policy.check(tiny_voice_dir)
    assert signed is not None and signed.key_id == keys["new"][2]
    signed.confirm(read_bundle(tiny_voice_dir))
    sign(tiny_voice_dir, keys["old"])
    signed = policy.check(tiny_voice_dir)
    assert signed is not None and signed.key_id == keys["old"][2]


@pytest.mark.parametrize("required", [True, False])
def test_wrong_signatures_are_refused_whether_or_not_required(
        tiny_voice_dir: Path, keys: dict[str, tuple[Path, Path, str]], required: bool) -> None:
    policy = TrustPolicy.from_files([keys["old"][1]], required=required)
    sig = tiny_voice_dir / SIGNATURE_NAME
    sign(tiny_voice_dir, keys["rogue"])
    with pytest.raises(SignatureError, match=f"key '{keys['rogue'][2]}', which is not in "
                                             "models.trusted_keys"):
        policy.check(tiny_voice_dir)
    sign(tiny_voice_dir, keys["old"])
    manifest = tiny_voice_dir / MANIFEST_NAME
    data = json.loads(manifest.read_text())
    data["version"] = "6.6.6"
    manifest.write_text(json.dumps(data))
    with pytest.raises(SignatureError, match="changed after it was signed"):
        policy.check(tiny_voice_dir)
    # A forger who also updates the recorded sha256 still has no valid signature.
    document = json.loads(sig.read_text())
    document["manifest_sha256"] = hashlib.sha256(manifest.read_bytes()).hexdigest()
    sig.write_text(json.dumps(document))
    with pytest.raises(SignatureError, match="does not verify with trusted key"):
        policy.check(tiny_voice_dir)
    for broken, reason in ((b"{", "unreadable signature file"),
                           (b'{"format": 1, "algorithm": "rsa"}', "not ed25519"),
                           (json.dumps({**document, "signature": "AAAA"}).encode(), "not 64"),
                           (b"x" * 5000, "larger than 4096 bytes")):
        sig.write_bytes(broken)
        with pytest.raises(SignatureError, match=reason):
            policy.check(tiny_voice_dir)


def test_unsigned_bundles_pass_only_when_no_signature_is_required(
        tiny_voice_dir: Path, keys: dict[str, tuple[Path, Path, str]]) -> None:
    assert TrustPolicy.from_files([keys["old"][1]], required=False).check(tiny_voice_dir) is None
    with pytest.raises(SignatureError,
                       match=r"unsigned \(no manifest.json.sig\) and models.require_signature"):
        TrustPolicy.from_files([keys["old"][1]], required=True).check(tiny_voice_dir)
    # No keys configured: signatures are not looked at (nothing to check them with).
    (tiny_voice_dir / SIGNATURE_NAME).write_bytes(b"garbage")
    assert TrustPolicy().check(tiny_voice_dir) is None


def test_a_signature_that_is_no_regular_file_is_refused_without_blocking(
        tiny_voice_dir: Path, keys: dict[str, tuple[Path, Path, str]], tmp_path: Path) -> None:
    policy = TrustPolicy.from_files([keys["old"][1]], required=True)
    sig = tiny_voice_dir / SIGNATURE_NAME
    os.mkfifo(sig)  # no writer: a blocking open would hang here
    outcome: list[BaseException] = []
    checker = threading.Thread(target=lambda: _catch(outcome, policy, tiny_voice_dir),
                               daemon=True)
    checker.start()
    checker.join(30)
    assert not checker.is_alive(), "reading a FIFO signature blocked"
    assert "not a regular file" in str(outcome[0])
    sig.unlink()
    sign(tiny_voice_dir, keys["old"])
    outside = tmp_path / "outside.sig"
    shutil.move(sig, outside)
    sig.symlink_to(outside)
    with pytest.raises(SignatureError, match="cannot open"):
        policy.check(tiny_voice_dir)


def _catch(outcome: list[BaseException], policy: TrustPolicy, bundle: Path) -> None:
    try:
        policy.check(bundle)
    except BaseException as exc:
        outcome.append(exc)


def test_confirm_catches_a_manifest_swapped_after_the_check(
        tiny_voice_dir: Path, keys: dict[str, tuple[Path, Path, str]]) -> None:
    policy = TrustPolicy.from_files([keys["old"][1]], required=True)
    sign(tiny_voice_dir, keys["old"])
    signed = policy.check(tiny_voice_dir)
    assert signed is not None
    # Between the check and the load someone rewrites the model and its manifest entry.
    make_tiny_voice.build_model(tiny_voice_dir / f"{VOICE}.onnx", gain=0.9)
    write_manifest(tiny_voice_dir, voice=VOICE, version="1.0.0",
                   sample_rate=make_tiny_voice.SAMPLE_RATE,
                   variants={"fp32": f"{VOICE}.onnx"}, config=f"{VOICE}.onnx.json",
                   source="swapped")
    with pytest.raises(SignatureError, match="not the manifest that was signed"):
        signed.confirm(read_bundle(tiny_voice_dir))


# -- the library ----------------------------------------------------------------------------


def test_library_refuses_unsigned_voices_when_required_and_reports_the_signer(
        tiny_voice_dir: Path, keys: dict[str, tuple[Path, Path, str]]) -> None:
    events: list[dict[str, Any]] = []
    models = tiny_voice_dir.parent
    lib = library(models, events, trusted_keys=[keys["old"][1], keys["new"][1]],
                  require_signature=True)
    with pytest.raises(VoiceLoadError, match="unsigned"):
        lib.get()
    sign(tiny_voice_dir, keys["new"])
    voice = lib.get()
    assert lib.signed_by(voice) == keys["new"][2]
    loaded = [e for e in events if e["event"] == "model_loaded"]
    assert loaded[-1]["signed_by"] == keys["new"][2]
    status = lib.status()
    assert status["voices"][0]["signed_by"] == keys["new"][2]
    assert status["last_reload"][VOICE]["signed_by"] == keys["new"][2]
    # A new version signed by nobody we trust is refused; the signed one keeps serving.
    make_tiny_voice.build_bundle(models, version="2.0.0", gain=0.8)
    sign(tiny_voice_dir, keys["rogue"])
    (result,) = lib.reload(VOICE)
    assert result.outcome == "rejected" and "not in models.trusted_keys" in str(result.reason)
    assert events[-1]["event"] == "model_rejected"
    assert lib.get() is voice and voice.version == "1.0.0"


def test_library_without_requirement_loads_unsigned_but_refuses_bad_signatures(
        tiny_voice_dir: Path, keys: dict[str, tuple[Path, Path, str]]) -> None:
    events: list[dict[str, Any]] = []
    lib = library(tiny_voice_dir.parent, events, trusted_keys=[keys["old"][1]])
    voice = lib.get()
    assert lib.signed_by(voice) is None and events[-1]["signed_by"] is None
    # Signing the live files is a change: the reload reports the signer instead of
    # "unchanged" (same model bytes, but now vouched for).
    sign(tiny_voice_dir, keys["old"])
    (result,) = lib.reload(VOICE)
    assert result.outcome == "loaded" and result.signed_by == keys["old"][2]
    assert lib.signed_by(lib.get()) == keys["old"][2]
    # A signature that does not verify is never ignored, even though none is required.
    sign(tiny_voice_dir, keys["rogue"])
    (result,) = lib.reload(VOICE)
    assert result.outcome == "rejected" and keys["rogue"][2] in str(result.reason)


def test_activate_of_an_unsigned_version_is_refused_and_current_stays(
        tiny_voice_dir: Path, keys: dict[str, tuple[Path, Path, str]], tmp_path: Path) -> None:
    models = tmp_path / "staged"
    voice_dir = models / VOICE
    voice_dir.mkdir(parents=True)
    shutil.copytree(tiny_voice_dir, voice_dir / "1.0.0")
    sign(voice_dir / "1.0.0", keys["old"])
    make_tiny_voice.build_bundle(models, version="2.0.0", gain=0.8, bundle=voice_dir / "2.0.0")
    (voice_dir / "current").symlink_to("1.0.0")
    events: list[dict[str, Any]] = []
    lib = library(models, events, trusted_keys=[keys["old"][1]], require_signature=True)
    assert lib.get().version == "1.0.0"
    result = lib.activate(VOICE, "2.0.0")
    assert result.outcome == "rejected" and "unsigned" in str(result.reason)
    assert os.readlink(voice_dir / "current") == "1.0.0"
    assert lib.get().version == "1.0.0"
    sign(voice_dir / "2.0.0", keys["old"])
    assert lib.activate(VOICE, "2.0.0").outcome == "loaded"
    assert os.readlink(voice_dir / "current") == "2.0.0"


class SwapAfterCheck(TrustPolicy):
    """The real policy, and right after its check (before the load) someone swaps the model and
    writes a matching manifest, as an attacker racing the loader would."""

    def check(self, bundle_dir: Path) -> Signed | None:
        signed = TrustPolicy.check(self, bundle_dir)
        make_tiny_voice.build_model(bundle_dir / f"{VOICE}.onnx", gain=0.9)
        write_manifest(bundle_dir, voice=VOICE, version="1.0.0",
                       sample_rate=make_tiny_voice.SAMPLE_RATE,
                       variants={"fp32": f"{VOICE}.onnx"}, config=f"{VOICE}.onnx.json",
                       source="swapped")
        return signed


def test_library_refuses_a_bundle_swapped_between_the_check_and_the_load(
        tiny_voice_dir: Path, keys: dict[str, tuple[Path, Path, str]]) -> None:
    events: list[dict[str, Any]] = []
    lib = library(tiny_voice_dir.parent, events, trusted_keys=[keys["old"][1]],
                  require_signature=True)
    sign(tiny_voice_dir, keys["old"])
    policy = TrustPolicy.from_files([keys["old"][1]], required=True)
    lib._validator._trust = SwapAfterCheck(policy.keys, policy.required)  # wiring only
    with pytest.raises(VoiceLoadError, match="not the manifest that was signed"):
        lib.get()
    assert events[-1]["event"] == "model_rejected"
