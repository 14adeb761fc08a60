"""A Debian root booted with ``systemd-nspawn -b``: the installed unit under a real systemd.

Used by ``tests/systemd/test_nspawn_boot.py`` (opt-in, ``TTS_AGENT_TEST_SYSTEMD=1``, root).

- :func:`ensure_tools` installs the apt packages ``mmdebstrap`` and ``systemd-container`` when
  they are missing (the test's set-up step, never a hand install).
- :func:`base_root` builds a Debian root with ``mmdebstrap`` once and caches it under
  ``.cache/nspawn/`` (keyed by the suite and the package list), so reruns start from a copy.
- :func:`wheelhouse` collects wheels of the agent's dependencies from this checkout's venv
  (pip's own configuration: the package index or local wheel directories), so the install
  inside the root needs no index: ``install.sh --pip-args "--no-index --find-links ..."``.
- :class:`Machine` boots a copy of the root and runs commands inside it through ``nsenter``
  (the host needs no systemd of its own, so no machined registration).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from tests.support import REPO

CACHE = REPO / ".cache" / "nspawn"
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
PACKAGES = (
    # init and what `systemctl`/`journalctl` inside need
    "systemd", "systemd-sysv", "dbus", "procps", "util-linux", "iproute2",
    # what install.sh checks for (APT_RUNTIME), so it does not reach for apt inside
    "python3", "python3-venv", "python3-dev", "build-essential",
    "libasound2", "libasound2-dev", "alsa-utils", "libespeak-ng1", "espeak-ng-data", "espeak-ng",
    # the broker the agent talks to, and a client for the test
    "mosquitto", "mosquitto-clients", "ca-certificates",
)
TOOLS = {"mmdebstrap": "mmdebstrap", "systemd-nspawn": "systemd-container"}


def run(args: Sequence[str], *, timeout: float = 900, check: bool = True,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run a host command; on failure raise with the command's last output lines."""
    result = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout,
                            check=False, env=env)
    if check and result.returncode != 0:
        tail = (result.stdout + result.stderr)[-4000:]
        raise RuntimeError(f"{' '.join(args[:4])}... exited {result.returncode}:\n{tail}")
    return result


def ensure_tools() -> None:
    """Install mmdebstrap and systemd-container with apt when a tool is missing (root)."""
    missing = sorted({package for tool, package in TOOLS.items() if shutil.which(tool) is None})
    if not missing:
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    run(["apt-get", "update", "-qq"], env=env)
    run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing], env=env)


def base_root() -> Path:
    """The cached Debian root (built with mmdebstrap on the first call)."""
    key = hashlib.sha256(" ".join((SUITE, MIRROR, *PACKAGES)).encode()).hexdigest()[:12]
    root = CACHE / f"{SUITE}-{key}"
    if (root / "usr/lib/systemd/systemd").exists() or (root / "lib/systemd/systemd").exists():
        return root
    building = root.with_name(root.name + ".new")
    shutil.rmtree(building, ignore_errors=True)
    CACHE.mkdir(parents=True, exist_ok=True)
    run(["mmdebstrap", "--quiet", "--variant=apt", f"--include={','.join(PACKAGES)}",
         # Debian's mosquitto package starts a broker at boot: the one the agent talks to.
         "--customize-hook=echo tts-nspawn > \"$1/etc/hostname\"",
         SUITE, str(building), MIRROR], timeout=1800)
    building.rename(root)
    return root


def wheelhouse(python: Path) -> Path:
    """Wheels of the agent's dependencies (not of the agent), cached by pyproject.toml."""
    key = hashlib.sha256((REPO / "pyproject.toml").read_bytes()).hexdigest()[:12]
    wheels = CACHE / f"wheels-{key}"
    if (wheels / ".complete").exists():
        return wheels
    shutil.rmtree(wheels, ignore_errors=True)
    wheels.mkdir(parents=True)
    run([str(python), "-m", "pip", "wheel", "-q", "--wheel-dir", str(wheels),
         f"{REPO}[voice]", "pip", "setuptools>=77", "wheel"], timeout=1800)
    for built in wheels.glob("edge_tts_agent-*.whl"):
        built.unlink()  # the agent itself is installed from the tree under test
    (wheels / ".complete").touch()
    return wheels


