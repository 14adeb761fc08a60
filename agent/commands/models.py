"""``tts-agent models``: import, verify, activate and roll back voice bundles under models.dir.

Exit status: 0 ok; 2 refused or failed a check (an import that would replace something or is no
Piper voice, a bundle that does not verify, an unknown voice or version, a rejected version,
no voices at all); 1 a runtime failure (the disk). See docs/voices.md.
"""

from __future__ import annotations

import argparse
import json
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.commands import USAGE, CommandError, add_config_argument, settings_from_args
from agent.commands.models_sign import add_actions as add_signing_actions

if TYPE_CHECKING:
    from agent.settings import Settings
    from agent.voice.bundle import Bundle

REFUSED = USAGE
"""Exit status of a refusal or a failed check (usage/validation in the CLI's table)."""
_QUIET = "error"
"""What import, activate and rollback log without ``-v``: a rejected version is their error
line (and the JSON result on stdout), not a ``model_rejected`` warning before it."""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("models", help="manage installed voice bundles")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    imp = actions.add_parser(
        "import", help="add X.onnx + X.onnx.json under models/X/ (a new version of an "
                       "installed voice is added beside the others; nothing is replaced)")
    add_config_argument(imp)
    imp.add_argument("onnx", type=Path, help="the voice's .onnx file (its .onnx.json beside it)")
    imp.add_argument("--version", default="1.0.0", help="version recorded in the manifest")
    imp.add_argument("--source", default="local", help="where the voice came from (manifest)")
    imp.add_argument("--variant", default="fp32", choices=["fp32", "int8"])
    imp.add_argument("--models-dir", type=Path, default=None, help="default: models.dir setting")
    imp.add_argument("--activate", action="store_true",
                     help="validate the imported version (load, warm-up) and make it current")
    imp.set_defaults(handler=run_import)
    verify = actions.add_parser(
        "verify", help="check every installed bundle (every version) against its manifest and "
                       "load each model with onnxruntime")
    add_config_argument(verify)
    verify.add_argument("--deep", action="store_true",
                        help="also load each variant as the agent does and run its warm-up")
    verify.add_argument("--models-dir", type=Path, default=None, help="default: models.dir")
    verify.set_defaults(handler=run_verify)
    activate = actions.add_parser(
        "activate", help="validate a staged version and point models/<voice>/current at it")
    add_config_argument(activate)
    activate.add_argument("voice")
    activate.add_argument("version")
    activate.set_defaults(handler=run_activate)
    rollback = actions.add_parser(
        "rollback", help="point models/<voice>/current back at the previously live version "
                         "(once: a rollback clears previous)")
    add_config_argument(rollback)
    rollback.add_argument("voice", nargs="?", help="default: models.default_voice")
    rollback.set_defaults(handler=run_activate)
    add_signing_actions(actions)  # keygen, sign (agent/commands/models_sign.py)


def run_import(args: argparse.Namespace) -> int:
    from agent.library.install import ImportRefused, import_voice

    settings = settings_from_args(args, quiet=_QUIET)
    models_dir = args.models_dir or settings.models.dir
    try:
        bundle = import_voice(args.onnx, models_dir, version=args.version, source=args.source,
                              variant=args.variant, activate=args.activate, settings=settings)
    except ImportRefused as exc:
        raise CommandError(str(exc), status=REFUSED) from exc
    except OSError as exc:
        raise CommandError(f"cannot import {args.onnx}: {exc}") from exc
    print(json.dumps({"voice": bundle.voice, "dir": str(bundle.dir), "version": bundle.version,
                      "sha256": bundle.sha256}, indent=2))
    return 0


