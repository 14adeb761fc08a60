"""Whether an ALSA PCM name resolves, found without opening the PCM (``check-config``).

Opening a PCM takes the device or creates a ``file`` PCM's file, so this only reads alsa-lib's
configuration through ctypes and looks the name up as ``snd_pcm_open`` would. An undefined name
and a ``file`` PCM without its directory are problems; a card absent now is only noted. The rules:
docs/internals.md#resolving-a-pcm-name.
"""

from __future__ import annotations

import ctypes
import os
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PcmCheck", "check_pcm_name", "split_pcm_name"]

_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_CARD_PCMS = ("hw", "plughw", "sysdefault", "front", "dmix", "dsnoop", "iec958", "hdmi")


@dataclass(frozen=True)
class PcmCheck:
    """The outcome: ``problem`` (None when the name resolves) and what was checked."""

    problem: str | None
    note: str


def split_pcm_name(name: str) -> tuple[str, list[str]]:
    """``"plughw:CARD=x,DEV=0"`` -> ``("plughw", ["CARD=x", "DEV=0"])``; quotes are removed."""
    base, _, rest = name.partition(":")
    args: list[str] = []
    current, quote = "", ""
    for char in rest:
        if quote:
            quote = "" if char == quote else quote
            current += char if quote else ""
        elif char in "'\"":
            quote = char
        elif char == ",":
            args.append(current)
            current = ""
        else:
            current += char
    if rest:
        args.append(current)
    return base, args


def _argument(args: list[str], key: str, position: int) -> str | None:
    """The argument ``key=...`` or else the ``position``-th positional one."""
    positional = [arg for arg in args if "=" not in arg]
    for arg in args:
        name, sep, value = arg.partition("=")
        if sep and name.upper() == key:
            return value
    return positional[position] if len(positional) > position else None


class _Config:
    """alsa-lib's configuration tree, read once (``snd_config_update_r``), freed on exit."""

    def __init__(self) -> None:
        lib = ctypes.CDLL("libasound.so.2")
        lib.snd_config_update_r.argtypes = [ctypes.POINTER(ctypes.c_void_p),
                                            ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p]
        lib.snd_config_search.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                          ctypes.POINTER(ctypes.c_void_p)]
        lib.snd_config_get_string.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p)]
        lib.snd_config_delete.argtypes = [ctypes.c_void_p]
        lib.snd_config_update_free.argtypes = [ctypes.c_void_p]
        lib.snd_card_get_index.argtypes = [ctypes.c_char_p]
        self.lib = lib
        self.top, self.update = ctypes.c_void_p(), ctypes.c_void_p()
        status = lib.snd_config_update_r(ctypes.byref(self.top), ctypes.byref(self.update), None)
        if status < 0:
            reason = os.strerror(-status)
            raise OSError(-status, f"alsa-lib cannot read its configuration ({reason})")

    def __enter__(self) -> _Config:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.top:
            self.lib.snd_config_delete(self.top)
        if self.update:
            self.lib.snd_config_update_free(self.update)

    def has(self, key: str) -> bool:
        node = ctypes.c_void_p()
        return bool(self.lib.snd_config_search(self.top, key.encode(), ctypes.byref(node)) == 0)

    def string(self, key: str) -> str | None:
        node, value = ctypes.c_void_p(), ctypes.c_char_p()
        if self.lib.snd_config_search(self.top, key.encode(), ctypes.byref(node)) != 0:
            return None
        if self.lib.snd_config_get_string(node, ctypes.byref(value)) != 0 or value.value is None:
            return None
        return value.value.decode(errors="replace")

    def card_present(self, card: str) -> bool:
        return bool(self.lib.snd_card_get_index(card.encode()) >= 0)


def check_pcm_name(name: str) -> PcmCheck:
    """Whether PCM ``name`` resolves in alsa-lib's configuration (see the module docstring)."""
    base, args = split_pcm_name(name)
    if not _ID.match(base):
        return PcmCheck(None, f"PCM {name!r} not checked (not a plain PCM name)")
    try:
        with _Config() as config:
            return _check(config, name, base, args)
    except OSError as exc:
        return PcmCheck(None, f"PCM {name!r} not checked: {exc}")


def _check(config: _Config, name: str, base: str, args: list[str]) -> PcmCheck:
    if not config.has(f"pcm.{base}"):
        return PcmCheck(f"no PCM named {base!r} in the ALSA configuration (see `aplay -L`; a "
                        "file sink is written file:'/path/out.wav',wav)", "")
    target = _argument(args, "FILE", 0) if base == "file" else None
    if target is None and config.string(f"pcm.{base}.type") == "file":
        target = config.string(f"pcm.{base}.file")
    if target is not None:
        directory = Path(os.path.abspath(target)).parent
        if not directory.is_dir():
            return PcmCheck(f"the file PCM writes into {directory}, which does not exist", "")
        return PcmCheck(None, f"PCM {name!r} writes into the file {os.path.abspath(target)}")
    note = f"PCM {base!r} is defined in the ALSA configuration"
    card = _argument(args, "CARD", 0) if base in _CARD_PCMS else None
    if card is not None and not config.card_present(card):
        note += f"; no card {card!r} is present now (the agent retries the device)"
    return PcmCheck(None, note)
