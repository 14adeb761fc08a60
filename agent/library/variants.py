"""Which variant of a bundle to serve, and whether the bundle's other files are intact.

:func:`choose_variant` serves the wanted variant unless it is *stale* (the manifest's ``derived``
record says it was made from another source than the one installed); then the source variant, with
the reason. :func:`unserved_sizes` and :func:`unserved_hashes` check the files the live voice was
not loaded from. The record and the checks: docs/internals.md#choosing-a-variant.
"""

from __future__ import annotations

import hashlib
import os
import queue
import stat
import threading
import weakref
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.library.events import damage_event
from agent.logs import get_logger
from agent.voice.bundle import BundleError, read_manifest

if TYPE_CHECKING:
    from agent.library.fingerprint import Fingerprint
    from agent.outcomes import VoiceEvent
    from agent.voice.voice import Voice

__all__ = ["DERIVED_KEY", "UnservedCheck", "VariantChoice", "choose_variant", "unserved_hashes",
           "unserved_sizes"]

log = get_logger(__name__)

DERIVED_KEY = "derived"
"""The manifest's map of derived variants to their source (see the module docstring), written by
:mod:`agent.quantize.int8_bundle` (build time; the daemon does not import it)."""
SOURCE_VARIANT = "fp32"
_BLOCK = 1 << 20


@dataclass(frozen=True, slots=True)
class VariantChoice:
    """The variant to load and, when it is not simply the wanted one, why."""

    variant: str
    reason: str | None = None
    """Why this variant (a fallback), or a note on its provenance; None when nothing to say."""
    stale: bool = False
    """The wanted variant is stale and its source serves instead (health: degraded)."""


def choose_variant(manifest: Mapping[str, Any], wanted: str, *, auto: bool) -> VariantChoice:
    """The variant of the bundle described by ``manifest`` to serve when ``wanted`` is asked
    for (``auto``: ``models.variant = auto``, where another variant may stand in for a missing
    one)."""
    variants: Mapping[str, Any] = manifest["variants"]
    if wanted not in variants:
        if not auto:
            return VariantChoice(wanted)  # the load says the variant is missing
        fallback = SOURCE_VARIANT if SOURCE_VARIANT in variants else sorted(variants)[0]
        return VariantChoice(str(fallback), f"the bundle has no {wanted} variant")
    if wanted == SOURCE_VARIANT or SOURCE_VARIANT not in variants:
        return VariantChoice(wanted)
    record = manifest.get(DERIVED_KEY, {})
    record = record.get(wanted) if isinstance(record, Mapping) else None
    if not isinstance(record, Mapping) or not isinstance(record.get("sha256"), str):
        return VariantChoice(wanted, f"{wanted} has no recorded source (made before the "
                                     "manifest recorded it): provenance unknown, served as it is")
    source = str(record.get("from", SOURCE_VARIANT))
    entry = manifest["files"].get(variants.get(source, ""), {})
    current = entry.get("sha256") if isinstance(entry, Mapping) else None
    if source not in variants or current == record["sha256"]:
        return VariantChoice(wanted)
    return VariantChoice(
        source, f"{wanted} is stale: made from {source} sha256 {record['sha256'][:12]}, the "
                f"manifest's {source} is {str(current)[:12]} (rebuild it: tts-agent quantize)",
        stale=True)


def _unserved(manifest: Mapping[str, Any], served: Collection[str]) -> list[tuple[str, Any]]:
    return [(name, entry) for name, entry in sorted(manifest["files"].items())
            if name not in served and isinstance(entry, Mapping)]


def unserved_sizes(bundle_dir: Path, manifest: Mapping[str, Any],
                   served: Collection[str]) -> dict[str, str]:
    """Problems of the files listed in ``manifest`` other than ``served`` (file names), by file
    name: missing, not a regular file, or not the manifest's size. A ``stat`` each."""
    problems = {}
    for name, entry in _unserved(manifest, served):
        try:
            st = os.lstat(bundle_dir / name)
        except OSError as exc:
            problems[name] = f"{name}: unreadable ({exc.strerror or exc})"
            continue
        if not stat.S_ISREG(st.st_mode):
            problems[name] = f"{name}: not a regular file"
        elif st.st_size != entry.get("size", st.st_size):
            problems[name] = f"{name}: size {st.st_size} != {entry.get('size')} in the manifest"
    return problems


