"""``tts-agent check-config``: validate the settings, then check what they name.

It is the unit's ``ExecStartPre=`` gate, so it checks only what can be checked without side
effects (nothing is opened for writing, no PCM is opened, no model is loaded), for the user it
runs as. One line per problem on standard error and exit 2; otherwise the effective settings as
JSON (secrets masked) and exit 0. What is checked and the options (``--explain``,
``--settings-only``, ``--gate``): docs/internals.md#check-config and
docs/operations.md#checking-a-configuration.
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.commands import USAGE, add_config_argument, settings_from_args

if TYPE_CHECKING:
    from agent.hardware.effective import EffectiveProfile
    from agent.settings import Settings

__all__ = ["VOICE_SETTINGS", "Check", "register", "run", "run_checks"]

VOICE_SETTINGS = frozenset({"models.default_voice", "text.lexicon", "chimes.dir",
                            "chimes.by_priority"})
"""Problems that ``--gate`` lets through: the agent reports them itself once it runs (a chime
that is not there: requests naming it are rejected, a default one is left out)."""


@dataclass(frozen=True)
class Check:
    """One check: the setting it is about, the problem (None: passed) and what was seen."""

    setting: str
    problem: str | None = None
    note: str = ""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "check-config",
        help="validate the settings and check the files, voice and sound device they name; "
             "print the settings (secrets masked)",
    )
    add_config_argument(parser)
    parser.add_argument("--explain", action="store_true",
                        help="print what was checked and which path rule applied, not the JSON")
    parser.add_argument("--settings-only", action="store_true",
                        help="validate the settings only: no file, voice or device is checked")
    parser.add_argument("--gate", action="store_true",
                        help="as the unit's start gate: the default voice's problems are "
                             "warnings (the agent starts and reports them)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    settings = settings_from_args(args, configure_logs=False)
    if args.settings_only:
        print(json.dumps(settings.masked(), indent=2, sort_keys=True))
        return 0
    checks = run_checks(settings)
    problems = [check for check in checks if check.problem]
    if args.gate:  # the running agent reports a refused voice and loads it once mended
        for check in [c for c in problems if c.setting in VOICE_SETTINGS]:
            print(f"tts-agent check-config: warning: {check.setting}: {check.problem} "
                  "(the agent starts and reports it)", file=sys.stderr)
        problems = [c for c in problems if c.setting not in VOICE_SETTINGS]
    for check in problems:
        print(f"tts-agent check-config: error: {check.setting}: {check.problem}", file=sys.stderr)
    if args.explain:
        for line in explain(settings, getattr(args, "config", None), checks):
            print(line)
    elif not problems:
        print(json.dumps(settings.masked(), indent=2, sort_keys=True))
    return USAGE if problems else 0


def run_checks(settings: Settings) -> list[Check]:
    """Every check, in the order of the settings page."""
    profile, profile_check = _profile(settings)
    checks = [*_models(settings, profile), _espeak(settings), profile_check]
    if settings.mqtt.enabled:
        checks += _mqtt_files(settings)
    checks.append(_writable_dir("cache.dir", settings.cache.dir))
    for name, path in (("mqtt.journal.file", settings.mqtt.journal.file),
                       ("health.prometheus_file", settings.health.prometheus_file),
                       ("synthesis.tune_file", settings.synthesis.tune_file)):
        if path is not None:
            checks.append(_writable_dir(name, path.parent))
    if settings.synthesis.profiles_dir is not None:
        checks.append(_readable_dir("synthesis.profiles_dir", settings.synthesis.profiles_dir))
    checks.append(_audio(settings, profile))
    if settings.text.lexicon is not None:
        checks += _lexicon(settings, settings.text.lexicon)
    return checks + _chimes(settings)


def _chimes(settings: Settings) -> list[Check]:
    """The chimes directory, and each default chime (``chimes.by_priority``) as it would play."""
    directory = settings.chimes.dir
    found = _readable_dir("chimes.dir", directory)
    if found.problem or not settings.chimes.by_priority:
        return [found]
    from agent.audio.chimes import ChimeError, Chimes

    chimes = Chimes(directory, settings.chimes.by_priority)
    checks = [found]
    for level, name in sorted(settings.chimes.by_priority.items()):
        try:
            chimes.get(name)
        except ChimeError as exc:
            checks.append(Check("chimes.by_priority", f"{level}: {exc}"))
    return checks


def _lexicon(settings: Settings, path: Path) -> list[Check]:
    """The lexicon file as the agent would load it: one check per problem found."""
    from agent.library.lexicon import voice_symbols
    from agent.text.lexicon import LexiconError
    from agent.text.lexicon_file import load_lexicon

    known = voice_symbols(settings.models.dir, settings.models.default_voice)
    try:
        lexicon = load_lexicon(path, *known) if known else load_lexicon(path)
    except LexiconError as exc:
        return [Check("text.lexicon", f"{exc.source}: {problem}") for problem in exc.problems]
    checked = f", IPA checked against {known[1]}" if known else ""
    count = f"{len(lexicon)} entr{'y' if len(lexicon) == 1 else 'ies'}"
    return [Check("text.lexicon", note=f"{path}: {count}{checked}")]


def _mqtt_files(settings: Settings) -> list[Check]:
    """Each file the MQTT settings name is a readable regular file; then they are read as
    ``tts-agent run`` reads them (:func:`agent.mqtt.credentials.check_files`: the password file
    bounded and never shown, the certificates and key loaded when ``mqtt.tls`` is on)."""
    from agent.mqtt.credentials import ClientConfigError, check_files

    mqtt = settings.mqtt
    checks = [_readable(f"mqtt.{name}", getattr(mqtt, name))
              for name in ("ca_file", "cert_file", "key_file", "password_file")
              if getattr(mqtt, name) is not None]
    if not any(check.problem for check in checks):
        try:
            check_files(mqtt)
        except ClientConfigError as exc:
            checks.append(Check("mqtt", str(exc)))
    return checks


def _who() -> str:
    import pwd

    uid = os.geteuid()
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


def _stat(setting: str, path: Path) -> os.stat_result | Check:
    """``path``'s status, or the problem of not reaching it."""
    try:
        return path.stat()
    except FileNotFoundError:
        return Check(setting, f"{path} does not exist")
    except NotADirectoryError:
        return Check(setting, f"{path}: a parent is not a directory")
    except OSError as exc:
        return Check(setting, f"cannot reach {path} as {_who()}: {exc.strerror}")


