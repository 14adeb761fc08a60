"""``tts-agent check-config`` as the unit's gate: each configuration that cannot work is refused
with one line naming the setting and the absolute path, exit 2; a good one prints the settings.

The real CLI runs as a process, against the tiny generated voice, a real alsa-lib reading an
ALSA configuration of the test's own (``ALSA_CONFIG_PATH``), and real files; one case runs it as
an unprivileged user to check access as the service's user would have it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import REPO
from tests.support.alsa_sink import AlsaConfig
from tests.support.cli import agent_cli
from tests.support.make_tiny_voice import VOICE

pytestmark = pytest.mark.alsa

NOBODY = 65534


class Setup:
    """A config file, a models dir with the tiny voice, a cache dir and an ALSA file PCM."""

    def __init__(self, root: Path, tiny_models_dir: Path, alsa: AlsaConfig) -> None:
        self.root = root
        self.models = root / "models"
        shutil.copytree(tiny_models_dir, self.models)
        self.cache = root / "cache"
        self.alsa = alsa
        alsa.add_file("sink", root / "sink.raw")
        self.config = root / "agent.toml"
        self.values: dict[str, dict[str, object]] = {
            "models": {"dir": str(self.models), "default_voice": VOICE},
            "cache": {"dir": str(self.cache)},
            "audio": {"device": "sink"},
            "mqtt": {},
        }

    def set(self, section: str, key: str, value: object) -> Setup:
        self.values[section][key] = value
        return self

    def write(self) -> Path:
        lines: list[str] = []
        for section, values in self.values.items():
            lines.append(f"[{section}]")
            lines += [f"{key} = {json.dumps(value)}" for key, value in values.items()]
        self.config.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return self.config

    def run(self, *extra: str, env: dict[str, str] | None = None, cwd: Path | None = None,
            user: int | None = None) -> subprocess.CompletedProcess[str]:
        self.write()
        base = {k: v for k, v in os.environ.items() if not k.upper().startswith("TTS_AGENT_")}
        base["ALSA_CONFIG_PATH"] = str(self.alsa.path)
        return agent_cli("check-config", "--config", self.config, *extra, timeout=120,
                         cwd=cwd or REPO, env={**base, "PYTHONPATH": str(REPO), **(env or {})},
                         user=user)


@pytest.fixture()
def setup(tmp_path: Path, tiny_models_dir: Path, alsa: AlsaConfig) -> Setup:
    return Setup(tmp_path, tiny_models_dir, alsa)


def refused(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    """The one error line of a refused check; asserts exit 2, no traceback, no JSON."""
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("tts-agent check-config: error: ")
    assert "Traceback" not in result.stderr and result.stdout == ""
    for needle in needles:
        assert needle in lines[0]
    return lines[0]


def test_a_configuration_that_works_prints_the_settings(setup: Setup) -> None:
    result = setup.run()
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    data = json.loads(result.stdout)
    assert data["models"]["dir"] == str(setup.models)


def test_missing_models_dir(setup: Setup) -> None:
    setup.set("models", "dir", str(setup.root / "nope"))
    refused(setup.run(), "models.dir", f"{setup.root / 'nope'} does not exist")


def test_a_relative_models_dir_is_shown_absolute(setup: Setup) -> None:
    setup.set("models", "dir", "voices")
    refused(setup.run(cwd=setup.root), f"models.dir: {setup.root / 'voices'} does not exist")


def test_default_voice_not_installed(setup: Setup) -> None:
    setup.set("models", "default_voice", "en_US-nobody-medium")
    refused(setup.run(), "models.default_voice", "'en_US-nobody-medium'", str(setup.models),
            f"installed: {VOICE}")


def test_default_voice_that_does_not_match_its_manifest(setup: Setup) -> None:
    model = setup.models / VOICE / f"{VOICE}.onnx"
    data = bytearray(model.read_bytes())
    data[-1] ^= 0xFF  # same size, other bytes
    model.write_bytes(bytes(data))
    refused(setup.run(), "models.default_voice", "sha256")


def test_the_gate_lets_a_damaged_voice_through_as_a_warning(setup: Setup) -> None:
    """The unit's gate (--gate): the agent starts and reports the refused voice to the fleet
    instead of sitting in systemd's restart loop; everything else still stops the start."""
    model = setup.models / VOICE / f"{VOICE}.onnx"
    data = bytearray(model.read_bytes())
    data[-1] ^= 0xFF
    model.write_bytes(bytes(data))
    result = setup.run("--gate")
    assert result.returncode == 0, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith("tts-agent check-config: warning: models.default_voice: ")
    assert "sha256" in line and "the agent starts and reports it" in line
    assert json.loads(result.stdout)["models"]["default_voice"] == VOICE
    setup.set("mqtt", "password_file", str(setup.root / "missing-password"))
    result = setup.run("--gate")
    assert result.returncode == 2
    errors = [x for x in result.stderr.splitlines() if ": error: " in x]
    assert len(errors) == 1 and "mqtt.password_file" in errors[0]


