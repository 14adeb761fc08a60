"""The platform matrix's roots: one cached ``mmdebstrap`` root per distribution and processor.

Used by ``tests/platforms/`` (opt-in, ``TTS_AGENT_TEST_PLATFORMS=1``, root); see
``docs/platforms.md``. A root holds only what a fresh install of the release has (plus
``ca-certificates``): ``./build.sh`` inside it installs the project's own apt packages. Roots
are built once and cached under ``.cache/platforms/`` (keyed by release, processor, mirror
and package list); each run works in a copy. Foreign processors run under Debian 13's
``qemu-user`` (:func:`emulator`), registered with the kernel's binfmt while a row runs.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.support import REPO
from tests.support.nspawn import run

CACHE = REPO / ".cache" / "platforms"
DEBIAN = "http://deb.debian.org/debian"
UBUNTU = "http://archive.ubuntu.com/ubuntu"
UBUNTU_PORTS = "http://ports.ubuntu.com/ubuntu-ports"
PACKAGES = ("ca-certificates",)
# This machine's clock is ahead of the mirror's Release files (their Valid-Until has passed).
APT_OPTIONS = ('Acquire::Check-Valid-Until "false"',)
TOOLS = {"mmdebstrap": "mmdebstrap", "systemd-nspawn": "systemd-container",
         "qemu-aarch64-static": "qemu-user-static", "update-binfmts": "binfmt-support",
         "arch-test": "arch-test"}  # mmdebstrap wants it for a foreign root
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")
CONSTRAINTS = "/etc/tts-matrix-constraints.txt"


@dataclass(frozen=True)
class Platform:
    """One row of the matrix: a release of a distribution on one processor."""

    name: str  # the row's id, e.g. "debian13-arm64"
    title: str  # for the table, e.g. "Debian 13 (trixie)"
    suite: str
    arch: str  # Debian's name: amd64, arm64
    mirror: str
    components: str = "main"
    pins: tuple[str, ...] = ()  # pip constraints inside this row's test only (docs/platforms.md)
    keyring: str = ""  # the archive's keyring, when the host does not have it: "ubuntu"

    @property
    def emulated(self) -> bool:
        return self.arch != host_arch()


PLATFORMS = (
    Platform("debian12-amd64", "Debian 12 (bookworm)", "bookworm", "amd64", DEBIAN),
    Platform("debian13-amd64", "Debian 13 (trixie)", "trixie", "amd64", DEBIAN),
    Platform("ubuntu2404-amd64", "Ubuntu 24.04 (noble)", "noble", "amd64", UBUNTU,
             "main,universe", keyring="ubuntu"),
    # Under Debian 13's qemu-user (emulator()) the emulated rows run the product's own
    # onnxruntime; under the host's 7.2 it crashed on import (docs/platforms.md).
    Platform("debian13-arm64", "Debian 13 (trixie)", "trixie", "arm64", DEBIAN),
    Platform("debian12-arm64", "Debian 12 (bookworm)", "bookworm", "arm64", DEBIAN),
    Platform("ubuntu2404-arm64", "Ubuntu 24.04 (noble)", "noble", "arm64", UBUNTU_PORTS,
             "main,universe", keyring="ubuntu"),
)


def host_arch() -> str:
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(os.uname().machine, os.uname().machine)


def ensure_tools() -> None:
    """Install mmdebstrap, systemd-nspawn and qemu-user-static when missing; enable binfmt."""
    missing = sorted({pkg for tool, pkg in TOOLS.items() if shutil.which(tool) is None})
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    if missing:
        run(["apt-get", "update", "-qq"], env=env)
        run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing], env=env)
    binfmt = Path("/proc/sys/fs/binfmt_misc")
    if not (binfmt / "register").exists():
        run(["mount", "-t", "binfmt_misc", "binfmt_misc", str(binfmt)], check=False)
    if not (binfmt / "qemu-aarch64").exists():
        run(["update-binfmts", "--enable", "qemu-aarch64"], check=False)


EMULATED_CPU = "cortex-a76"
"""The processor the aarch64 rows emulate: the Raspberry Pi 5's (a Pi 4 has the older A72)."""
BINFMT = Path("/proc/sys/fs/binfmt_misc")
HANDLER = "tts-matrix-aarch64"
"""The binfmt handler the emulated rows register for aarch64 while they run."""
AARCH64_MAGIC = (r"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00",
                 r"\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff")


def emulator() -> Path:
    """Debian 13's static qemu-aarch64 (qemu 10), fetched once (:func:`trixie_package`): the
    host's qemu-user 7.2 dies in ``import onnxruntime`` of 1.28 and later (docs/platforms.md)."""
    out = CACHE / "qemu-trixie"
    # qemu takes the binfmt P flag (argv[0] preserved) from this name of itself
    binary = out / "usr/libexec/qemu-binfmt/aarch64-binfmt-P"
    if not binary.exists():
        trixie_package("qemu-user", out)
    return binary


def trixie_package(package: str, out: Path) -> None:
    """Debian 13's ``package``, fetched with apt inside the Debian 13 x86_64 root (the Debian 12
    host has no such release in its sources) and unpacked into ``out``."""
    helper = base_root(next(p for p in PLATFORMS if p.name == "debian13-amd64"))
    out.mkdir(parents=True, exist_ok=True)
    run(nspawn_command(helper, "cd /out && apt-get update -qq && apt-get download -qq "
                       f"{package}", binds=(f"{out}:/out",), writable=True), timeout=900)
    [deb] = out.glob(f"{package}_*.deb")
    run(["dpkg-deb", "-x", str(deb), str(out)])
    deb.unlink()