def installed_bundles(models_dir: Path) -> list[tuple[str, Path]]:
    """(label, bundle directory) of every installed bundle: a flat voice as ``NAME``, each
    version of a staged one as ``NAME VERSION`` (``(current)`` after the live one). A voice
    directory with neither a manifest nor versions is listed too (it fails its check)."""
    from agent.library.staging import CURRENT, link_target, staged_versions
    from agent.voice.bundle import MANIFEST_NAME

    found: list[tuple[str, Path]] = []
    if not models_dir.is_dir():
        return found
    for entry in sorted(models_dir.iterdir()):
        if entry.name.startswith(".") or not entry.is_dir():
            continue
        current = link_target(entry / CURRENT)
        versions = staged_versions(entry)
        if current is None and ((entry / MANIFEST_NAME).exists() or not versions):
            found.append((entry.name, entry))  # flat (or no bundle at all: its check says so)
            continue
        if current is not None and current not in versions:
            found.append((f"{entry.name} {current} (current)", entry / CURRENT))
        for version in versions:
            mark = " (current)" if version == current else ""
            found.append((f"{entry.name} {version}{mark}", entry / version))
    return found


def _check(bundle_dir: Path, settings: Settings, deep: bool) -> Bundle:
    """Raise with the reason unless the bundle verifies (and, ``deep``, loads and warms up)."""
    from dataclasses import replace

    from agent.library.install import max_model_bytes
    from agent.library.options import voice_options
    from agent.library.piper_check import check_bundle
    from agent.voice.voice import Voice

    bundle = check_bundle(bundle_dir, max_bytes=max_model_bytes(settings))
    if deep:
        for variant in sorted(bundle.variants):
            Voice.load(bundle_dir, replace(voice_options(settings), variant=variant))
    return bundle


def run_verify(args: argparse.Namespace) -> int:
    from agent.commands.models_sign import signature_note, trust_policy
    from agent.library.piper_check import NotAPiperVoice, one_line
    from agent.voice.signature import SignatureError
    from agent.voice.voice import VoiceLoadError

    settings = settings_from_args(args)
    policy = trust_policy(settings)
    models_dir: Path = args.models_dir or settings.models.dir
    bundles = installed_bundles(models_dir)
    if not bundles:
        raise CommandError(f"no voices installed in {models_dir.absolute()}", status=REFUSED)
    failed = 0
    for label, bundle_dir in bundles:
        try:
            note = signature_note(policy, bundle_dir,
                                  lambda d: _check(d, settings, args.deep))
            print(f"{label}: ok ({note})")
        except (NotAPiperVoice, VoiceLoadError, SignatureError) as exc:
            failed += 1
            print(f"{label}: FAILED: {one_line(exc)}")
    return REFUSED if failed else 0


def run_activate(args: argparse.Namespace) -> int:
    """``activate`` and ``rollback``: validated here (the model is loaded and warmed up), then the
    ``current`` link is switched; a running agent's watcher picks the switch up."""
    from agent.library.install import activate_version
    from agent.library.staging import PREVIOUS
    from agent.library.voices import VoiceLibrary, VoiceNotFound
    from agent.voice.voice import VoiceLoadError

    settings = settings_from_args(args, quiet=_QUIET)
    name = args.voice or settings.models.default_voice
    try:
        if args.action == "rollback":
            # this voice as the library's default: every switch is validated, loaded or not
            library = VoiceLibrary(settings.model_copy(update={"models": settings.models.model_copy(
                update={"default_voice": name, "watch": False})}))
            if (settings.models.dir / name / PREVIOUS).is_symlink():
                # what is live now, so the switch is a real reload (a broken live version is
                # what a rollback is for); rollback itself says why it cannot
                with suppress(VoiceLoadError, VoiceNotFound):
                    library.get(name)
            result = library.rollback(name)
        else:
            result = activate_version(settings, settings.models.dir, name, args.version)
    except VoiceNotFound as exc:
        raise CommandError(str(exc), status=REFUSED) from exc
    print(json.dumps(result.as_dict()))
    if result.outcome == "rejected":
        raise CommandError(f"{name} {result.version}: rejected: {result.reason}", status=REFUSED)
    return 0