@pytest.mark.parametrize("key", ["ca_file", "cert_file", "password_file"])
def test_missing_mqtt_files(setup: Setup, key: str) -> None:
    setup.set("mqtt", key, str(setup.root / "absent.pem"))
    if key == "cert_file":
        (setup.root / "key.pem").write_text("key\n")
        setup.set("mqtt", "key_file", str(setup.root / "key.pem"))
    refused(setup.run(), f"mqtt.{key}", f"{setup.root / 'absent.pem'} does not exist")


def test_password_file_relative_to_the_credentials_directory(setup: Setup) -> None:
    setup.set("mqtt", "username", "u").set("mqtt", "password_file", "mqtt-password")
    creds = setup.root / "credentials"
    creds.mkdir()
    refused(setup.run(env={"CREDENTIALS_DIRECTORY": str(creds)}),
            f"mqtt.password_file: {creds / 'mqtt-password'} does not exist")
    (creds / "mqtt-password").write_text("s3cret\n")
    result = setup.run(env={"CREDENTIALS_DIRECTORY": str(creds)})
    assert result.returncode == 0, result.stderr
    assert "s3cret" not in result.stdout


def test_a_password_file_that_is_a_fifo_is_not_read(setup: Setup) -> None:
    fifo = setup.root / "pw.fifo"
    os.mkfifo(fifo)
    setup.set("mqtt", "password_file", str(fifo))
    refused(setup.run(), "mqtt.password_file", "not a regular file")  # and it did not block


