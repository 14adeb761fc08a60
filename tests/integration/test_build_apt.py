"""build.sh's and install.sh's apt checks against this machine's real dpkg database (#25 item 2).

A name that an installed package provides counts as installed: on Debian 13 and Ubuntu 24.04
``libasound2`` is a virtual package (``libasound2t64`` provides it), and a check that looked
only for a package of that name ran apt on every ``./build.sh``. Here ``apt`` provides
``apt-transport-https (= VERSION)`` and ``mawk`` provides ``awk``: the same shape on any
Debian release. Only the read-only functions run (no apt).
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from tests.support import REPO

DPKG_QUERY = shutil.which("dpkg-query") or "dpkg-query"
BASH = shutil.which("bash") or "/bin/bash"
pytestmark = pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="needs dpkg")


def functions(script: str, *names: str) -> str:
    """The shell functions ``names`` as defined in ``script`` (from ``name() {`` to ``}``)."""
    text = (REPO / script).read_text(encoding="utf-8")
    found = [re.search(rf"^{name}\(\) {{.*?^}}$", text, re.MULTILINE | re.DOTALL)
             for name in names]
    assert all(found), f"{script} defines {names}"
    return "\n".join(match.group(0) for match in found if match)


def provided(virtual: str) -> bool:
    """Whether an installed package provides ``virtual`` and none is called that."""
    status = subprocess.run([DPKG_QUERY, "-W", "-f=${Status}", virtual],
                            capture_output=True, text=True, check=False).stdout
    listing = subprocess.run([DPKG_QUERY, "-W", "-f=${Status}|${Provides}\n"],
                             capture_output=True, text=True, check=True).stdout
    return "install ok installed" not in status and any(
        line.startswith("install ok installed|") and re.search(rf"(^|[|,] ?){virtual}\b", line)
        for line in listing.splitlines())


def test_build_sh_counts_provided_names_as_installed() -> None:
    virtual = [name for name in ("apt-transport-https", "awk") if provided(name)]
    if not virtual:
        pytest.skip("no installed package provides apt-transport-https or awk here")
    script = functions("build.sh", "installed_names", "missing_packages")
    done = subprocess.run([BASH, "-c", f"{script}\nmissing_packages \"$@\"", "build.sh",
                           "dpkg", *virtual, "tts-agent-no-such-package"],
                          capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["tts-agent-no-such-package"]


def test_install_sh_counts_provided_names_as_installed() -> None:
    virtual = [name for name in ("apt-transport-https", "awk") if provided(name)]
    if not virtual:
        pytest.skip("no installed package provides apt-transport-https or awk here")
    script = "say() { echo \"$*\"; }\n" + functions("systemd/install.sh", "apt_runtime")
    # DESTDIR set: the function only reports what is missing, it never runs apt.
    body = (f"{script}\nDESTDIR=/nonexistent\n"
            f"APT_RUNTIME=(dpkg {' '.join(virtual)} tts-agent-no-such-package)\napt_runtime")
    done = subprocess.run([BASH, "-c", body], capture_output=True, text=True, check=True)
    assert "missing: tts-agent-no-such-package" in done.stdout + done.stderr
    for name in virtual:
        assert name not in done.stdout + done.stderr