def emulator_version() -> str:
    out = run([str(emulator().parents[2] / "bin/qemu-aarch64"), "--version"], check=False).stdout
    found = re.search(r"version (\S+)", out)
    return f"qemu-user {found.group(1) if found else 'unknown'}, {EMULATED_CPU}"


def use_emulator() -> Callable[[], None]:
    """Register :func:`emulator` as the aarch64 handler (the F flag: the kernel opens it now,
    so no root needs a copy) and switch the host's ``qemu-aarch64`` off; returns the undo.
    Emulated rows may run at once (one process each): each holds a file under the cache, and
    the last one out restores the host's handler."""
    binary, ours, host = emulator(), BINFMT / HANDLER, BINFMT / "qemu-aarch64"
    users = CACHE / "emulator-users"
    users.mkdir(parents=True, exist_ok=True)
    mine = users / str(os.getpid())
    with (CACHE / "emulator.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not ours.exists():
            (BINFMT / "register").write_text(f":{HANDLER}:M::{AARCH64_MAGIC[0]}:"
                                             f"{AARCH64_MAGIC[1]}:{binary}:PF")
        if host.exists():
            host.write_text("0")
        mine.touch()

    def undo() -> None:  # the host's handler on again (on is how ensure_tools leaves it)
        with (CACHE / "emulator.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            mine.unlink(missing_ok=True)
            if any(_alive(int(other.name)) for other in users.iterdir() if other.name.isdigit()):
                return
            if ours.exists():
                ours.write_text("-1")
            if host.exists():
                host.write_text("1")

    return undo


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def root_path(platform: Platform) -> Path:
    parts = (platform.suite, platform.arch, platform.mirror, platform.components,
             *PACKAGES, *APT_OPTIONS)
    key = hashlib.sha256(" ".join(parts).encode()).hexdigest()[:12]
    return CACHE / f"{platform.name}-{key}"


def mmdebstrap_args(platform: Platform, target: Path, keyring: Path | None = None) -> list[str]:
    return ["mmdebstrap", "--variant=apt", f"--architectures={platform.arch}",
            f"--components={platform.components}", f"--include={','.join(PACKAGES)}",
            *(f"--aptopt={option}" for option in APT_OPTIONS),
            *([f"--keyring={keyring}"] if keyring else []),
            platform.suite, str(target), platform.mirror]


def ubuntu_keyring() -> Path:
    """Ubuntu's archive keyring from Debian's own package ``ubuntu-keyring`` (Debian 13 has it,
    the Debian 12 host does not), fetched once (:func:`trixie_package`)."""
    out = CACHE / "ubuntu-keyring"
    gpg = out / "usr/share/keyrings/ubuntu-archive-keyring.gpg"
    if not gpg.exists():
        trixie_package("ubuntu-keyring", out)
    return gpg


def base_root(platform: Platform) -> Path:
    """The cached root of ``platform`` (built with mmdebstrap on the first call)."""
    root = root_path(platform)
    if (root / ".complete").exists():
        return root
    building = root.with_name(root.name + ".new")
    if building.exists():
        run(["rm", "-rf", "--one-file-system", str(building)])
    CACHE.mkdir(parents=True, exist_ok=True)
    keyring = ubuntu_keyring() if platform.keyring == "ubuntu" else None
    run(mmdebstrap_args(platform, building, keyring), timeout=3600)
    (building / ".complete").touch()
    building.rename(root)
    return root


def copy_clean_checkout(target: Path) -> str:
    """A clean copy of the checkout: ``git archive`` of HEAD (nothing built, no venv, no
    voice); returns the commit copied."""
    target.mkdir(parents=True, exist_ok=True)
    archive = target.parent / "checkout.tar"
    commit = run(["git", "-C", str(REPO), "rev-parse", "HEAD"]).stdout.strip()
    run(["git", "-C", str(REPO), "archive", "--format=tar", "-o", str(archive), commit])
    run(["tar", "-x", "-f", str(archive), "-C", str(target)])
    archive.unlink()
    return commit


def prepare_root(platform: Platform, root: Path) -> None:
    """What the host adds to a copy of the root: the row's pip constraints (``PIP_CONSTRAINT``)."""
    (root / CONSTRAINTS.lstrip("/")).write_text("".join(f"{pin}\n" for pin in platform.pins))


def nspawn_command(root: Path, script: str, *, binds: tuple[str, ...] = (),
                   writable: bool = False) -> list[str]:
    """``systemd-nspawn`` running ``script`` in ``root`` (not booted: a chroot with /proc);
    ``binds`` are read-only unless ``writable``."""
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
           "LANG": "C.UTF-8", "HOME": "/root", "DEBIAN_FRONTEND": "noninteractive",
           "PIP_CERT": "/etc/tts-host-ca.crt", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
           "PIP_DEFAULT_TIMEOUT": "180",
           # Under emulation, the processor a Raspberry Pi 5 has (a native root ignores it):
           # qemu's default "max" adds SVE2 and SME, where numpy's matrix products (OpenBLAS)
           # came out wrong, NaN at times, from one call to the next (docs/platforms.md).
           "QEMU_CPU": EMULATED_CPU,
           **({"PIP_CONSTRAINT": CONSTRAINTS} if (root / CONSTRAINTS.lstrip("/")).exists() else {})}
    return ["systemd-nspawn", "--quiet", "--register=no", "--keep-unit", "--pipe",
            f"--directory={root}", "--resolv-conf=copy-host", "--timezone=off",
            f"--bind-ro={HOST_CA}:/etc/tts-host-ca.crt",
            *(f"--bind{'' if writable else '-ro'}={bind}" for bind in binds),
            *(f"--setenv={key}={value}" for key, value in env.items()),
            "/bin/sh", "-c", script]