@pytest.fixture()
def shared_dir() -> Iterator[Path]:
    """A directory another user can reach (pytest's tmp_path is private to this user)."""
    path = Path(tempfile.mkdtemp(prefix="check-config-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path)


def other_user_can_run_python() -> bool:
    """Root can start this interpreter as ``nobody`` (not when it lives in root's home)."""
    if os.geteuid() != 0:
        return False
    try:
        subprocess.run([sys.executable, "-c", "pass"], user=NOBODY, check=True, timeout=60,
                       capture_output=True, cwd="/")
    except (OSError, subprocess.SubprocessError):
        return False
    return True


@pytest.mark.skipif(not other_user_can_run_python(),
                    reason="needs root and an interpreter another user may run")
def test_access_is_checked_for_the_user_it_runs_as(setup: Setup, shared_dir: Path) -> None:
    """As the unit's ExecStartPre runs it: as the service's user, who cannot read a key that
    only root can (root itself reads every file)."""
    shutil.copytree(setup.models, shared_dir / "models")
    for path in [shared_dir / "models", *(shared_dir / "models").rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    asound = shared_dir / "asound.conf"
    asound.write_text("pcm.null { type null }\n", encoding="utf-8")
    asound.chmod(0o644)
    key, cert = shared_dir / "client.key", shared_dir / "client.pem"
    key.write_text("key\n")
    key.chmod(0o600)
    cert.write_text("cert\n")
    cert.chmod(0o644)
    setup.config = shared_dir / "agent.toml"
    setup.set("models", "dir", str(shared_dir / "models"))
    setup.set("cache", "dir", str(shared_dir / "cache"))
    (shared_dir / "cache").mkdir(mode=0o777)
    (shared_dir / "cache").chmod(0o777)
    setup.set("audio", "device", "null")
    setup.set("mqtt", "cert_file", str(cert)).set("mqtt", "key_file", str(key))
    env = {"ALSA_CONFIG_PATH": str(asound), "HOME": str(shared_dir)}
    assert setup.run(env=env).returncode == 0
    setup.config.chmod(0o644)
    refused(setup.run(env=env, user=NOBODY), "mqtt.key_file",
            f"{key} is not readable by uid {NOBODY}")
    key.chmod(0o644)
    result = setup.run(env=env, user=NOBODY)
    assert result.returncode == 0, result.stderr


def test_unknown_pcm(setup: Setup) -> None:
    setup.set("audio", "device", "defualt")
    refused(setup.run(), "audio.device", "'defualt'", "no PCM named 'defualt'")


def test_a_pcm_with_arguments_resolves_by_its_base_name(setup: Setup) -> None:
    setup.set("audio", "device", "sink:0")  # resolves as PCM "sink" (the card is not checked)
    assert setup.run().returncode == 0


def test_file_pcm_into_a_missing_directory(setup: Setup) -> None:
    gone = setup.root / "gone"
    setup.alsa.add_file("lost", gone / "out.raw")
    setup.set("audio", "device", "lost")
    refused(setup.run(), "audio.device", f"writes into {gone}, which does not exist")


def test_unknown_hardware_profile(setup: Setup) -> None:
    result = setup.run(env={"TTS_AGENT_PROFILE": "no-such-board"})
    refused(result, "profile", "no-such-board")


def test_cache_dir_that_cannot_be_created(setup: Setup) -> None:
    blocker = setup.root / "a-file"
    blocker.write_text("")
    setup.set("cache", "dir", str(blocker / "cache"))
    refused(setup.run(), "cache.dir", f"{blocker} is not a directory")


def test_problems_are_one_line_each(setup: Setup) -> None:
    setup.set("models", "dir", str(setup.root / "nope")).set("audio", "device", "defualt")
    setup.set("mqtt", "ca_file", str(setup.root / "ca.pem"))
    result = setup.run()
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert [line.split(": ")[2] for line in lines] == ["models.dir", "mqtt.ca_file",
                                                       "audio.device"]


def test_explain_says_which_path_rule_applied(setup: Setup) -> None:
    del setup.values["cache"]["dir"]
    result = setup.run("--explain")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert f"config file: {setup.config} (--config)" in out
    assert f"path defaults: the agent runs from the checkout {REPO}" in out
    assert "models.dir set, cache.dir default" in out
    assert f"ok    cache.dir: {REPO / '.cache' / 'tts-agent'}" in out
    assert f"ok    models.default_voice: {VOICE}" in out
    assert "access checked as uid" in out


def test_the_espeak_ng_build_is_named_and_checked(setup: Setup, tmp_path: Path) -> None:
    result = setup.run("--explain")
    assert result.returncode == 0, result.stderr
    line = next(x for x in result.stdout.splitlines() if x.startswith("ok    espeak-ng: "))
    assert " build" in line and "voice 'en-us'" in line
    result = setup.run("--explain", env={"TTS_AGENT_ESPEAK_LIBRARY": "system"})
    assert "espeak-ng: espeak-ng 1.5" in result.stdout and ", system build: " in result.stdout
    missing = tmp_path / "libespeak-ng-missing.so"
    result = setup.run(env={"TTS_AGENT_ESPEAK_LIBRARY": str(missing)})
    assert result.returncode == 2
    assert f"error: espeak-ng: {missing} could not be loaded" in result.stderr


def test_settings_only_checks_no_files(setup: Setup) -> None:
    setup.set("models", "dir", str(setup.root / "nope"))
    result = setup.run("--settings-only")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["models"]["dir"] == str(setup.root / "nope")


def test_an_unknown_top_level_variable_is_refused(setup: Setup) -> None:
    result = setup.run(env={"TTS_AGENT_DEVICEID": "x"})
    refused(result, "TTS_AGENT_DEVICEID: unknown setting (did you mean TTS_AGENT_DEVICE_ID?)")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to take another user's identity")
def test_access_is_checked_for_the_effective_user(setup: Setup, shared_dir: Path) -> None:
    """The same rule in this process, for machines whose interpreter only root may run: with
    the effective ids of ``nobody``, a key only root reads is a problem, a readable one not."""
    from agent.commands.check_config import run_checks
    from agent.settings import load_settings

    key, cert = shared_dir / "client.key", shared_dir / "client.pem"
    for path, mode in ((key, 0o600), (cert, 0o644)):
        path.write_text("x\n")
        path.chmod(mode)
    setup.set("mqtt", "cert_file", str(cert)).set("mqtt", "key_file", str(key))
    settings = load_settings(setup.write())
    # Once as root first, so that every module the checks import is loaded: the checkout may
    # sit in a directory nobody cannot enter (only the access checks are to run as nobody).
    run_checks(settings)

    def checks_as_nobody() -> dict[str, str | None]:
        os.setegid(NOBODY)
        os.seteuid(NOBODY)
        try:
            return {c.setting: c.problem for c in run_checks(settings)
                    if c.setting.startswith("mqtt.")}
        finally:
            os.seteuid(0)
            os.setegid(0)

    assert checks_as_nobody() == {"mqtt.cert_file": None,
                                  "mqtt.key_file": f"{key} is not readable by uid {NOBODY} "
                                                   "(nobody)"}
    key.chmod(0o644)
    assert checks_as_nobody() == {"mqtt.cert_file": None, "mqtt.key_file": None}


def test_invalid_settings_are_one_prefixed_line_each(setup: Setup) -> None:
    setup.set("mqtt", "port", 0).set("mqtt", "hots", "broker")
    result = setup.run(env={"TTS_AGENT_DEVICEID": "x"})
    assert result.returncode == 2 and result.stdout == ""
    assert sorted(result.stderr.splitlines()) == sorted([
        "tts-agent check-config: error: TTS_AGENT_DEVICEID: unknown setting "
        "(did you mean TTS_AGENT_DEVICE_ID?)",
        f"tts-agent check-config: error: {setup.config}: mqtt.port must be at least 1 (got 0)",
        f"tts-agent check-config: error: {setup.config}: unknown setting mqtt.hots "
        "(did you mean mqtt.host?)",
    ])


def test_a_ca_file_that_is_no_certificate(setup: Setup) -> None:
    ca = setup.root / "ca.pem"
    ca.write_text("not a certificate\n")
    setup.set("mqtt", "tls", True).set("mqtt", "ca_file", str(ca))
    refused(setup.run(), "mqtt: cannot set up TLS")


def test_an_oversized_password_file_is_refused_unread(setup: Setup) -> None:
    secret = setup.root / "pw"
    secret.write_text("hunter2" * 1000)
    setup.set("mqtt", "username", "u").set("mqtt", "password_file", str(secret))
    line = refused(setup.run(), "mqtt: cannot read the MQTT password file", "larger than")
    assert "hunter2" not in line


def test_a_staged_default_voice_is_checked_through_current(setup: Setup) -> None:
    """models/<voice>/<version>/ with a ``current`` link: the version in service is checked."""
    voice = setup.models / VOICE
    staged = setup.models / "staged"
    shutil.move(voice, staged)
    voice.mkdir()
    shutil.move(staged, voice / "1.0.0")
    (voice / "current").symlink_to("1.0.0")
    result = setup.run("--explain")
    assert result.returncode == 0, result.stderr
    assert f"in {voice / '1.0.0'}: the " in result.stdout
    model = voice / "1.0.0" / f"{VOICE}.onnx"
    data = bytearray(model.read_bytes())
    data[-1] ^= 0xFF
    model.write_bytes(bytes(data))
    refused(setup.run(), "models.default_voice", "sha256")


def test_a_default_chime_that_is_not_there(setup: Setup) -> None:
    import wave

    chimes = setup.root / "chimes"
    chimes.mkdir()
    with wave.open(str(chimes / "ding.wav"), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(22050)
        wav.writeframes(b"\x01\x00" * 2205)
    setup.values["chimes"] = {"dir": str(chimes)}
    env = {"TTS_AGENT_CHIMES__BY_PRIORITY": json.dumps({"urgent": "alert"})}
    refused(setup.run(env=env), "chimes.by_priority: urgent: unknown chime 'alert' "
                                "(available: ding)")
    gate = setup.run("--gate", env=env)  # the agent starts: urgent requests play without it
    assert gate.returncode == 0, gate.stderr
    [line] = gate.stderr.splitlines()
    assert line.startswith("tts-agent check-config: warning: chimes.by_priority: urgent: ")
    assert setup.run(env={"TTS_AGENT_CHIMES__BY_PRIORITY": '{"urgent": "ding"}'}).returncode == 0
    setup.values["chimes"] = {"dir": str(setup.root / "missing")}
    refused(setup.run(), "chimes.dir", str(setup.root / "missing"))


def test_signatures_are_checked_as_the_load_checks_them_and_mqtt_is_said_unchecked(
        setup: Setup) -> None:
    """#28 item 4: a signed default voice whose model file changed after signing, and one
    signed by a key that is not trusted, are refused by check-config with the reason `say`
    refuses them with (the gate lets them through as warnings: the agent starts and reports
    them); ``--explain`` says the broker is not checked and what checks it."""
    from agent.voice.signature import generate_keypair, load_private_key, sign_bundle

    bundle = setup.models / VOICE
    keys = {}
    for name in ("trusted", "other"):
        generate_keypair(setup.root / name)
        keys[name] = load_private_key(setup.root / f"{name}.key")
    setup.set("models", "trusted_keys", [str(setup.root / "trusted.pub")])
    sign_bundle(bundle, keys["trusted"])
    assert setup.run().returncode == 0
    explained = setup.run("--explain")
    assert explained.returncode == 0, explained.stderr
    assert ("mqtt: not checked; `tts-agent send ping` checks it (the broker localhost:1883 is "
            "not contacted)") in explained.stdout

    model = bundle / f"{VOICE}.onnx"
    original = model.read_bytes()
    model.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))  # same size, other bytes
    line = refused(setup.run(), "models.default_voice", "sha256 does not match the manifest")
    said = say_error(setup)
    assert said.split(": error: ", 1)[1] in line, (said, line)
    assert "warning: models.default_voice" in setup.run("--gate").stderr

    model.write_bytes(original)
    sign_bundle(bundle, keys["other"])
    line = refused(setup.run(), "models.default_voice", "which is not in models.trusted_keys")
    said = say_error(setup)
    assert said.split(": error: ", 1)[1] in line, (said, line)


def say_error(setup: Setup) -> str:
    """The one error line of ``tts-agent say`` with the same settings (it loads the voice)."""
    base = {k: v for k, v in os.environ.items() if not k.upper().startswith("TTS_AGENT_")}
    result = agent_cli("say", "--config", setup.config, "Hello.", timeout=120, cwd=REPO,
                       env={**base, "ALSA_CONFIG_PATH": str(setup.alsa.path),
                            "PYTHONPATH": str(REPO)})
    assert result.returncode != 0, result.stdout
    return result.stderr.strip().splitlines()[-1]
