"""Detached ed25519 signatures over a bundle's ``manifest.json`` (``manifest.json.sig``).

Since the manifest holds the sha256 of every file, a valid signature covers the whole bundle.
:class:`TrustPolicy` is what the device checks with (``models.trusted_keys``,
``models.require_signature``), before anything else of the bundle is used; :meth:`Signed.confirm`
checks afterwards that what was loaded is what the signed manifest says. ``cryptography`` is
imported only when a key is used. The format and key ids: docs/internals.md#manifest-signatures
(and docs/voices.md).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from agent import jsonbound
from agent.fsutil import atomic_write
from agent.voice.bundle import MANIFEST_NAME, MAX_MANIFEST_BYTES, Bundle, BundleError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

__all__ = [
    "MAX_TRUSTED_KEYS",
    "SIGNATURE_NAME",
    "SignatureError",
    "Signed",
    "TrustPolicy",
    "TrustedKey",
    "check_trust_settings",
    "generate_keypair",
    "load_private_key",
    "load_public_key",
    "sign_bundle",
]

SIGNATURE_NAME = MANIFEST_NAME + ".sig"
SIGNATURE_FORMAT = 1
MAX_SIGNATURE_BYTES = 4096
"""A signature file is a few hundred bytes; anything above this is refused unread."""
MAX_KEY_BYTES = 4096
"""An ed25519 PEM key is about a hundred bytes."""
MAX_TRUSTED_KEYS = 16
KEY_ID_HEX = 16


class SignatureError(BundleError):
    """A bundle's signature is missing, malformed, by an untrusted key or does not verify; or a
    key file is unusable."""


def read_small(path: Path, limit: int, what: str) -> bytes | None:
    """The bytes of the regular file ``path`` (at most ``limit``), None when it does not exist.

    Never follows a symlink at the last component and never blocks on a FIFO or device: the
    file is opened non-blocking without following links and must be a regular file.
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as exc:  # ELOOP: a symlink
        raise SignatureError(f"{path}: cannot open {what}: {exc.strerror or exc}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SignatureError(f"{path}: {what} is not a regular file")
        if info.st_size > limit:
            raise SignatureError(f"{path}: {what} larger than {limit} bytes")
        data = os.read(fd, limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise SignatureError(f"{path}: {what} larger than {limit} bytes")
    return data


def key_id(public: Ed25519PublicKey) -> str:
    """First 16 hex digits of the sha256 of the raw public key."""
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    raw = public.public_bytes(Encoding.Raw, PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:KEY_ID_HEX]


@dataclass(frozen=True, slots=True)
class TrustedKey:
    """One trusted public key: its id, the file it came from, the key."""

    key_id: str
    path: Path
    key: Ed25519PublicKey


def load_public_key(path: Path) -> TrustedKey:
    """The ed25519 public key in the PEM file ``path``; SignatureError with the reason if not."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    data = read_small(path, MAX_KEY_BYTES, "public key")
    if data is None:
        raise SignatureError(f"{path}: public key file not found")
    try:
        key = load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise SignatureError(f"{path}: not a PEM public key") from exc
    if not isinstance(key, Ed25519PublicKey):
        raise SignatureError(f"{path}: not an ed25519 public key")
    return TrustedKey(key_id(key), path, key)


def load_private_key(path: Path) -> Ed25519PrivateKey:
    """The ed25519 private key in the PEM file ``path`` (unencrypted PKCS#8), refused when
    other users may read the file."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    data = read_small(path, MAX_KEY_BYTES, "private key")
    if data is None:
        raise SignatureError(f"{path}: private key file not found")
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        raise SignatureError(f"{path}: private key is readable by others (mode {mode:04o}); "
                             "chmod 600 it")
    try:
        key = load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise SignatureError(f"{path}: not an unencrypted PEM private key") from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise SignatureError(f"{path}: not an ed25519 private key")
    return key


def generate_keypair(prefix: Path) -> tuple[Path, Path, str]:
    """A new key pair in ``<prefix>.key`` (private, mode 0600) and ``<prefix>.pub``; refuses to
    overwrite either. Returns both paths and the key id."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        NoEncryption,
        PrivateFormat,
        PublicFormat,
    )

    private_path = prefix.with_name(prefix.name + ".key")
    public_path = prefix.with_name(prefix.name + ".pub")
    for path in (private_path, public_path):
        if path.exists() or path.is_symlink():
            raise SignatureError(f"{path}: already exists; not overwriting a key")
    key = Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    public_pem = key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as handle:
        os.fchmod(handle.fileno(), 0o600)  # whatever the umask
        handle.write(private_pem)
    atomic_write(public_path, public_pem, prefix=".pub-")
    return private_path, public_path, key_id(key.public_key())


def sign_bundle(bundle_dir: Path, key: Ed25519PrivateKey) -> dict[str, Any]:
    """Sign ``bundle_dir/manifest.json`` as it is now into ``manifest.json.sig`` (atomically);
    returns the signature document. The caller checks the bundle against its manifest first."""
    manifest = read_small(bundle_dir / MANIFEST_NAME, MAX_MANIFEST_BYTES, "manifest")
    if manifest is None:
        raise SignatureError(f"{bundle_dir}: no {MANIFEST_NAME} to sign")
    document = {
        "format": SIGNATURE_FORMAT,
        "algorithm": "ed25519",
        "key_id": key_id(key.public_key()),
        "manifest_sha256": hashlib.sha256(manifest).hexdigest(),
        "signature": base64.b64encode(key.sign(manifest)).decode("ascii"),
    }
    atomic_write(bundle_dir / SIGNATURE_NAME, (json.dumps(document, indent=2) + "\n").encode(),
                 prefix=".sig-")
    return document


def _parse_signature(path: Path, data: bytes) -> tuple[str, str, bytes]:
    """(key id, manifest sha256, 64 signature bytes) of a signature file's bytes."""
    try:
        document = jsonbound.loads(data, max_bytes=MAX_SIGNATURE_BYTES)
    except jsonbound.JsonError as exc:
        raise SignatureError(f"{path}: unreadable signature file: {exc}") from exc
    if not isinstance(document, dict) or document.get("format") != SIGNATURE_FORMAT:
        raise SignatureError(f"{path}: not a format-{SIGNATURE_FORMAT} signature file")
    if document.get("algorithm") != "ed25519":
        raise SignatureError(f"{path}: algorithm {document.get('algorithm')!r} is not ed25519")
    fields = [document.get(name) for name in ("key_id", "manifest_sha256", "signature")]
    if not all(isinstance(value, str) for value in fields):
        raise SignatureError(f"{path}: key_id, manifest_sha256 or signature missing")
    try:
        raw = base64.b64decode(str(fields[2]), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise SignatureError(f"{path}: signature is not base64") from exc
    if len(raw) != 64:
        raise SignatureError(f"{path}: signature is {len(raw)} bytes, not 64")
    return str(fields[0]), str(fields[1]), raw


@dataclass(frozen=True, slots=True)
class Signed:
    """A bundle whose manifest verified: the key that signed it and the signed manifest."""

    key_id: str
    manifest: dict[str, Any]
    signature_sha256: str
    """sha256 of the signature file's bytes (to tell a re-signed bundle from an unchanged one)."""

    def confirm(self, bundle: Bundle) -> None:
        """Raise SignatureError unless ``bundle`` (as the loader read it) is what the signed
        manifest describes: same voice, version, rate, config, and every checked file's sha256."""
        manifest = self.manifest
        files = manifest.get("files") if isinstance(manifest.get("files"), dict) else {}
        same = (bundle.voice == manifest.get("voice") and bundle.version == manifest.get("version")
                and bundle.sample_rate == manifest.get("sample_rate")
                and bundle.config_path.name == manifest.get("config")
                and {k: v.name for k, v in bundle.variants.items()} == manifest.get("variants"))
        for name, digest in bundle.sha256.items():
            entry = files.get(name) if isinstance(files, dict) else None
            same = same and isinstance(entry, dict) and entry.get("sha256") == digest
        if not same:
            raise SignatureError(f"{bundle.dir / MANIFEST_NAME}: changed while it was loaded; "
                                 "not the manifest that was signed")


@dataclass(frozen=True, slots=True)
class TrustPolicy:
    """The keys a device trusts and whether it requires a signature.

    - no keys: signatures are not checked (a ``manifest.json.sig`` is ignored);
    - keys, not required: an unsigned bundle loads; a signed one must verify with a trusted key
      (a bad signature or an unknown key is refused, never ignored);
    - required: every bundle must be signed by a trusted key.
    """

    keys: tuple[TrustedKey, ...] = ()
    required: bool = False

    @classmethod
    def from_files(cls, paths: Sequence[Path], required: bool) -> TrustPolicy:
        """Load the public keys at ``paths`` (SignatureError names the first bad one)."""
        if len(paths) > MAX_TRUSTED_KEYS:
            raise SignatureError(f"at most {MAX_TRUSTED_KEYS} trusted keys, got {len(paths)}")
        if required and not paths:
            raise SignatureError("models.require_signature is set but models.trusted_keys "
                                 "names no key")
        return cls(tuple(load_public_key(Path(path)) for path in paths), required)

    @property
    def key_ids(self) -> list[str]:
        return [key.key_id for key in self.keys]

    def check(self, bundle_dir: Path) -> Signed | None:
        """The verified signature of ``bundle_dir``, None for an unsigned bundle this policy
        accepts (or when no keys are configured); SignatureError with the reason otherwise."""
        if not self.keys:
            return None
        sig_path = bundle_dir / SIGNATURE_NAME
        data = read_small(sig_path, MAX_SIGNATURE_BYTES, "signature file")
        if data is None:
            if self.required:
                raise SignatureError(f"{bundle_dir}: unsigned (no {SIGNATURE_NAME}) and "
                                     "models.require_signature is set")
            return None
        parsed = _parse_signature(sig_path, data)
        signer = parsed[0]
        trusted = {key.key_id: key for key in self.keys}
        if signer not in trusted:
            raise SignatureError(f"{sig_path}: signed by key {signer!r}, which is not in "
                                 f"models.trusted_keys (trusted: {', '.join(trusted)})")
        manifest = read_small(bundle_dir / MANIFEST_NAME, MAX_MANIFEST_BYTES, "manifest")
        if manifest is None:
            raise SignatureError(f"{bundle_dir}: no {MANIFEST_NAME}")
        return _verified(sig_path, trusted[signer], manifest, parsed, data)

    def unchanged(self, bundle_dir: Path, signed: Signed | None) -> bool:
        """True when ``bundle_dir``'s signature file is still the one ``signed`` was made from
        (or still absent for an unsigned bundle); always True when no keys are configured."""
        if not self.keys:
            return True
        try:
            data = read_small(bundle_dir / SIGNATURE_NAME, MAX_SIGNATURE_BYTES, "signature file")
        except SignatureError:
            return False
        if data is None or signed is None:
            return data is None and signed is None
        return hashlib.sha256(data).hexdigest() == signed.signature_sha256


class TrustSettings(Protocol):
    """What the ``[models]`` settings say about signatures."""

    @property
    def trusted_keys(self) -> Sequence[Path]: ...
    @property
    def require_signature(self) -> bool: ...


S = TypeVar("S", bound=TrustSettings)


def check_trust_settings(section: S) -> S:
    """Settings validation of ``section``: ValueError (one line) unless
    :meth:`TrustPolicy.from_files` loads its keys."""
    try:
        TrustPolicy.from_files(section.trusted_keys, section.require_signature)
    except SignatureError as exc:
        raise ValueError(str(exc)) from None
    return section


def _verified(sig_path: Path, key: TrustedKey, manifest: bytes,
              parsed_signature: tuple[str, str, bytes], sig_bytes: bytes) -> Signed:
    """The :class:`Signed` of ``manifest`` when ``parsed_signature`` (key id, manifest sha256,
    signature) verifies with ``key``."""
    from cryptography.exceptions import InvalidSignature

    _, manifest_sha256, raw = parsed_signature

    digest = hashlib.sha256(manifest).hexdigest()
    if digest != manifest_sha256:
        raise SignatureError(f"{sig_path}: {MANIFEST_NAME} changed after it was signed "
                             f"(signed sha256 {manifest_sha256[:16]}, now {digest[:16]}); "
                             "sign it again")
    try:
        key.key.verify(raw, manifest)
    except InvalidSignature:
        raise SignatureError(f"{sig_path}: signature does not verify with trusted key "
                             f"{key.key_id} ({key.path})") from None
    try:  # verified over these raw bytes above; parsed only now, bounded
        parsed = jsonbound.loads(manifest, max_bytes=MAX_MANIFEST_BYTES)
    except jsonbound.JsonError as exc:
        raise SignatureError(f"{sig_path}: the signed manifest is not JSON: {exc}") from exc
    if not isinstance(parsed, dict):
        raise SignatureError(f"{sig_path}: the signed manifest is not a JSON object")
    return Signed(key.key_id, parsed, hashlib.sha256(sig_bytes).hexdigest())
