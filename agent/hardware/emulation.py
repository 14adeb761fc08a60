"""A process emulated by ``qemu-user``: the CPU it runs as is not the one ``/proc`` describes.

Under ``qemu-user`` (an aarch64 root on an x86_64 host, with binfmt or ``chroot``) the process
runs aarch64 code and ``uname -m`` says ``aarch64``, but ``/proc`` and ``/sys`` are the host
kernel's: qemu 7.2 (Debian 12) passes the host's ``/proc/cpuinfo`` through, newer qemu (8.2 on)
writes one for the emulated CPU, and neither has a device tree. The board is then unknowable
from ``/``; ``tts-agent profile --sysroot DIR`` reads it from a tree of the board's own files.
:func:`reconcile` keeps detection from choosing the host's CPU profile meanwhile.
"""

from __future__ import annotations

from typing import Any

__all__ = ["arch_family", "reconcile"]

_FAMILIES = {"x86_64": "x86", "i686": "x86", "i386": "x86", "aarch64": "arm", "arm64": "arm",
             "armv7l": "arm", "armv6l": "arm", "arm": "arm"}


def arch_family(arch: str) -> str | None:
    """``x86`` or ``arm`` for an architecture name (``uname -m`` or detected), else None."""
    return _FAMILIES.get(arch.lower())


def reconcile(facts: dict[str, Any], machine: str, notes: list[str]) -> dict[str, Any]:
    """The CPU facts to keep when this process runs as ``machine``.

    ``facts`` are what ``proc/cpuinfo`` said. When they describe another CPU family (the host's,
    shown through emulation), they are dropped: the architecture becomes ``machine``, the CPU
    model, flags and ARM/x86 identifiers unknown, ``emulated_on`` names the host's architecture,
    and a note says how to give the board's files instead. Otherwise ``facts`` are returned.
    """
    seen, running = arch_family(str(facts.get("arch", ""))), arch_family(machine)
    if seen is None or running is None or seen == running:
        return facts
    notes.append(
        f"proc/cpuinfo describes an {facts['arch']} CPU but this process runs as {machine}: "
        "emulated (qemu-user shows the host's /proc); the host's CPU facts are ignored. "
        "Pass --sysroot DIR with the board's proc/ and sys/ files to choose its profile"
    )
    return {"arch": machine, "cpu_model": None, "emulated_on": facts["arch"]}