def _readable(setting: str, path: Path) -> Check:
    """A file the agent reads: it exists, is a regular file (a FIFO would block) and is
    readable by this user."""
    status = _stat(setting, path)
    if isinstance(status, Check):
        return status
    if not stat.S_ISREG(status.st_mode):
        return Check(setting, f"{path} is not a regular file")
    if not os.access(path, os.R_OK, effective_ids=True):
        return Check(setting, f"{path} is not readable by {_who()}")
    return Check(setting, note=f"{path} is readable")


def _readable_dir(setting: str, path: Path) -> Check:
    status = _stat(setting, path)
    if isinstance(status, Check):
        return status
    if not stat.S_ISDIR(status.st_mode):
        return Check(setting, f"{path} is not a directory")
    if not os.access(path, os.R_OK | os.X_OK, effective_ids=True):
        return Check(setting, f"{path} is not readable by {_who()}")
    return Check(setting, note=f"{path} is a readable directory")


def _writable_dir(setting: str, path: Path) -> Check:
    """A directory the agent writes into: writable, or creatable below its nearest existing
    parent."""
    existing = path
    while not os.path.lexists(existing) and existing != existing.parent:
        existing = existing.parent
    status = _stat(setting, existing)
    if isinstance(status, Check):
        return status
    if not stat.S_ISDIR(status.st_mode):
        return Check(setting, f"{existing} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK, effective_ids=True):
        return Check(setting, f"{existing} is not writable by {_who()}"
                     + ("" if existing == path else f", so {path} cannot be created"))
    return Check(setting, note=f"{path} is writable" if existing == path
                 else f"{path} will be created (in {existing})")


def _profile(settings: Settings) -> tuple[EffectiveProfile | None, Check]:
    """The hardware profile; an error when the ``profile`` setting names a broken or unknown
    one (without a named one, the agent runs without a profile: one thread, fp32)."""
    from agent.hardware.effective import resolve_profile
    from agent.hardware.profiles import ProfileError

    try:
        profile = resolve_profile(settings)
    except (ProfileError, OSError) as exc:
        if settings.profile:
            return None, Check("profile", str(exc))
        return None, Check("profile", note=f"no hardware profile ({exc}): the agent runs one "
                           "thread and the fp32 model")
    return profile, Check("profile", note=f"hardware profile {profile.name}")


def _served_variant(settings: Settings, profile: EffectiveProfile | None,
                    manifest: dict[str, Any]) -> str:
    """The variant the agent loads, chosen as the library chooses it
    (:func:`agent.library.variants.choose_variant`: a stale int8 is not served)."""
    from agent.library.variants import choose_variant

    if profile is not None:
        wanted = profile.runtime.model_variant
    else:
        wanted = "fp32" if settings.models.variant == "auto" else settings.models.variant
    if not manifest.get("variants"):
        return str(wanted)  # the bundle's check says what is wrong
    return choose_variant(manifest, wanted, auto=settings.models.variant == "auto").variant


def _models(settings: Settings, profile: EffectiveProfile | None) -> list[Check]:
    """``models.dir`` and the default voice in it."""
    from agent.voice.bundle import (
        BundleError,
        installed_voices,
        read_bundle,
        read_manifest,
        resolve_bundle_dir,
        verify_bundle,
    )
    from agent.voice.config import VoiceConfig, VoiceLoadError
    from agent.voice.signature import TrustPolicy

    models, name = settings.models.dir, settings.models.default_voice
    where = _readable_dir("models.dir", models)
    if where.problem:
        return [where]
    try:
        installed = installed_voices(models)
    except OSError as exc:
        return [where, Check("models.default_voice", f"cannot list {models}: {exc.strerror}")]
    if name not in installed:
        return [where, Check("models.default_voice", f"no voice named {name!r} in {models} "
                             f"(installed: {', '.join(installed) or 'none'})")]
    try:
        bundle_dir = resolve_bundle_dir(models / name)
        signed = TrustPolicy.from_files(settings.models.trusted_keys,  # over the raw bytes,
                                        settings.models.require_signature).check(bundle_dir)
        variant = _served_variant(settings, profile, read_manifest(bundle_dir))
        bundle = verify_bundle(bundle_dir, variant)  # then parsed (bounded) and checked
        if signed is not None:
            signed.confirm(bundle)
        VoiceConfig.from_file(bundle.config_path)  # parsed (bounded) as the agent will
    except (BundleError, VoiceLoadError, OSError) as exc:
        return [where, Check("models.default_voice", f"voice {name!r}: {exc}")]
    note = (f"{name} {bundle.version} in {bundle_dir}: the {variant} model and the voice config "
            "match their sha256, the config parses")
    try:
        read_bundle(bundle_dir)
        note += "; the other files' sizes match"
    except (BundleError, OSError) as exc:
        note += f"; a file that is not served does not match: {exc}"
    return [where, Check("models.default_voice", note=note)]


def _espeak(settings: Settings) -> Check:
    """The espeak-ng build the agent loads (agent.text.espeak_build), with the default voice's
    espeak-ng voice (``en`` when that voice is not readable: its own check says why)."""
    from agent.text.espeak import EspeakError, EspeakPhonemizer, describe
    from agent.voice.bundle import BundleError, resolve_bundle_dir
    from agent.voice.config import VoiceConfig, VoiceLoadError

    try:
        bundle = resolve_bundle_dir(settings.models.dir / settings.models.default_voice)
        voice = VoiceConfig.from_file(next(bundle.glob("*.onnx.json"))).espeak_voice
    except (StopIteration, BundleError, VoiceLoadError, OSError):
        voice = "en"
    try:
        EspeakPhonemizer(voice)
    except EspeakError as exc:
        return Check("espeak-ng", str(exc))
    return Check("espeak-ng", note=f"{describe()}; voice {voice!r}")


def _audio(settings: Settings, profile: EffectiveProfile | None) -> Check:
    from agent.audio.pcm_names import check_pcm_name
    from agent.settings import effective_audio

    device = effective_audio(settings.audio, profile).device  # the PCM the agent will open
    setting = ("audio.device" if profile is None or device == settings.audio.device
               else f"audio.device (from the hardware profile {profile.name})")
    result = check_pcm_name(device)
    return Check(setting, result.problem and f"{device!r}: {result.problem}", result.note)


def explain(settings: Settings, config: Path | None, checks: list[Check]) -> list[str]:
    """What ``--explain`` prints: the file read, the path rule, every check, whose access."""
    from agent.settings import DEFAULT_CONFIG_PATH
    from agent.settings.paths import path_rule

    if config is not None:
        source = f"{os.path.abspath(config)} (--config)"
    elif DEFAULT_CONFIG_PATH.is_file():
        source = f"{DEFAULT_CONFIG_PATH} (the default file)"
    else:
        source = f"none ({DEFAULT_CONFIG_PATH} does not exist): defaults and environment only"
    given = [f"{key} {'set' if 'dir' in section.model_fields_set else 'default'}"
             for key, section in (("models.dir", settings.models), ("cache.dir", settings.cache))]
    lines = [f"config file: {source}",
             f"path defaults: {path_rule()} ({', '.join(given)})"]
    lines += [f"{'FAIL' if c.problem else 'ok  '}  {c.setting}: {c.problem or c.note}"
              for c in checks]
    if settings.mqtt.enabled:  # its files are checked above, the connection is not
        lines.append(f"-     mqtt: not checked; `tts-agent send ping` checks it (the broker "
                     f"{settings.mqtt.host}:{settings.mqtt.port} is not contacted)")
    access = f"access checked as {_who()}"
    if os.geteuid() == 0:
        access += (", who reads every file: the unit's ExecStartPre runs check-config as the "
                   "service's own user, which checks its access")
    return [*lines, access]
