"""``models import``: put a Piper voice (``X.onnx`` + ``X.onnx.json``) into ``models.dir`` without
ever destroying what is installed.

A new voice becomes a flat bundle, a new version of a staged voice a version directory (built
hidden, renamed into place), and a flat voice is made staged first without ever leaving
``models/X`` incomplete. The copy is checked as a Piper voice before its manifest is written;
every refusal leaves the models directory as it was. The steps:
docs/internals.md#importing-a-voice.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from agent.library.piper_check import (
    DEFAULT_MAX_MODEL_BYTES,
    NotAPiperVoice,
    check_config,
    check_model,
    one_line,
)
from agent.library.staging import CURRENT, NAME, PREVIOUS, replace_symlink
from agent.voice.bundle import (
    MANIFEST_NAME,
    Bundle,
    BundleError,
    read_manifest,
    verify_bundle,
    write_manifest,
)

if TYPE_CHECKING:
    from agent.library.events import ReloadResult
    from agent.settings import Settings

__all__ = ["ImportRefused", "activate_version", "import_voice", "max_model_bytes"]

MAX_CONFIG_BYTES = 1 << 20
_COPY_BLOCK = 1 << 20


class ImportRefused(Exception):
    """The import (or activation) was refused; nothing was changed. One line: why."""


def max_model_bytes(settings: Settings | None) -> int:
    """The largest bundle file accepted: ``models.max_model_bytes`` (its default without
    settings)."""
    return settings.models.max_model_bytes if settings is not None else DEFAULT_MAX_MODEL_BYTES


def import_voice(onnx_path: Path, models_dir: Path, *, version: str, source: str,
                 variant: str = "fp32", config_path: Path | None = None,
                 activate: bool = False, settings: Settings | None = None) -> Bundle:
    """Import ``onnx_path`` (its config ``X.onnx.json`` beside it, or ``config_path``) as
    ``version`` of voice ``X`` under ``models_dir``; with ``activate``, make it the live
    version (validated by :func:`activate_version`). Returns the verified bundle.

    Raises :class:`ImportRefused` (nothing changed) and :class:`OSError` (disk trouble)."""
    config_path = config_path or onnx_path.with_name(onnx_path.name + ".json")
    voice = onnx_path.name.removesuffix(".onnx")
    if not NAME.match(voice) or onnx_path.suffix != ".onnx":
        raise ImportRefused(f"{onnx_path}: the file must be named VOICE.onnx, VOICE a plain "
                            "name (letters, digits, _ . + -)")
    if not NAME.match(version):
        raise ImportRefused(f"version {version!r} is not a plain name (letters, digits, _ . + -)")
    voice_dir, limit = models_dir / voice, max_model_bytes(settings)
    layout = _layout(voice_dir)
    models_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{voice}-import-",
                                 dir=voice_dir if layout != "absent" else models_dir))
    try:
        _build(work, onnx_path, config_path, voice=voice, version=version, source=source,
               variant=variant, limit=limit)
        existing = _installed_version(voice_dir, layout, version)
        if existing is not None:
            _same_or_refuse(existing, work, voice, version, variant)
            target = existing
        elif layout == "absent":
            os.rename(work, voice_dir)
            target = voice_dir
        else:
            if layout == "flat":
                _convert_flat(voice_dir)
            else:
                _finish_conversion(voice_dir)
            os.rename(work, voice_dir / version)
            target = voice_dir / version
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if activate:
        result = activate_version(settings, models_dir, voice, version,
                                  remove_on_failure=layout == "absent")
        if result.outcome == "rejected":
            raise ImportRefused(f"{voice} {version}: imported but rejected: {result.reason}")
    return verify_bundle(target, max_file_bytes=limit)


def _layout(voice_dir: Path) -> str:
    """``absent``, ``flat`` or ``staged``; refuses what is neither (nothing is touched)."""
    try:
        st = voice_dir.lstat()
    except FileNotFoundError:
        return "absent"
    if stat.S_ISLNK(st.st_mode):
        raise ImportRefused(f"{voice_dir} is a symbolic link: import into the directory it "
                            "names (--models-dir), or make it a directory")
    if not stat.S_ISDIR(st.st_mode):
        raise ImportRefused(f"{voice_dir} exists and is not a directory: move it away first")
    if os.path.lexists(voice_dir / CURRENT):
        return "staged"
    if (voice_dir / MANIFEST_NAME).exists():
        return "flat"
    entries = [e.name for e in voice_dir.iterdir() if not e.name.startswith(".")]
    if not entries:
        return "absent"
    if any((voice_dir / e / MANIFEST_NAME).is_file() for e in entries):
        return "staged"  # versions, none of them current yet
    raise ImportRefused(f"{voice_dir} holds no voice bundle (no {MANIFEST_NAME}, no {CURRENT} "
                        f"link): move it away first")


def _build(work: Path, onnx_path: Path, config_path: Path, *, voice: str, version: str,
           source: str, variant: str, limit: int) -> None:
    """Copy the voice into ``work``, check the copy is a Piper voice, write its manifest."""
    model_name, config_name = onnx_path.name, onnx_path.name + ".json"
    _copy_bounded(onnx_path, work / model_name, limit)
    _copy_bounded(config_path, work / config_name, MAX_CONFIG_BYTES)
    try:
        config = check_config(work / config_name)
        check_model(work / model_name, config, max_bytes=limit)
    except NotAPiperVoice as exc:  # name the files the operator gave, not our copies
        raise ImportRefused(str(exc).replace(str(work / model_name), str(onnx_path))
                            .replace(str(work / config_name), str(config_path))) from None
    write_manifest(work, voice=voice, version=version, sample_rate=config.sample_rate,
                   variants={variant: model_name}, config=config_name, source=source)
    work.chmod(0o755)
    try:
        verify_bundle(work, max_file_bytes=limit)
    except BundleError as exc:
        raise ImportRefused(f"{onnx_path}: changed while it was copied: {one_line(exc)}") from exc


def _copy_bounded(source: Path, target: Path, limit: int) -> None:
    """Copy a regular file of at most ``limit`` bytes (never opening a FIFO or a device)."""
    try:
        st = os.stat(source)
    except FileNotFoundError:
        raise ImportRefused(f"not a file: {source}") from None
    except OSError as exc:
        raise ImportRefused(f"{source}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ImportRefused(f"not a file: {source}")
    if st.st_size > limit:
        raise ImportRefused(f"{source}: {st.st_size} bytes, larger than the {limit} bytes "
                            "allowed (models.max_model_bytes)")
    copied = 0
    with source.open("rb") as src, target.open("xb") as dst:
        while block := src.read(min(_COPY_BLOCK, limit + 1 - copied)):
            copied += len(block)
            if copied > limit:
                raise ImportRefused(f"{source}: grew past {limit} bytes while it was copied")
            dst.write(block)
    target.chmod(0o644)


def _installed_version(voice_dir: Path, layout: str, version: str) -> Path | None:
    """The bundle directory already holding ``version``, if any."""
    if layout == "flat":
        try:
            if read_manifest(voice_dir)["version"] == version:
                return voice_dir
        except BundleError:
            return None
        return voice_dir / version if (voice_dir / version).exists() else None
    if layout == "staged" and os.path.lexists(voice_dir / version):
        return voice_dir / version
    return None


def _same_or_refuse(existing: Path, work: Path, voice: str, version: str, variant: str) -> None:
    """Nothing to do when ``existing`` already holds exactly the files in ``work`` (and they
    verify); else refuse: an installed version is never overwritten."""
    try:
        old, new = read_manifest(existing), read_manifest(work)
        model = new["variants"][variant]
        same = (old["variants"].get(variant) == model and old["config"] == new["config"]
                and all(old["files"].get(name, {}).get("sha256") == new["files"][name]["sha256"]
                        for name in (model, new["config"])))
    except (BundleError, AttributeError, KeyError, TypeError):
        same = False
    if not same:
        raise ImportRefused(
            f"{voice} {version} is already installed in {existing} with other files; import "
            "the new files under another --version (an installed version is never replaced)")
    try:
        verify_bundle(existing)
    except BundleError as exc:
        raise ImportRefused(f"{voice} {version} is already installed in {existing} but does "
                            f"not verify: {one_line(exc)}; move that directory away and import "
                            "again") from exc


def _flat_files(voice_dir: Path) -> list[str]:
    """The top-level files of a flat voice (what becomes its version directory)."""
    names = []
    for entry in sorted(voice_dir.iterdir()):
        if entry.name.startswith(".") or (entry.is_dir() and not entry.is_symlink()):
            continue
        if entry.is_symlink() or not entry.is_file():
            raise ImportRefused(f"cannot convert {voice_dir} to versions: {entry} is not a "
                                "regular file")
        names.append(entry.name)
    return names


def _convert_flat(voice_dir: Path) -> None:
    """Make the flat voice in ``voice_dir`` staged, keeping its files as its version."""
    try:
        old = str(read_manifest(voice_dir)["version"])
    except BundleError as exc:
        raise ImportRefused(f"cannot convert {voice_dir} to versions: {one_line(exc)}") from exc
    if not NAME.match(old) or old in (CURRENT, PREVIOUS):
        raise ImportRefused(f"cannot convert {voice_dir} to versions: its manifest's version "
                            f"{old!r} is not a plain name")
    names = _flat_files(voice_dir)
    target = voice_dir / old
    if not target.exists():
        work = Path(tempfile.mkdtemp(prefix=f".{old}-", dir=voice_dir))
        try:
            for name in names:
                try:
                    os.link(voice_dir / name, work / name)
                except OSError:
                    shutil.copy2(voice_dir / name, work / name)
            work.chmod(0o755)
            os.rename(work, target)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    elif (target / MANIFEST_NAME).read_bytes() != (voice_dir / MANIFEST_NAME).read_bytes():
        raise ImportRefused(f"cannot convert {voice_dir} to versions: {target} exists and is "
                            "another bundle")
    replace_symlink(voice_dir / CURRENT, old)
    _finish_conversion(voice_dir)


def _finish_conversion(voice_dir: Path) -> None:
    """Remove the top-level copies a conversion left (also after a crash in the middle): a
    top-level file goes only when ``current`` holds the same bytes under the same name."""
    current = voice_dir / CURRENT
    if not (voice_dir / MANIFEST_NAME).is_file() or not (current / MANIFEST_NAME).is_file():
        return
    for entry in voice_dir.iterdir():
        twin = current / entry.name
        if entry.name.startswith(".") or entry.is_symlink() or not entry.is_file():
            continue
        if twin.is_file() and _same_bytes(entry, twin):
            entry.unlink()


def _same_bytes(a: Path, b: Path) -> bool:
    if os.path.samefile(a, b):
        return True
    import filecmp

    return filecmp.cmp(a, b, shallow=False)


def _flat_version(voice_dir: Path) -> str:
    try:
        return str(read_manifest(voice_dir)["version"])
    except BundleError:
        return "none readable"


def activate_version(settings: Settings | None, models_dir: Path, voice: str, version: str,
                     *, remove_on_failure: bool = False) -> ReloadResult:
    """Validate ``version`` of ``voice`` as the agent loads it (onnxruntime, warm-up) and make it
    the live one: a staged voice's ``current`` points at it (the old target becomes
    ``previous``; a rejected version leaves ``current`` as it was), decided by
    :meth:`~agent.library.voices.VoiceLibrary.activate`, as the daemon's ``reload`` command
    does. A flat voice has one version only: it is validated. ``remove_on_failure`` removes a
    flat voice that does not load (one this import has just created)."""
    from agent.library.events import ReloadResult
    from agent.library.voices import VoiceLibrary, VoiceNotFound
    from agent.settings import Settings
    from agent.voice.voice import VoiceLoadError

    voice_dir = models_dir / voice
    if not NAME.match(voice) or not voice_dir.is_dir():
        raise VoiceNotFound(f"no such voice {voice!r} in {models_dir.absolute()}")
    base = settings or Settings()
    library = VoiceLibrary(base.model_copy(update={"models": base.models.model_copy(
        update={"dir": models_dir, "default_voice": voice, "watch": False})}))
    staged = os.path.lexists(voice_dir / CURRENT) or not (voice_dir / MANIFEST_NAME).exists()
    if staged:
        return library.activate(voice, version)
    have = _flat_version(voice_dir)
    if version != have:
        raise VoiceNotFound(f"voice {voice!r} has no version {version!r} (has: {have}; a flat "
                            "voice has one: import another to add versions)")
    try:
        return ReloadResult(voice, "loaded", version=library.get(voice).version)
    except VoiceLoadError as exc:
        if remove_on_failure:
            shutil.rmtree(voice_dir, ignore_errors=True)
        return ReloadResult(voice, "rejected", version=version, reason=one_line(exc))
