"""The last lines of ``install.sh install``: what it laid out and what the operator sets next.

    python install_summary.py ROOT PREFIX

``ROOT`` is the staging root (``/`` without ``--destdir``), ``PREFIX`` where the agent went.
Reads only what the install wrote: each voice's ``manifest.json`` (its variants; a voice
without the int8 variant says so, with the command that adds it) and ``/etc/tts-agent/agent.toml``
(the broker, sound device and device id the service starts with). The standard library only,
so it runs with the interpreter the install checked (Python 3.11 or newer), pip or not.
"""

from __future__ import annotations

import json
import socket
import sys
import tomllib
from pathlib import Path
from typing import Any

CONF = "/etc/tts-agent/agent.toml"
MODELS = "/var/lib/tts-agent/models"
_MAX_BYTES = 1 << 20


def voices(models: Path) -> list[tuple[str, str, list[str], str]]:
    """(name, version, variants, the served bundle's directory under ``MODELS``) of each voice."""
    found: list[tuple[str, str, list[str], str]] = []
    for entry in sorted(models.iterdir()) if models.is_dir() else []:
        if entry.name.startswith(".") or not entry.is_dir():
            continue
        bundle = entry / "current" if (entry / "current").is_symlink() else entry
        try:
            manifest = json.loads((bundle / "manifest.json").read_bytes()[:_MAX_BYTES])
            version, variants = str(manifest["version"]), sorted(manifest["variants"])
        except (OSError, ValueError, KeyError, TypeError):
            found.append((entry.name, "?", [], ""))
            continue
        found.append((entry.name, version, variants, f"{MODELS}/{bundle.relative_to(models)}"))
    return found


def voice_lines(root: Path, prefix: str) -> list[str]:
    lines = []
    tool = f"{prefix}/venv/bin/tts-agent --config {CONF}"
    for name, version, variants, bundle in voices(root / MODELS.lstrip("/")):
        if not variants:
            lines.append(f"{name}: its manifest does not read (tts-agent models verify)")
        elif "int8" in variants:
            lines.append(f"{name} {version}: {', '.join(variants)} (the hardware profile picks)")
        else:
            lines.append(f"{name} {version}: {', '.join(variants)} only, no int8 variant (run "
                         "./build.sh before install to bring it, or add it here: sudo "
                         f"{tool} quantize {bundle}/{name}.onnx {bundle})")
    return lines or ["no voice (--no-pip); import one: tts-agent models import"]


def settings(root: Path) -> dict[str, Any]:
    try:
        return tomllib.loads((root / CONF.lstrip("/")).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def next_lines(config: dict[str, Any]) -> list[str]:
    """What the service starts with, for the three settings every device must check."""
    def now(section: str | None, key: str, default: str) -> str:
        table = config.get(section, {}) if section else config
        found = table.get(key) if isinstance(table, dict) else None
        name = f"{section}.{key}" if section else key
        if found is None:
            return f"{name} not set ({default})"
        return f"{name} = {json.dumps(found)}"

    rows = [(now("mqtt", "host", "localhost"),
             "the fleet's broker ([mqtt] host; a password goes in /etc/tts-agent/mqtt-password)"),
            (now("audio", "device", "default"),
             "the sound card's PCM ([audio] device; aplay -L lists them)"),
            (now(None, "device_id", f"the host name, {json.dumps(socket.gethostname())}"),
             "this device's id in MQTT topics (device_id, at the top)")]
    return [f"{setting:<42} {what}" for setting, what in rows]


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root, prefix = Path(argv[0]), argv[1]
    laid_out = [(f"{prefix}/venv", f"the agent: {prefix}/venv/bin/tts-agent"),
                ("/etc/systemd/system/tts-agent.service", "the unit"),
                (CONF, f"the settings (the default: {prefix}/share/agent.toml.default)"),
                ("/etc/tts-agent/mqtt-password", "the MQTT password, if the broker wants one"),
                ("/var/lib/tts-agent/chimes", "the chimes")]
    print("==> laid out:", file=sys.stderr)
    items = [f"{path:<42} {what}" for path, what in laid_out]
    items += [f"{MODELS:<42} {line}" for line in voice_lines(root, prefix)]
    for item in items:
        print(f"    {item}", file=sys.stderr)
    print(f"==> set next, in {CONF} (sudoedit {CONF}), then: sudo systemctl restart tts-agent",
          file=sys.stderr)
    for item in next_lines(settings(root)):
        print(f"    {item}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