def copy_tree(source: Path, target: Path) -> None:
    """``cp -a`` (reflinks where the file system has them): keeps owners, modes, links."""
    run(["cp", "-a", "--reflink=auto", f"{source}/.", str(target)], timeout=900)


def copy_checkout(target: Path) -> None:
    """The checkout as git sees it (tracked and untracked, not ignored) plus ``models/``."""
    listing = run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others",
                   "--exclude-standard"]).stdout
    for name in filter(None, listing.split("\0")):
        source = REPO / name
        if not source.is_file():
            continue  # deleted but still in the index
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target / name)
    if (REPO / "models").is_dir():
        shutil.copytree(REPO / "models", target / "models", symlinks=True, dirs_exist_ok=True)


class Machine:
    """A root booted with ``systemd-nspawn -b``; commands run inside through nsenter."""

    def __init__(self, root: Path, *, binds: Sequence[str] = ()) -> None:
        self.root = root
        self.binds = list(binds)
        self.process: subprocess.Popen[bytes] | None = None
        self.leader = 0
        self.console = root.parent / "console.log"

    def boot(self, timeout: float = 180) -> None:
        """Boot and wait until systemd inside reports the boot finished."""
        # --private-network: the container's own loopback, so its broker can bind :1883
        # whatever the host runs; the install inside needs no network (local wheels).
        args = ["systemd-nspawn", "--quiet", "--boot", "--register=no", "--keep-unit",
                "--private-network", f"--directory={self.root}", "--machine=tts-nspawn",
                "--console=pipe",
                *(f"--bind-ro={bind}" for bind in self.binds)]
        with self.console.open("wb") as log:
            self.process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"systemd-nspawn exited {self.process.returncode}:\n"
                                   + self.console.read_text(errors="replace")[-4000:])
            self.leader = self.leader or self._find_leader()
            if self.leader:
                state = self.sh("systemctl is-system-running --wait", check=False, timeout=60)
                if state.stdout.strip() in {"running", "degraded"}:
                    return
            time.sleep(0.5)  # polling a process that has no event to await
        raise RuntimeError("the container did not finish booting:\n"
                           + self.console.read_text(errors="replace")[-4000:])

    def _find_leader(self) -> int:
        """PID (host view) of the container's init: systemd-nspawn's child."""
        assert self.process is not None
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        try:
            pids = children.read_text().split()
        except OSError:
            return 0
        for pid in pids:
            try:
                if Path(f"/proc/{pid}/comm").read_text().strip() == "systemd":
                    return int(pid)
            except OSError:
                continue
        return 0

    def sh(self, script: str, *, check: bool = True,
           timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """Run ``script`` with /bin/sh inside the container (all of init's namespaces)."""
        assert self.leader, "not booted"
        env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
               "LANG": "C.UTF-8", "SYSTEMD_PAGER": "", "SYSTEMD_COLORS": "0"}
        return run(["nsenter", f"--target={self.leader}", "--mount", "--uts", "--ipc",
                    "--net", "--pid", "--root", "--wd", "--", "/usr/bin/env", "-i",
                    *(f"{key}={value}" for key, value in env.items()),
                    "/bin/sh", "-c", script], timeout=timeout, check=check)

    def poweroff(self, timeout: float = 120) -> None:
        """Shut the container down (SIGRTMIN+4 to its init, then SIGKILL to nspawn)."""
        if self.process is None or self.process.poll() is not None:
            return
        if self.leader:
            os.kill(self.leader, signal.SIGRTMIN + 4)  # systemd: poweroff
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(30)
