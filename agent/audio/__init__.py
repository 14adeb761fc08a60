"""Audio output through ALSA: device handling, conversion, volume and the play queue.

Other modules use :class:`AudioPlayer`, :class:`PlayItem` and :class:`PlaybackEvent`
(contract in :mod:`agent.audio.player`). Importing this package loads pyalsaaudio
and numpy, so command handlers import it inside the handler.
"""

from agent.audio.device import DeviceError, DeviceParams
from agent.audio.item import (
    PRIORITIES,
    PRIORITY_HIGH,
    PRIORITY_LOW,
    PRIORITY_NORMAL,
    PRIORITY_URGENT,
    PlaybackEvent,
    PlayItem,
    parse_priority,
)
from agent.audio.player import AudioPlayer
from agent.audio.queue import PlayerClosed, QueueFull, SubmitError

__all__ = [
    "PRIORITIES",
    "PRIORITY_HIGH",
    "PRIORITY_LOW",
    "PRIORITY_NORMAL",
    "PRIORITY_URGENT",
    "AudioPlayer",
    "DeviceError",
    "DeviceParams",
    "PlayItem",
    "PlaybackEvent",
    "PlayerClosed",
    "QueueFull",
    "SubmitError",
    "parse_priority",
]