def unserved_hashes(bundle_dir: Path, manifest: Mapping[str, Any],
                    served: Collection[str]) -> dict[str, str]:
    """Like :func:`unserved_sizes`, then the sha256 of each file that passed it (read without
    following links, at most the manifest's size plus one byte)."""
    problems = unserved_sizes(bundle_dir, manifest, served)
    for name, entry in _unserved(manifest, served):
        if name in problems or not isinstance(entry.get("sha256"), str):
            continue
        try:
            digest = _sha256_bounded(bundle_dir / name, int(entry.get("size", 0)))
        except OSError as exc:
            problems[name] = f"{name}: unreadable ({exc.strerror or exc})"
            continue
        if digest != entry["sha256"]:
            problems[name] = f"{name}: sha256 does not match the manifest"
    return problems


def _sha256_bounded(path: Path, size: int) -> str | None:
    """sha256 of a regular file of ``size`` bytes; None when it is not one or has grown."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    fd = os.open(path, flags)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        digest, left = hashlib.sha256(), size + 1
        while left > 0 and (block := os.read(fd, min(_BLOCK, left))):
            digest.update(block)
            left -= len(block)
        return None if left <= 0 else digest.hexdigest()
    finally:
        os.close(fd)


class UnservedCheck:
    """The checks of the files live voices do not serve, and what they found.

    :meth:`check` runs on the thread that loaded or re-checked a voice (sizes) and hands the
    sha256 to one background thread (``bundle-hash``), through a bounded queue. A finding is
    kept only while ``is_current(name, voice, seen)`` (the voice is still live and its files
    are still those of ``seen``: the library's own state), and reported through ``emit`` as a
    ``model_damaged`` event when it is new.
    """

    def __init__(self, is_current: Callable[[str, Voice, Fingerprint], bool],
                 emit: Callable[[VoiceEvent], None]) -> None:
        self._is_current = is_current
        self._emit = emit
        self._lock = threading.Lock()
        self._found: dict[str, dict[str, str]] = {}
        self._queue: queue.Queue[tuple[str, weakref.ref[Voice], Fingerprint]] = queue.Queue(
            maxsize=8)
        self._thread: threading.Thread | None = None

    def problems(self, name: str) -> list[str]:
        """The problems last found in voice ``name``'s bundle (health: degraded)."""
        with self._lock:
            found = self._found.get(name, {})
            return [f"damaged, not served: {found[file]}" for file in sorted(found)]

    def check(self, name: str, voice: Voice, seen: Fingerprint) -> None:
        """Check the other files of ``voice``'s bundle: sizes now, sha256 in the background."""
        try:
            manifest = read_manifest(voice.bundle.dir)
        except BundleError:
            return  # the next reload reports the manifest
        served = voice.bundle.sha256
        problems = unserved_sizes(voice.bundle.dir, manifest, served)
        if problems or not set(manifest["files"]) - set(served):
            self._record(name, voice, seen, problems)
            return
        # Sizes match: what the hash finds replaces the last finding (until then it stands).
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="bundle-hash",
                                                daemon=True)
                self._thread.start()
        try:
            self._queue.put_nowait((name, weakref.ref(voice), seen))
        except queue.Full:  # checks of older files are still queued: the newest come later
            log.warning("bundle_hash_queue_full", voice=name)

    def _run(self) -> None:
        """Thread ``bundle-hash``. A voice replaced meanwhile is not kept alive by its queued
        check (a weak reference) and is not hashed."""
        while True:
            name, ref, seen = self._queue.get()
            voice = ref()
            try:
                if voice is not None and self._is_current(name, voice, seen):
                    problems = unserved_hashes(voice.bundle.dir, read_manifest(voice.bundle.dir),
                                               voice.bundle.sha256)
                    self._record(name, voice, seen, problems)
            except (BundleError, OSError) as exc:
                log.warning("bundle_hash_failed", voice=name, error=str(exc))
            del voice

    def _record(self, name: str, voice: Voice, seen: Fingerprint,
                problems: dict[str, str]) -> None:
        if not self._is_current(name, voice, seen):
            return
        with self._lock:
            before = self._found.get(name, {})
            self._found[name] = problems
        if problems and problems != before:
            self._emit(damage_event(voice, problems))
        elif before and not problems:
            log.info("model_repaired", voice=name, files=sorted(before))
