"""Rebuilding a stale int8 variant in the background (``models.requantize_stale``).

When a new fp32 model was pushed without its int8 variant, the library serves fp32
(:func:`agent.library.variants.choose_variant`). With the setting on, it also runs
``tts-agent quantize <fp32> <bundle>`` as a child process at the lowest CPU priority: the same
calibration, quality gate and atomic rename of the bundle as on the build machine. Once it has
written the bundle, the library re-checks the voice and the fresh int8 serves. One run per voice
at a time, one attempt per fp32 sha256 (a model that fails the gate is not retried in a loop),
killed after :data:`MAX_RUN_S`; the child runs in the service's cgroup, so it counts against the
unit's ``MemoryMax``: boards that cannot afford it keep the setting off and rebuild on the build
side (``./build.sh int8``).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from agent.logs import get_logger
from agent.voice.bundle import BundleError, read_manifest

__all__ = ["MAX_RUN_S", "Requantizer"]

log = get_logger(__name__)

MAX_RUN_S = 3600.0
"""A quantizer still running after this long is killed (s)."""
_LAST_LINE_CHARS = 300


class Requantizer:
    """Starts and watches the background ``tts-agent quantize`` runs. Thread-safe."""

    def __init__(self, on_done: Callable[[str], object]) -> None:
        """``on_done(voice)`` runs on the run's watcher thread once a bundle was rewritten."""
        self._on_done = on_done
        self._lock = threading.Lock()
        self._tried: set[tuple[str, str]] = set()
        self._running: dict[str, subprocess.Popen[bytes]] = {}
        self._closed = False

    def start(self, name: str, bundle_dir: Path) -> bool:
        """Rebuild the int8 variant of voice ``name`` from the fp32 model in ``bundle_dir``.
        False when it is not started: running or tried already for this fp32, closed, or the
        manifest names no fp32 model (logged)."""
        try:
            manifest = read_manifest(bundle_dir)
            fp32 = str(manifest["variants"]["fp32"])
            source = str(manifest["files"][fp32]["sha256"])
        except (BundleError, KeyError, TypeError) as exc:
            log.warning("requantize_failed", voice=name, reason=f"no fp32 model: {exc}")
            return False
        key = (str(bundle_dir), source)
        command = [sys.executable, "-m", "agent", "quantize", str(bundle_dir / fp32),
                   str(bundle_dir)]
        with self._lock:
            if self._closed or key in self._tried or name in self._running:
                return False
            self._tried.add(key)
            try:
                process = subprocess.Popen(command, stdin=subprocess.DEVNULL,
                                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            except OSError as exc:
                log.warning("requantize_failed", voice=name, reason=str(exc))
                return False
            self._running[name] = process
        with contextlib.suppress(OSError):  # lowest priority: never slows down synthesis
            os.setpriority(os.PRIO_PROCESS, process.pid, 19)
        log.info("requantize_started", voice=name, source_sha256=source[:12], pid=process.pid)
        threading.Thread(target=self._watch, args=(name, process), name="requantize",
                         daemon=True).start()
        return True

    def _watch(self, name: str, process: subprocess.Popen[bytes]) -> None:
        """Thread ``requantize``: wait for the run (bounded), report it."""
        try:
            _, err = process.communicate(timeout=MAX_RUN_S)
        except subprocess.TimeoutExpired:
            process.kill()
            _, err = process.communicate()
            log.warning("requantize_failed", voice=name, reason=f"killed after {MAX_RUN_S:g} s")
            return
        finally:
            with self._lock:
                self._running.pop(name, None)
        if process.returncode != 0:
            lines = err.decode("utf-8", "replace").strip().splitlines()
            log.warning("requantize_failed", voice=name, status=process.returncode,
                        reason=(lines[-1] if lines else "")[-_LAST_LINE_CHARS:])
            return
        log.info("requantize_done", voice=name)
        try:
            self._on_done(name)
        except Exception:  # the next reload picks it up
            log.exception("requantize_reload_failed", voice=name)

    def close(self) -> None:
        """Stop the runs in progress (the daemon is stopping); none start after this."""
        with self._lock:
            self._closed = True
            running = list(self._running.values())
        for process in running:
            with contextlib.suppress(OSError):
                process.terminate()
