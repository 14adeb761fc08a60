"""Install the training phonemizer's espeak-ng (library and data) into a virtual environment.

    python -m agent.text.espeak_fetch [--prefix DIR] [--pip-args ARGS]

pip downloads piper-phonemize 1.1.0's wheel for this machine's architecture (no dependencies,
binary only; its libespeak-ng does not depend on the Python version, so the cp311 wheel serves
every Python), checks the wheel's pinned sha256, unpacks its libespeak-ng and espeak-ng-data
into ``<prefix>/share/tts-agent/espeak-ng`` (replaced whole), and loads the library once.
Nothing is downloaded when that directory already holds this wheel's files. espeak-ng is
GPL-3.0-or-later, as Debian's ``libespeak-ng1`` is: installed beside the agent, never bundled.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path, PurePosixPath

from agent.text.espeak_build import LIBRARY_FILE, SOURCE_FILE, training_dir

__all__ = ["REQUIREMENT", "WHEELS", "FetchError", "install", "is_current", "main"]

REQUIREMENT = "piper-phonemize==1.1.0"
WHEELS = {  # machine: (wheel platform tag, sha256 of the wheel on PyPI)
    "x86_64": ("manylinux_2_28_x86_64",
               "c1062e00c94835e9115df7ce1d7b3b5c40c6d845cd70b2c121954faf5b8d23c7"),
    "aarch64": ("manylinux_2_28_aarch64",
                "793077437584cf314a6d49c9c6d9d655b4c373391da5384e832208aa80402949"),
}
_LIBRARY_MEMBER = "piper_phonemize.libs/libespeak-ng"
_DATA_MEMBER = "piper_phonemize/espeak-ng-data/"


class FetchError(RuntimeError):
    """The wheel could not be had, did not match its pin, or its library does not load."""


def _wheel_for(machine: str) -> tuple[str, str]:
    if machine not in WHEELS:
        raise FetchError(f"no training espeak-ng for {machine} (only {', '.join(WHEELS)})")
    return WHEELS[machine]


def is_current(directory: Path, sha256: str) -> bool:
    """Whether ``directory`` already holds the files of the wheel with this digest."""
    try:
        source = json.loads((directory / SOURCE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (isinstance(source, dict) and source.get("sha256") == sha256
            and (directory / LIBRARY_FILE).is_file()
            and (directory / "espeak-ng-data" / "phontab").is_file())


def _download(tag: str, pip_args: list[str], into: Path) -> Path:
    command = [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
               "--no-deps", "--only-binary=:all:", "--platform", tag, "--python-version",
               "3.11", "--implementation", "cp", *pip_args, "-d", str(into), REQUIREMENT]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wheels = sorted(into.glob("piper_phonemize-*.whl"))
    if done.returncode != 0 or len(wheels) != 1:
        raise FetchError(f"pip could not download {REQUIREMENT} for {tag}:"
                         f" {done.stderr.strip()[-2000:]}")
    return wheels[0]


def _unpack(wheel: Path, into: Path) -> None:
    """The library and the data directory, nothing else; refuses names that leave ``into``."""
    data = into / "espeak-ng-data"
    libraries = 0
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.infolist():
            name = PurePosixPath(member.filename)
            if ".." in name.parts or name.is_absolute():
                raise FetchError(f"{wheel.name}: unsafe member name {member.filename!r}")
            if member.filename.startswith(_LIBRARY_MEMBER) and ".so" in name.name:
                target, libraries = into / LIBRARY_FILE, libraries + 1
            elif member.filename.startswith(_DATA_MEMBER) and not member.is_dir():
                target = data / name.relative_to(_DATA_MEMBER.rstrip("/"))
            else:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(member) as source, open(target, "wb") as out:
                shutil.copyfileobj(source, out)
    if libraries != 1 or not (data / "phontab").is_file():
        raise FetchError(f"{wheel.name} holds {libraries} espeak-ng libraries and"
                         f" {'a' if (data / 'phontab').is_file() else 'no'} espeak-ng-data")


def _version(library: Path) -> str:
    try:
        cdll = ctypes.CDLL(str(library))
    except OSError as exc:
        raise FetchError(f"the training espeak-ng does not load here: {exc}") from exc
    cdll.espeak_Info.restype = ctypes.c_char_p
    cdll.espeak_Info.argtypes = [ctypes.c_void_p]
    return (cdll.espeak_Info(None) or b"?").decode("ascii", "replace")


def install(prefix: Path, pip_args: list[str], machine: str | None = None) -> str:
    """Install (or keep) the training build under ``prefix``; returns what was done, in words."""
    tag, sha256 = _wheel_for(machine or platform.machine())
    directory = training_dir(str(prefix))
    if is_current(directory, sha256):
        return f"the training espeak-ng is in place in {directory}"
    directory.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=directory.parent, prefix=".espeak-ng-") as work:
        wheel = _download(tag, pip_args, Path(work))
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        if digest != sha256:
            raise FetchError(f"{wheel.name} has sha256 {digest}, not the pinned {sha256}")
        staged = Path(work) / "espeak-ng"
        _unpack(wheel, staged)
        version = _version(staged / LIBRARY_FILE) if machine in (None, platform.machine()) else "?"
        (staged / SOURCE_FILE).write_text(json.dumps(
            {"requirement": REQUIREMENT, "wheel": wheel.name, "sha256": sha256,
             "espeak_ng": version}, indent=2) + "\n", encoding="utf-8")
        if directory.exists():
            shutil.rmtree(directory)
        staged.rename(directory)
    return f"installed the training espeak-ng {version} ({REQUIREMENT}) in {directory}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--prefix", type=Path, default=Path(sys.prefix),
                        help="the virtual environment (default: this interpreter's)")
    parser.add_argument("--pip-args", default="",
                        help='extra pip arguments, e.g. "--no-index --find-links /srv/wheels"')
    parser.add_argument("--machine", help="the architecture to install for (default: this one)")
    args = parser.parse_args(argv)
    try:
        print(install(args.prefix, shlex.split(args.pip_args), args.machine))
    except FetchError as exc:
        print(f"espeak_fetch: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
