"""Voice bundles on disk and their ``manifest.json``.

A bundle is ``models/<voice>/`` (flat) or ``models/<voice>/<version>/`` with a ``current`` symlink
(staged): one ONNX file per variant, the Piper voice config and the manifest.
:func:`write_manifest` writes it and :func:`verify_bundle` checks every file against it before a
voice is loaded; nothing in a bundle is trusted before it is checked. The manifest's format and
the checks: docs/internals.md#voice-bundles (and docs/voices.md).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from agent import jsonbound
from agent.fsutil import atomic_write
from agent.voice.bundle_files import (
    MAX_BUNDLE_ENTRIES,
    SAFE_NAME,
    BundleError,
    check_bundle_dir,
    check_entry,
    reading,
    staged_target,
)
from agent.voice.files import (
    HashingReader,
    UnsafeFileError,
    hash_handle,
    open_regular,
    read_exact,
    read_handle,
)
from agent.voice.graph_scan import ModelFacts, Stream, scan_model

__all__ = [
    "DEFAULT_MAX_FILE_BYTES", "MANIFEST_NAME", "MAX_BUNDLE_ENTRIES", "Bundle", "BundleError",
    "ModelFacts", "check_model", "check_sha256", "installed_voices", "opened_model", "read_bundle",
    "read_manifest", "read_model", "read_verified", "resolve_bundle_dir", "sha256_file",
    "verify_bundle", "verify_model", "write_manifest",
]

_T = TypeVar("_T")

MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = 1
MAX_MANIFEST_BYTES = 1 << 20
DEFAULT_MAX_FILE_BYTES = 256 << 20
"""Largest bundle file read (``models.max_model_bytes``' default): a quarter of the shipped
unit's ``MemoryMax``, since onnxruntime and the first split of a streaming voice hold the model
more than once."""


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
    sizes: dict[str, int]
    """The manifest's size of every file in :attr:`sha256`: no read goes past it."""

    def model_path(self, variant: str) -> Path:
        """The ONNX file of ``variant`` ("fp32", "int8")."""
        try:
            return self.variants[variant]
        except KeyError:
            have = ", ".join(sorted(self.variants)) or "none"
            raise BundleError(
                f"voice {self.voice} has no {variant} variant (has: {have})") from None


def sha256_file(path: Path) -> str:
    """Hex sha256 of a regular file (not a link, never a FIFO), read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open_regular(path) as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def resolve_bundle_dir(voice_dir: Path) -> Path:
    """``voice_dir/current`` for a staged layout, else ``voice_dir`` itself.

    ``current`` must be a symbolic link to a version directory inside ``voice_dir`` (a plain
    name, itself no link); any other ``current`` is returned as it is, unresolved, and
    :func:`read_bundle` refuses it with the reason."""
    current = voice_dir / "current"
    if not os.path.lexists(current):
        return voice_dir
    if staged_target(voice_dir, current) is None:
        return current
    return current.resolve()


def installed_voices(models_dir: Path) -> list[str]:
    """Names of the voices in ``models_dir`` (visible directories whose bundle, after a staged
    ``current``, has a manifest), sorted. Raises :class:`OSError` when it cannot be listed."""
    return sorted(
        entry.name for entry in models_dir.iterdir()
        if not entry.name.startswith(".") and entry.is_dir()
        and (resolve_bundle_dir(entry) / MANIFEST_NAME).is_file()
    )


def _safe_file_name(name: Any) -> str:
    if not isinstance(name, str) or not SAFE_NAME.match(name) or name in (".", ".."):
        raise BundleError(f"manifest names an unsafe file: {name!r}")
    return name


def read_manifest(bundle_dir: Path) -> dict[str, Any]:
    """Parse and structurally check ``manifest.json``; file names must be plain names."""
    path = bundle_dir / MANIFEST_NAME
    try:
        with open_regular(path) as handle:
            raw = handle.read(MAX_MANIFEST_BYTES + 1)
        if len(raw) > MAX_MANIFEST_BYTES:
            raise BundleError(f"{path}: manifest larger than {MAX_MANIFEST_BYTES} bytes")
        data = jsonbound.loads(raw, max_bytes=MAX_MANIFEST_BYTES)
    except FileNotFoundError:
        raise BundleError(f"{bundle_dir}: no {MANIFEST_NAME}") from None
    except UnsafeFileError as exc:
        raise BundleError(str(exc)) from None
    except (OSError, jsonbound.JsonError) as exc:
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


def verify_bundle(bundle_dir: Path, variant: str | None = None, *,
                  max_file_bytes: int = DEFAULT_MAX_FILE_BYTES) -> Bundle:
    """Check the bundle's files against the manifest (what it may hold, size, then sha256),
    and that no model keeps weights in external data files.

    With ``variant``, only the files that variant is loaded from (its model and the voice
    config) are checked and listed in :attr:`Bundle.sha256`: the fp32 model, the bundle's
    largest file, is not hashed at every start of a device that runs the int8 one. Without it,
    every file is checked.
    """
    bundle = read_bundle(bundle_dir, variant, max_file_bytes=max_file_bytes)
    check_sha256(bundle)
    return bundle


def read_bundle(bundle_dir: Path, variant: str | None = None, *,
                max_file_bytes: int = DEFAULT_MAX_FILE_BYTES) -> Bundle:
    """The bundle as its manifest describes it, with what the directory holds, every file's
    kind and size checked (each at most ``max_file_bytes``) but not yet its sha256:
    :attr:`Bundle.sha256` holds the manifest's values until :func:`check_sha256` has confirmed
    them (:func:`verify_bundle` does both; a voice hashes while onnxruntime loads). Nothing is
    read but the manifest."""
    check_bundle_dir(bundle_dir)
    data = read_manifest(bundle_dir)
    wanted = set(data["files"])
    if variant is not None:
        if variant not in data["variants"]:
            have = ", ".join(sorted(data["variants"])) or "none"
            raise BundleError(f"voice {data['voice']} has no {variant} variant (has: {have})")
        wanted = {data["config"], data["variants"][variant]}
    hashes: dict[str, str] = {}
    sizes: dict[str, int] = {}
    for name, entry in data["files"].items():
        if name in wanted:
            hashes[name], sizes[name] = check_entry(bundle_dir, name, entry, max_file_bytes)
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
        sizes=sizes,
    )


def _hash_and_scan(bundle: Bundle, name: str, scan: bool) -> ModelFacts | None:
    """Hash ``name`` (bounded by its size) and, for a model, scan its graph from the same open
    file; raise :class:`BundleError` unless the sha256 matches and the graph is acceptable."""
    path, size = bundle.dir / name, bundle.sizes[name]
    with reading(path), open_regular(path) as handle:
        if hash_handle(path, handle, size) != bundle.sha256[name]:
            raise BundleError(f"{path}: sha256 does not match the manifest")
        if not scan:
            return None
        handle.seek(0)
        return scan_model(handle, size)


def check_sha256(bundle: Bundle) -> dict[str, ModelFacts]:
    """Raise :class:`BundleError` unless every file of ``bundle`` has its manifest sha256 (and
    every model in it passes :func:`~agent.voice.graph_scan.scan_model`); the models' facts by
    file name."""
    models = {path.name for path in bundle.variants.values()}
    facts: dict[str, ModelFacts] = {}
    for name in bundle.sha256:
        found = _hash_and_scan(bundle, name, scan=name in models)
        if found is not None:
            facts[name] = found
    return facts


@contextmanager
def opened_model(bundle: Bundle, variant: str) -> Iterator[BinaryIO]:
    """The model of ``variant`` held open (checked to be a regular file, not a link), for
    :func:`read_model`: a model renamed over meanwhile is never read."""
    path = bundle.model_path(variant)
    with reading(path), open_regular(path) as handle:
        yield handle


def read_model(bundle: Bundle, variant: str,
               opened: BinaryIO | None = None) -> tuple[bytes, ModelFacts]:
    """The model of ``variant`` read once into memory (at most its manifest size, which
    :func:`read_bundle` bounded by ``models.max_model_bytes``), checked against its sha256 and
    scanned, and its facts: the caller loads these very bytes, so a file rewritten in place
    later changes nothing that loads. From ``opened`` when the caller holds it open."""
    name = bundle.model_path(variant).name
    if name not in bundle.sha256:
        raise BundleError(f"{bundle.dir / MANIFEST_NAME}: {name} has no sha256 entry")
    path, size = bundle.dir / name, bundle.sizes[name]
    with reading(path), (open_regular(path) if opened is None else nullcontext(opened)) as handle:
        data, digest = read_handle(path, handle, size)
        if digest != bundle.sha256[name]:
            raise BundleError(f"{path}: sha256 does not match the manifest")
        return data, scan_model(io.BytesIO(data), size)


def check_model(bundle: Bundle, variant: str, opened: BinaryIO | None = None) -> None:
    """Raise :class:`BundleError` unless the model of ``variant`` matches its manifest sha256:
    hashed as it streams past, none of it held (a session from the optimised-model cache
    needs no copy of the model: a lower peak RSS, ``bench/daemon_startup.py``). From
    ``opened``'s start when the caller holds it open."""
    _stream_model(bundle, variant, opened, lambda stream, size: None)


def verify_model(bundle: Bundle, variant: str, opened: BinaryIO | None = None) -> ModelFacts:
    """The model's :class:`ModelFacts`, scanned in the same streamed pass that matched its
    bytes to the manifest (:func:`check_model`): the facts are those of the hashed bytes."""
    return _stream_model(bundle, variant, opened, scan_model)


def _stream_model(bundle: Bundle, variant: str, opened: BinaryIO | None,
                  scan: Callable[[Stream, int], _T]) -> _T:
    name = bundle.model_path(variant).name
    if name not in bundle.sha256:
        raise BundleError(f"{bundle.dir / MANIFEST_NAME}: {name} has no sha256 entry")
    path, size = bundle.dir / name, bundle.sizes[name]
    with reading(path), (open_regular(path) if opened is None else nullcontext(opened)) as handle:
        handle.seek(0)
        stream = HashingReader(path, handle, size)
        found = scan(stream, size)
        digest = stream.finish()
    if digest != bundle.sha256[name]:
        raise BundleError(f"{path}: sha256 does not match the manifest")
    return found


def read_verified(bundle: Bundle, name: str, limit: int) -> bytes:
    """The bytes of ``name`` once they match the manifest's sha256: read once, hashed, and
    returned, so what the caller parses is what was hashed. At most ``limit`` bytes."""
    path = bundle.dir / name
    if name not in bundle.sha256:
        raise BundleError(f"{bundle.dir / MANIFEST_NAME}: {name} has no sha256 entry")
    if bundle.sizes[name] > limit:
        raise BundleError(f"{path}: {bundle.sizes[name]} bytes, larger than {limit}")
    with reading(path):
        data, digest = read_exact(path, bundle.sizes[name])
    if digest != bundle.sha256[name]:
        raise BundleError(f"{path}: sha256 does not match the manifest")
    return data


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

