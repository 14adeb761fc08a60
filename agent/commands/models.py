"""``tts-agent models import``: lay out a Piper voice as a verified bundle under models.dir."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from agent.commands import CommandError, add_config_argument, settings_from_args
from agent.commands.models_sign import add_actions as add_signing_actions


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("models", help="manage installed voice bundles")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    imp = actions.add_parser("import",
                             help="copy X.onnx + X.onnx.json into models/X/ with a manifest")
    add_config_argument(imp)
    imp.add_argument("onnx", type=Path, help="the voice's .onnx file (its .onnx.json beside it)")
    imp.add_argument("--version", default="1.0.0", help="version recorded in the manifest")
    imp.add_argument("--source", default="local", help="where the voice came from (manifest)")
    imp.add_argument("--variant", default="fp32", choices=["fp32", "int8"])
    imp.add_argument("--models-dir", type=Path, default=None, help="default: models.dir setting")
    imp.set_defaults(handler=run_import)
    verify = actions.add_parser("verify", help="check every installed bundle against its manifest")
    add_config_argument(verify)
    verify.set_defaults(handler=run_verify)
    activate = actions.add_parser(
        "activate", help="validate a staged version and point models/<voice>/current at it")
    add_config_argument(activate)
    activate.add_argument("voice")
    activate.add_argument("version")
    activate.set_defaults(handler=run_activate)
    rollback = actions.add_parser(
        "rollback", help="point models/<voice>/current back at the previously live version")
    add_config_argument(rollback)
    rollback.add_argument("voice", nargs="?", help="default: models.default_voice")
    rollback.set_defaults(handler=run_activate)
    add_signing_actions(actions)  # keygen, sign (agent/commands/models_sign.py)


def run_import(args: argparse.Namespace) -> int:
    from agent.voice.bundle import BundleError, import_voice

    settings = settings_from_args(args)
    models_dir = args.models_dir or settings.models.dir
    try:
        bundle = import_voice(args.onnx, models_dir, version=args.version, source=args.source,
                              variant=args.variant)
    except BundleError as exc:
        raise CommandError(str(exc)) from exc
    except OSError as exc:
        raise CommandError(f"cannot import {args.onnx}: {exc}") from exc
    print(json.dumps({"voice": bundle.voice, "dir": str(bundle.dir), "version": bundle.version,
                      "sha256": bundle.sha256}, indent=2))
    return 0


def run_verify(args: argparse.Namespace) -> int:
    from agent.commands.models_sign import signature_note, trust_policy
    from agent.library.voices import VoiceLibrary
    from agent.voice.bundle import BundleError, resolve_bundle_dir, verify_bundle

    settings = settings_from_args(args)
    policy = trust_policy(settings)
    failed = 0
    for name in VoiceLibrary(settings).names():
        try:
            note = signature_note(policy, resolve_bundle_dir(settings.models.dir / name),
                                  verify_bundle)
            print(f"{name}: ok ({note})")
        except BundleError as exc:
            failed += 1
            print(f"{name}: FAILED: {exc}")
    return 1 if failed else 0


def run_activate(args: argparse.Namespace) -> int:
    """``activate`` and ``rollback``: validated here (the model is loaded and warmed up), then the
    ``current`` link is switched; a running agent's watcher picks the switch up."""
    from agent.library.voices import VoiceLibrary, VoiceNotFound

    settings = settings_from_args(args)
    library = VoiceLibrary(settings)
    name = args.voice or settings.models.default_voice
    try:
        if args.action == "rollback":
            result = library.rollback(name)
        else:
            library.get(name)  # the live version must load before anything is switched
            result = library.activate(name, args.version)
    except VoiceNotFound as exc:
        raise CommandError(str(exc)) from exc
    print(json.dumps(result.as_dict()))
    if result.outcome == "rejected":
        raise CommandError(f"{name} {result.version}: rejected: {result.reason}")
    return 0
