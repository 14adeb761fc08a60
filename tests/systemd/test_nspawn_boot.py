"""The installed unit under a real systemd: a Debian root booted with ``systemd-nspawn -b``.

Opt-in and slow (a few minutes the first time, the root is then cached under ``.cache/nspawn/``):

    sudo TTS_AGENT_TEST_SYSTEMD=1 .venv/bin/python -m pytest -q tests/systemd

It needs root, a Debian mirror for the first ``mmdebstrap`` and the apt packages ``mmdebstrap``
and ``systemd-container`` (installed here when missing). The root gets ``systemd``, Python,
espeak-ng, alsa-lib and Mosquitto (the broker the agent talks to, on the container's own
loopback); ``systemd/install.sh install`` then installs this checkout inside the booted
container exactly as on a device, with pip reading a wheel directory made from the
checkout's venv (no package index inside). The tests run in order on that one machine:

- the install starts the service: ``active (running)``, which for ``Type=notify`` means READY=1;
- it starts without a password file too (#15 item 11: the credential is optional), and with
  ``password_file`` set but no file it fails with one line naming it;
- it speaks through alsa-lib into a file PCM that only the ``audio`` group may write;
- the sandbox: no capabilities, NoNewPrivs, the audio group, and writes only to its
  state, cache, runtime and private temporary directories;
- ``systemctl reload`` (SIGHUP) reloads in place; the watchdog restarts an agent whose
  synthesis hangs (``tests/support/stall_voice.py``); ``systemctl stop`` ends it with status 0.

Inside nspawn here the memory, pids and device cgroup controllers are not delegated, so
``MemoryMax=``, ``TasksMax=`` and ``DevicePolicy=`` are not enforced; nothing here checks them.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support import nspawn, stall_voice

pytestmark = [
    pytest.mark.skipif(os.environ.get("TTS_AGENT_TEST_SYSTEMD") != "1",
                       reason="set TTS_AGENT_TEST_SYSTEMD=1 to boot the unit under systemd-nspawn"),
    pytest.mark.skipif(sys.platform != "linux" or os.geteuid() != 0,
                       reason="systemd-nspawn needs root on Linux"),
    pytest.mark.timeout(1800),
]

UNIT = "tts-agent.service"
DEVICE = "tts-nspawn"  # the container's host name: the agent's default device id
SINK = "/dev/shm/tts-sink.raw"
WAIT_S = 240.0  # generous bound for waiting on the machine; never asserted as a timing
ASOUND = f"""# The default PCM of this test machine: raw frames into {SINK}.
pcm.!default {{ type file slave.pcm {{ type null }} file "{SINK}" format "raw" truncate true }}
"""
ALLOWED_WRITES = ("/var/lib/private/tts-agent/", "/var/cache/private/tts-agent/",
                  "/tmp/systemd-private-", "/var/tmp/systemd-private-")


@pytest.fixture(scope="module")
def machine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[nspawn.Machine]:
    nspawn.ensure_tools()
    base = nspawn.base_root()
    wheels = nspawn.wheelhouse(Path(sys.executable))
    work = tmp_path_factory.mktemp("nspawn")
    root = work / "root"
    root.mkdir()
    nspawn.copy_tree(base, root)
    nspawn.copy_checkout(root / "src/tts-agent")
    # A voice whose synthesis hangs on request, installed next to the real one.
    stall_voice.build_bundle(root / "var/lib/tts-agent/models")
    (root / "etc/asound.conf").write_text(ASOUND)
    (root / "etc/hosts").write_text(f"127.0.0.1 localhost\n::1 localhost ip6-localhost\n"
                                    f"127.0.1.1 {DEVICE}\n")
    box = nspawn.Machine(root, binds=[f"{wheels}:/wheels"])
    try:
        box.boot()
        # The sink: a file only root and the audio group may write (like /dev/snd/*).
        box.sh(f"install -m 0660 -g audio /dev/null {SINK}")
        yield box
    finally:
        box.poweroff()
        # The copy is about a gigabyte; the console log next to it stays for a post-mortem.
        nspawn.run(["rm", "-rf", "--one-file-system", str(root)], check=False)


def show(box: nspawn.Machine, *properties: str) -> dict[str, str]:
    out = box.sh(f"systemctl show {UNIT} " + " ".join(f"-p {p}" for p in properties)).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def journal(box: nspawn.Machine, since: str = "") -> str:
    cursor = f"--after-cursor={shlex.quote(since)}" if since else ""
    return box.sh(f"journalctl -u {UNIT} -o cat --no-pager {cursor}", check=False).stdout


def cursor(box: nspawn.Machine) -> str:
    out = box.sh("journalctl -n 0 --show-cursor --no-pager", check=False).stdout
    return out.strip().rpartition("-- cursor: ")[2]


def wait_for(what: str, probe: Callable[[], bool], timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if probe():
            return
        time.sleep(1.0)  # polling systemd's state inside another machine: no event to await
    pytest.fail(f"timed out waiting for {what}")


def publish(box: nspawn.Machine, command: str, payload: dict[str, object]) -> None:
    topic = f"tts/{DEVICE}/cmd/{command}"
    box.sh(f"mosquitto_pub -h localhost -q 1 -t {topic} -m {shlex.quote(json.dumps(payload))}")


def running(box: nspawn.Machine) -> dict[str, str]:
    return show(box, "ActiveState", "SubState", "MainPID", "NRestarts", "Result",
                "ExecMainStatus", "ExecMainCode", "StatusText")


def test_install_starts_the_service_active_running(machine: nspawn.Machine) -> None:
    result = machine.sh("/src/tts-agent/systemd/install.sh install /src/tts-agent "
                        "--pip-args '--no-index --find-links /wheels' 2>&1", timeout=1200)
    assert "running: systemctl status tts-agent" in result.stdout, result.stdout[-3000:]
    state = running(machine)
    # Type=notify: `systemctl restart` returned only after the agent's READY=1.
    assert (state["ActiveState"], state["SubState"]) == ("active", "running"), state
    status = machine.sh(f"systemctl status --no-pager {UNIT}", check=False).stdout
    assert "active (running)" in status
    assert machine.sh(f"systemctl is-enabled {UNIT}").stdout.strip() == "enabled"


def test_the_first_start_read_what_install_prepared(machine: nspawn.Machine) -> None:
    # #19 item 4: install ran `tts-agent prepare` with the unit's settings file, so the
    # service's first start (DynamicUser, the cache moved under /var/cache/private) found the
    # very cache key it looks up and built nothing.
    log = journal(machine)
    loaded = [json.loads(line) for line in log.splitlines()
              if line.startswith("{") and '"voice_loaded"' in line]
    assert loaded and {e["session_cache"] for e in loaded} == {"hit"}, log[-3000:]
    assert "decoder_window_measured" not in log and "onnx_optimized_cache_stored" not in log


def test_it_starts_without_a_password_file(machine: nspawn.Machine) -> None:
    machine.sh("rm -f /etc/tts-agent/mqtt-password")
    restart = machine.sh(f"systemctl restart {UNIT}", check=False)
    assert restart.returncode == 0, journal(machine)[-3000:]
    state = running(machine)
    assert (state["ActiveState"], state["SubState"]) == ("active", "running"), state
    assert "243/CREDENTIALS" not in journal(machine)


def test_a_configured_password_file_that_is_missing_is_one_clear_error(
    machine: nspawn.Machine,
) -> None:
    config = "/etc/tts-agent/agent.toml"
    machine.sh(f"cp {config} {config}.orig && "
               f"sed -i 's/^# password_file = /password_file = /' {config}")
    try:
        mark = cursor(machine)
        assert machine.sh(f"systemctl restart {UNIT}", check=False).returncode != 0
        log = journal(machine, mark)
        assert "243/CREDENTIALS" not in log
        # check-config (ExecStartPre=) names the setting and the file, in one line, exit 2.
        errors = [line for line in log.splitlines()
                  if line.startswith("tts-agent check-config: error: ")]
        assert len(errors) == 1, log[-3000:]
        assert errors[0].startswith("tts-agent check-config: error: mqtt.password_file: ")
        assert "/run/credentials/tts-agent.service/mqtt-password" in errors[0]
        assert "status=2/INVALIDARGUMENT" in log
    finally:
        machine.sh(f"mv {config}.orig {config} && systemctl reset-failed {UNIT}")
    assert machine.sh(f"systemctl restart {UNIT}", check=False).returncode == 0
    assert running(machine)["SubState"] == "running"


def test_it_speaks_through_the_audio_group(machine: nspawn.Machine) -> None:
    publish(machine, "speak", {"id": "hello", "text": "Welcome to the station."})
    size = f"stat -c %s {SINK}"
    # A second of 16-bit mono at the voice's rate: the sentence reached alsa-lib's file PCM.
    wait_for("audio in the sink", lambda: int(machine.sh(size).stdout.strip() or 0) > 44_100)


def test_the_sandbox(machine: nspawn.Machine) -> None:
    pid = running(machine)["MainPID"]
    status = dict(line.split(":", 1) for line in
                  machine.sh(f"cat /proc/{pid}/status").stdout.splitlines() if ":" in line)
    for caps in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(status[caps], 16) == 0, (caps, status[caps])
    assert status["NoNewPrivs"].strip() == "1"
    assert status["Seccomp"].strip() == "2"  # SystemCallFilter= is a seccomp filter
    audio = machine.sh("getent group audio | cut -d: -f3").stdout.strip()
    assert audio in status["Groups"].split()
    uid = status["Uid"].split()[0]
    assert uid != "0"

    gid = status["Gid"].split()[0]

    # In the agent's mount namespace even root cannot write the system (read-only mounts);
    # the agent's own directories are writable, by root and by the agent's user.
    def writable(path: str, *, as_agent: bool = False) -> bool:
        probe = f"{path}/.tts-probe"
        user = f"setpriv --reuid={uid} --regid={gid} --clear-groups " if as_agent else ""
        result = machine.sh(f"nsenter -t {pid} -m {user}sh -c 'touch {probe} && rm {probe}'",
                            check=False)
        return result.returncode == 0

    for path in ("/etc", "/etc/tts-agent", "/opt/tts-agent/venv", "/usr", "/var/lib",
                 "/var/lib/private", "/root", "/home", "/run", "/run/lock"):
        assert not writable(path), path
    assert not writable("/run/lock", as_agent=True)  # world-writable outside the sandbox
    for path in ("/var/lib/tts-agent", "/var/cache/tts-agent", "/run/tts-agent", "/tmp"):
        assert writable(path), path
        assert writable(path, as_agent=True), path
    # Every file on the root file system that the agent's user owns is in those directories.
    owned = machine.sh(f"find / -xdev -user {uid} 2>/dev/null", check=False).stdout.split()
    assert owned
    strays = [path for path in owned
              if not path.startswith(ALLOWED_WRITES) and path not in
              {"/var/lib/private/tts-agent", "/var/cache/private/tts-agent"}]
    assert strays == []
    # The unit as systemd itself rates it on this machine.
    security = machine.sh(f"systemd-analyze security {UNIT} --no-pager", check=False).stdout
    exposure = float(security.rpartition("exposure level for tts-agent.service: ")[2].split()[0])
    assert exposure <= 1.5, security[-3000:]


def test_reload_is_a_sighup_in_place(machine: nspawn.Machine) -> None:
    before = running(machine)
    mark = cursor(machine)
    assert machine.sh(f"systemctl reload {UNIT}", check=False).returncode == 0
    wait_for("reload_finished in the journal", lambda: "reload_finished" in journal(machine, mark))
    after = running(machine)
    assert (after["ActiveState"], after["SubState"]) == ("active", "running")
    assert after["MainPID"] == before["MainPID"]
    assert after["NRestarts"] == before["NRestarts"]


def test_the_watchdog_restarts_a_hung_agent(machine: nspawn.Machine) -> None:
    before = running(machine)
    mark = cursor(machine)
    publish(machine, "speak", {"id": "hang", "text": "This one never ends.",
                               "voice": stall_voice.VOICE, "speed": stall_voice.HANG_SPEED})
    wait_for("a restart", lambda: running(machine)["NRestarts"] != before["NRestarts"],
             timeout=WAIT_S + 120)
    log = journal(machine, mark)
    assert "Watchdog timeout" in log, log[-3000:]
    wait_for("active (running) again", lambda: (running(machine)["SubState"] == "running"))
    after = running(machine)
    assert after["MainPID"] != before["MainPID"]
    assert int(after["NRestarts"]) == int(before["NRestarts"]) + 1


def test_stop_is_clean(machine: nspawn.Machine) -> None:
    assert machine.sh(f"systemctl stop {UNIT}", check=False).returncode == 0
    state = running(machine)
    assert state["ActiveState"] == "inactive", state
    assert (state["Result"], state["ExecMainCode"], state["ExecMainStatus"]) == (
        "success", "1", "0"), state  # CLD_EXITED with status 0: no signal, no timeout
    assert "agent_stopped" in journal(machine)
