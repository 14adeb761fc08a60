"""Bundles: manifests are written, verified, and tampering is caught."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agent.voice.bundle import BundleError, resolve_bundle_dir, verify_bundle


def test_verify_accepts_a_fresh_bundle(tiny_voice_dir: Path) -> None:
    bundle = verify_bundle(tiny_voice_dir)
    assert bundle.voice == "tiny-test"
    assert bundle.sample_rate == 16000
    assert set(bundle.sha256) == {"tiny-test.onnx", "tiny-test.onnx.json"}
    assert bundle.model_path("fp32") == tiny_voice_dir / "tiny-test.onnx"
    with pytest.raises(BundleError, match="no int8 variant"):
        bundle.model_path("int8")


def test_truncated_model_is_rejected(tiny_voice_dir: Path) -> None:
    model = tiny_voice_dir / "tiny-test.onnx"
    model.write_bytes(model.read_bytes()[:100])
    with pytest.raises(BundleError, match="size"):
        verify_bundle(tiny_voice_dir)


def test_same_size_different_content_is_rejected(tiny_voice_dir: Path) -> None:
    model = tiny_voice_dir / "tiny-test.onnx"
    data = bytearray(model.read_bytes())
    data[-1] ^= 0xFF
    model.write_bytes(bytes(data))
    with pytest.raises(BundleError, match="sha256"):
        verify_bundle(tiny_voice_dir)


def test_missing_manifest(tiny_voice_dir: Path) -> None:
    (tiny_voice_dir / "manifest.json").unlink()
    with pytest.raises(BundleError, match=r"no manifest\.json"):
        verify_bundle(tiny_voice_dir)


def test_a_deeply_nested_manifest_is_refused_not_a_crash(tiny_voice_dir: Path) -> None:
    (tiny_voice_dir / "manifest.json").write_bytes(b"[" * 50_000)  # no RecursionError
    with pytest.raises(BundleError, match="unreadable manifest: nested too deeply"):
        verify_bundle(tiny_voice_dir)


@pytest.mark.parametrize("name", ["../etc/passwd", "/abs.onnx", "a/b.onnx", ".."])
def test_manifest_cannot_point_outside_the_bundle(tiny_voice_dir: Path, name: str) -> None:
    path = tiny_voice_dir / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["variants"]["fp32"] = name
    path.write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match="unsafe file"):
        verify_bundle(tiny_voice_dir)


def test_staged_layout_follows_current(tiny_voice_dir: Path, tmp_path: Path) -> None:
    voice_dir = tmp_path / "staged" / "tiny-test"
    voice_dir.mkdir(parents=True)
    os.rename(tiny_voice_dir, voice_dir / "1.0.0")
    (voice_dir / "current").symlink_to("1.0.0")
    assert resolve_bundle_dir(voice_dir) == (voice_dir / "1.0.0").resolve()
    assert verify_bundle(resolve_bundle_dir(voice_dir)).voice == "tiny-test"


def test_verifying_one_variant_hashes_only_its_files(tiny_voice_dir: Path) -> None:
    import shutil

    from agent.voice.bundle import write_manifest

    shutil.copyfile(tiny_voice_dir / "tiny-test.onnx", tiny_voice_dir / "tiny-test.int8.onnx")
    write_manifest(tiny_voice_dir, voice="tiny-test", version="1", sample_rate=16000,
                   variants={"fp32": "tiny-test.onnx", "int8": "tiny-test.int8.onnx"},
                   config="tiny-test.onnx.json", source="t")
    corrupt = tiny_voice_dir / "tiny-test.int8.onnx"
    corrupt.write_bytes(bytes(reversed(corrupt.read_bytes())))  # same size, other bytes
    fp32 = verify_bundle(tiny_voice_dir, "fp32")
    assert set(fp32.sha256) == {"tiny-test.onnx", "tiny-test.onnx.json"}
    with pytest.raises(BundleError, match="sha256"):
        verify_bundle(tiny_voice_dir, "int8")
    with pytest.raises(BundleError, match="sha256"):
        verify_bundle(tiny_voice_dir)
    with pytest.raises(BundleError, match="no fp16 variant"):
        verify_bundle(tiny_voice_dir, "fp16")
