"""The device volume set over MQTT or Home Assistant, kept across restarts.

A small JSON file, ``volume.json`` beside the request journal (in the directory
:meth:`agent.mqtt.journal.RequestJournal.for_settings` chooses, so it follows the journal),
written atomically at each ``volume`` command and read once at start. It holds the volume and
the ``audio.volume`` setting in force when it was set: the stored volume wins at the next start
while that setting is unchanged; an operator who changes ``audio.volume`` has the last word
(the file is then removed). A file that cannot be read, or is not one this module writes, is
logged in one line and the setting is used. For operators: docs/operations.md#the-device-volume.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from agent import jsonbound
from agent.fsutil import atomic_write
from agent.logs import get_logger
from agent.mqtt.journal import RequestJournal
from agent.voice.files import UnsafeFileError, open_regular

if TYPE_CHECKING:
    from agent.settings import Settings

__all__ = ["MAX_STATE_BYTES", "VOLUME_NAME", "VolumeStore"]

log = get_logger(__name__)

VOLUME_NAME = "volume.json"
"""The file's name, in the request journal's directory."""
MAX_STATE_BYTES = 1024
"""A larger file is not one this module wrote (and is not read)."""
_FORMAT = 1


def _level(data: dict[str, object], key: str) -> float:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ValueError(f"{key!r} is not a volume 0.0-1.0: {value!r}")
    return float(value)


class VolumeStore:
    """The stored volume (see the module docstring). ``configured``: ``audio.volume``."""

    def __init__(self, path: Path, configured: float) -> None:
        self.path = path
        self.configured = configured
        self._lock = threading.Lock()

    @classmethod
    def for_settings(cls, settings: Settings) -> VolumeStore:
        """Beside the journal these settings ask for (nothing is read or written yet)."""
        journal = RequestJournal.for_settings(settings).path
        return cls(journal.parent / VOLUME_NAME, settings.audio.volume)

    def _read(self) -> tuple[float, float]:
        """(volume, the setting it was set under); raises FileNotFoundError when there is no
        file, OSError, UnsafeFileError or ValueError when it cannot be used."""
        with open_regular(self.path) as handle:
            raw = handle.read(MAX_STATE_BYTES + 1)
        data = jsonbound.loads(raw, max_bytes=MAX_STATE_BYTES)
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            raise ValueError(f"not a volume state file (format {_FORMAT})")
        return _level(data, "volume"), _level(data, "configured")

    def restore(self) -> float:
        """The volume to start with (once, at start): the stored one, or ``configured``."""
        try:
            volume, configured = self._read()
        except FileNotFoundError:
            return self.configured
        except (OSError, UnsafeFileError, ValueError) as exc:  # JsonError is a ValueError
            log.warning("volume_state_unreadable", path=str(self.path), error=str(exc),
                        volume=self.configured)
            return self.configured
        if configured != self.configured:
            log.info("volume_setting_changed", stored=volume, setting=self.configured)
            try:
                self.path.unlink()
            except OSError as exc:
                log.warning("volume_state_not_removed", path=str(self.path), error=str(exc))
            return self.configured
        log.info("volume_restored", volume=volume)
        return volume

    def save(self, volume: float) -> bool:
        """Keep ``volume`` for the next start (any thread); False (logged) when it cannot be
        written: the volume still applies until the agent stops."""
        payload = json.dumps({"format": _FORMAT, "volume": volume,
                              "configured": self.configured}).encode() + b"\n"
        with self._lock:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                atomic_write(self.path, payload, mode=0o600, prefix=".volume-")
            except OSError as exc:
                log.warning("volume_not_saved", path=str(self.path), error=str(exc))
                return False
        return True
