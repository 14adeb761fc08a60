"""``tts-agent models keygen`` and ``tts-agent models sign``: the build side of signed voices.

``keygen PREFIX`` writes a new ed25519 key pair, ``PREFIX.key`` (private, mode 0600; keep it on
the build machine) and ``PREFIX.pub`` (what devices list in ``models.trusted_keys``).
``sign BUNDLE --key PREFIX.key`` checks the bundle against its manifest and writes
``manifest.json.sig`` beside it (see :mod:`agent.voice.signature`).

These are actions of ``tts-agent models``: :mod:`agent.commands.models` adds them with
:func:`add_actions`; :func:`register` adds nothing of its own. :func:`signature_note` is what
``models verify`` says about a bundle's signature.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.commands import USAGE, CommandError

if TYPE_CHECKING:
    from collections.abc import Callable

    from agent.settings import Settings
    from agent.voice.bundle import Bundle
    from agent.voice.signature import TrustPolicy

__all__ = ["add_actions", "register", "signature_note", "trust_policy"]


def register(subparsers: Any) -> None:
    """Nothing at the top level: ``keygen`` and ``sign`` are ``models`` actions."""


def add_actions(actions: Any) -> None:
    """Add ``keygen`` and ``sign`` to the ``models`` sub-command's ``actions``."""
    keygen = actions.add_parser(
        "keygen", help="make an ed25519 key pair for signing voices (PREFIX.key, PREFIX.pub)")
    keygen.add_argument("prefix", type=Path, help="path and name of the key files, no suffix")
    keygen.set_defaults(handler=run_keygen)
    sign = actions.add_parser(
        "sign", help="check a bundle against its manifest and sign it (manifest.json.sig)")
    sign.add_argument("bundle", type=Path,
                      help="bundle directory (a voice directory signs its current version)")
    sign.add_argument("--key", type=Path, required=True, help="the private key (PREFIX.key)")
    sign.set_defaults(handler=run_sign)


def run_keygen(args: argparse.Namespace) -> int:
    from agent.voice.signature import SignatureError, generate_keypair

    try:
        private, public, key_id = generate_keypair(args.prefix)
    except SignatureError as exc:
        raise CommandError(str(exc), status=USAGE) from exc
    except OSError as exc:
        raise CommandError(f"cannot write the key pair {args.prefix}: {exc}") from exc
    print(json.dumps({"key_id": key_id, "private_key": str(private),
                      "public_key": str(public)}, indent=2))
    return 0


def run_sign(args: argparse.Namespace) -> int:
    """Refuses (status 2) a bundle whose files do not match its manifest: a signature vouches
    for the manifest, so it must describe the files. Checks its own signature afterwards."""
    from agent.voice.bundle import BundleError, resolve_bundle_dir, verify_bundle
    from agent.voice.signature import (
        TrustPolicy,
        load_private_key,
        load_public_key,
        sign_bundle,
    )

    bundle_dir = resolve_bundle_dir(args.bundle)
    try:
        key = load_private_key(args.key)
        verify_bundle(bundle_dir)
        document = sign_bundle(bundle_dir, key)
    except BundleError as exc:  # SignatureError included
        raise CommandError(f"not signed: {exc}", status=USAGE) from exc
    except OSError as exc:
        raise CommandError(f"cannot sign {bundle_dir}: {exc}") from exc
    public = args.key.with_suffix(".pub")
    if public.is_file():  # the pair keygen wrote: check the signature as a device will
        try:
            signature_note(TrustPolicy((load_public_key(public),), required=True), bundle_dir,
                           verify_bundle)
        except BundleError as exc:
            raise CommandError(f"signed, but the check with {public} failed: {exc}") from exc
    print(json.dumps({"dir": str(bundle_dir.resolve()), "key_id": document["key_id"],
                      "signature": str(bundle_dir.resolve() / "manifest.json.sig")}, indent=2))
    return 0


def trust_policy(settings: Settings) -> TrustPolicy:
    """The settings' :class:`TrustPolicy` (a key file that went bad since: status 2)."""
    from agent.voice.signature import SignatureError, TrustPolicy

    models = settings.models
    try:
        return TrustPolicy.from_files(models.trusted_keys, models.require_signature)
    except SignatureError as exc:
        raise CommandError(str(exc), status=USAGE) from exc


def signature_note(policy: TrustPolicy, bundle_dir: Path,
                   check: Callable[[Path], Bundle]) -> str:
    """Check ``bundle_dir``'s signature, then its files with ``check`` (e.g.
    :func:`~agent.voice.bundle.verify_bundle`), then that the bundle ``check`` read is the signed
    one; returns what ``models verify`` says about the signature (``signed by KEY``,
    ``unsigned`` or ``signature not checked: ...``). Raises
    :class:`~agent.voice.bundle.BundleError` (or :class:`~agent.voice.signature.SignatureError`)
    with the reason when either is refused."""
    signed = policy.check(bundle_dir)  # before anything else of the bundle is read
    bundle = check(bundle_dir)
    if signed is not None:
        signed.confirm(bundle)
        return f"signed by {signed.key_id}"
    return "unsigned" if policy.keys else "signature not checked: no models.trusted_keys"
