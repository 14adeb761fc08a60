"""The command line's contract, for every sub-command as a user runs it (one process per case).

* ``--help`` exits 0 for every sub-command (and every ``models`` action and ``send`` command);
* one bad input each exits with the status of the table in :mod:`agent.commands` (docs/cli.md)
  and writes exactly one line on stderr, ``tts-agent COMMAND: error: ...``;
* a success writes nothing on stderr without ``-v`` (logs are warnings and errors only), and
  ``-v`` brings the log lines back;
* alsa-lib's own ``ALSA lib ...`` lines go through our logger; colour only on a terminal and
  never with ``NO_COLOR``.

The sub-commands are found in the parser itself, so a new one without a case here fails.
The tiny generated voice stands in wherever a voice is needed; nothing reaches a broker (every
``send`` case is refused before it connects, and the port given is closed).
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import re
import select
import socket
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from agent.cli import build_parser
from agent.commands import EXIT_CODES, NO_ANSWER, OK, USAGE
from tests.support import REPO
from tests.support.alsa_sink import AlsaConfig
from tests.support.cli import AGENT, agent_cli

if TYPE_CHECKING:
    from tests.support.broker import Broker

pytestmark = pytest.mark.alsa


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture()
def env(tiny_models_dir: Path, tmp_path: Path) -> dict[str, str]:
    """Settings for the tiny voice, files under tmp_path, no settings file, no broker."""
    from tests.support.host import TINY_VOICE_ENV  # a quiet stderr on any CPU

    keep = {k: v for k, v in os.environ.items()
            if not k.startswith("TTS_AGENT_") and k not in ("NO_COLOR", "ALSA_CONFIG_PATH")}
    return {**keep, "TTS_AGENT_MODELS__DIR": str(tiny_models_dir),
            "TTS_AGENT_MODELS__DEFAULT_VOICE": "tiny-test",
            "TTS_AGENT_CACHE__DIR": str(tmp_path / "cache"),
            "TTS_AGENT_AUDIO__DEVICE": f"file:'{tmp_path}/out.wav',wav",
            "TTS_AGENT_MQTT__HOST": "127.0.0.1", "TTS_AGENT_MQTT__PORT": str(_closed_port()),
            **TINY_VOICE_ENV}


def tts(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return agent_cli(*args, env=env, cwd=cwd, timeout=300)


def sub_commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[str]:
    """Every command path of the parser: ``synth``, ``models verify``, ``send ping``, ..."""
    found: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.append(" ".join((*path, name)))
                found += sub_commands(sub, (*path, name))
    return found


SEND = ["send", "--device", "kiosk-1"]
BAD_INPUT: dict[str, tuple[list[str], int, str]] = {
    # command path: (arguments, exit status, what the one line says)
    "run": (["run", "--config", "missing.toml"], USAGE, "config file not found"),
    "say": (["say", "--volume", "2", "Hello."], USAGE, "--volume must be between 0 and 1"),
    "synth": (["synth", "--text", "Hi.", "--out", "o.wav", "--length-scale", "0"], USAGE,
              "--length-scale must be between 0.1 and 10"),
    "voices": (["voices", "--jsn"], USAGE, "unrecognized arguments: --jsn"),
    "phonemize": (["phonemize", "--text", "Hi.", "--voice", "nope"], USAGE,
                  "no voice named 'nope'"),
    "send": ([*SEND[:1], "ping"], USAGE, "one of the arguments --device --group --all"),
    "send speak": ([*SEND, "speak", ""], USAGE, "invalid speak command"),
    "send stop": ([*SEND, "stop", "--clear", "now"], USAGE, "unrecognized arguments: now"),
    "send volume": ([*SEND, "volume", "5"], USAGE, "invalid volume command"),
    "send reload": ([*SEND, "reload", "--timeout", "0"], USAGE, "--timeout must be"),
    "send ping": ([*SEND, "ping", "--timeout", "-1"], USAGE, "--timeout must be"),
    "fleet": (["fleet", "--settle", "0"], USAGE, "--settle must be more than 0"),
    "ha-discovery": (["ha-discovery", "--config", "missing.toml"], USAGE,
                     "config file not found"),
    "models": (["models", "frob"], USAGE, "invalid choice: 'frob'"),
    "models import": (["models", "import", "missing.onnx"], USAGE, "not a file"),
    "models verify": (["models", "verify", "--models-dir", "empty"], USAGE,
                      "no voices installed in"),
    "models activate": (["models", "activate", "nope", "1.0.0"], USAGE, "no such voice 'nope'"),
    "models rollback": (["models", "rollback", "nope"], USAGE, "no such voice 'nope'"),
    "models keygen": (["models", "keygen"], USAGE, "required: prefix"),
    "models sign": (["models", "sign", "bundle", "--key", "missing.key"], USAGE,
                    "private key file not found"),
    "quantize": (["quantize", "missing.onnx", "out"], USAGE, "missing.onnx: no such file"),
    "profile": (["profile", "--sysroot", "missing"], USAGE, "--sysroot is not a directory"),
    "tune": (["tune", "--text", ""], USAGE, "--text is empty"),
    "check-config": (["check-config", "--config", "missing.toml"], USAGE,
                     "config file not found"),
    "prepare": (["prepare", "--voice", "nope"], USAGE, "no voice named 'nope'"),
}
MORE_BAD_INPUT = [  # the issue's own examples (#19 item 12)
    (["synth", "--text", "Hi.", "--out", "o.wav", "--length-scale", "abc"], USAGE,
     "argument --length-scale: invalid float value: 'abc' (see tts-agent synth --help)"),
    (["synth", "--text", "Hi.", "--out", "o.wav", "--speaker", "3"], USAGE,
     "--speaker 3: voice tiny-test has a single speaker"),
    (["say", "--speaker", "3", "Hello."], USAGE, "--speaker 3: voice tiny-test has a single"),
    (["synth", "--text", "  ", "--out", "o.wav"], USAGE, "text is empty"),
    (["synth", "--text", "Hi.", "--out", "o.wav", "--length-scale", "nan"], USAGE,
     "--length-scale must be between"),
    (["--bogus", "voices"], USAGE, "unrecognized arguments: --bogus"),
    ([], USAGE, "the following arguments are required: COMMAND"),
    # a mistyped option or command: argparse's "did you mean" (#28 item 14), the same for all
    ([*SEND, "speak", "Hi.", "--prioriti", "high"], USAGE, "unrecognized arguments: --prioriti "
     "high; did you mean --priority? (see tts-agent send speak --help)"),
    (["say", "--voise", "tiny-test", "Hi."], USAGE, "did you mean --voice? (see tts-agent say"),
    (["sya", "Hi."], USAGE, "invalid choice: 'sya' (choose from 'check-config', "),
    (["sya", "Hi."], USAGE, "; did you mean say? (see tts-agent --help)"),
]


def test_every_sub_command_has_a_bad_input_case() -> None:
    assert sorted(sub_commands(build_parser())) == sorted(BAD_INPUT)


@pytest.mark.parametrize("command", sorted(BAD_INPUT))
def test_help_exits_0(command: str, env: dict[str, str], tmp_path: Path) -> None:
    path = command.split()
    if path[0] == "send" and len(path) > 1:  # send's options come before its command
        path = [*SEND, *path[1:]]
    result = tts(*path, "--help", env=env, cwd=tmp_path)
    assert (result.returncode, result.stderr) == (OK, "")
    assert result.stdout.startswith("usage: tts-agent")


@pytest.mark.parametrize(("args", "status", "says"),
                         [*BAD_INPUT.values(), *MORE_BAD_INPUT],
                         ids=[*sorted(BAD_INPUT), *(" ".join(c[0]) or "nothing"
                                                    for c in MORE_BAD_INPUT)])
def test_bad_input_is_one_line_and_the_status_of_the_table(
    args: list[str], status: int, says: str, env: dict[str, str], tmp_path: Path,
) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "bundle").mkdir()
    result = tts(*args, env=env, cwd=tmp_path)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert re.match(r"tts-agent( [a-z-]+)*: error: ", lines[0]), lines[0]
    assert says in lines[0]
    assert result.returncode == status, result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("args", [
    ["synth", "--text", "Hello there. A second sentence.", "--out", "o.wav"],
    ["phonemize", "--text", "Hello there."],
    ["phonemize", "--text", "Hello there.", "--json"],
    ["check-config"],
    ["voices"],
    ["models", "verify"],
    ["say", "Hello there."],
    ["prepare"],
    ["profile"],
], ids=lambda a: " ".join(a[:2]))
def test_a_success_writes_nothing_on_stderr(args: list[str], env: dict[str, str],
                                            tmp_path: Path) -> None:
    result = tts(*args, env=env, cwd=tmp_path)
    assert (result.returncode, result.stderr) == (OK, "")
    assert result.stdout


def test_phonemize_json_is_json_and_the_default_is_lines(env: dict[str, str],
                                                         tmp_path: Path) -> None:
    text = "Hello there. Bye."
    plain = tts("phonemize", "--text", text, env=env, cwd=tmp_path)
    data = json.loads(tts("phonemize", "--text", text, "--json", env=env, cwd=tmp_path).stdout)
    assert [s["text"] for s in data["sentences"]] == ["Hello there.", "Bye."]
    lines = plain.stdout.splitlines()
    assert lines[0::3] == ["Hello there.", "Bye."]
    assert lines[1] == f"  phonemes  {data['sentences'][0]['phonemes']}"
    assert lines[2] == f"  ids       {' '.join(map(str, data['sentences'][0]['ids']))}"


def test_verbose_brings_the_log_back(env: dict[str, str], tmp_path: Path) -> None:
    result = tts("synth", "-v", "--text", "Hello.", "--out", "o.wav", env=env, cwd=tmp_path)
    assert result.returncode == OK, result.stderr
    events = [json.loads(line)["event"] for line in result.stderr.splitlines()]
    assert "voice_loaded" in events
    assert all(json.loads(line)["level"] != "debug" for line in result.stderr.splitlines())
    debug = tts("-vv", "synth", "--text", "Hello.", "--out", "o.wav", env=env, cwd=tmp_path)
    assert debug.returncode == OK, debug.stderr
    assert "voice_loaded" in debug.stderr


def test_say_without_a_sound_card_is_one_line_with_what_to_try(
    env: dict[str, str], tmp_path: Path, alsa: AlsaConfig,
) -> None:
    # An ALSA configuration with no PCM at all: "default" is unknown, as on a machine with no
    # card; alsa-lib prints "ALSA lib pcm.c:...(snd_pcm_open_noupdate) Unknown PCM default".
    env = {**env, "ALSA_CONFIG_PATH": str(alsa.path), "TTS_AGENT_AUDIO__DEVICE": "default"}
    result = tts("say", "Anyone there?", env=env, cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [result.stderr.strip()], result.stderr
    line = result.stderr.strip()
    assert line.startswith("tts-agent say: error: playback failed on 'default': ")
    assert "--device \"file:'/tmp/x.wav',wav\"" in line and "aplay -L" in line
    # With -v the log is back, alsa-lib's own lines among it, as log lines of ours.
    verbose = tts("say", "-v", "Anyone there?", env=env, cwd=tmp_path)
    assert verbose.returncode == 1
    assert not [s for s in verbose.stderr.splitlines() if s.startswith("ALSA lib")]
    logged = [json.loads(s) for s in verbose.stderr.splitlines()[:-1]]
    alsa_lines = [e for e in logged if e["event"] == "alsa_lib"]
    assert alsa_lines and all(e["level"] == "info" for e in alsa_lines)
    assert any(e["function"] == "snd_pcm_open_noupdate" and "Unknown PCM" in e["message"]
               for e in alsa_lines)


def test_a_daemon_keeps_its_configured_level(env: dict[str, str], tmp_path: Path) -> None:
    # run logs at log.level (info by default), a command at warning: the daemon's start is in
    # its log (here it then retries a broker that is not there, until SIGTERM).
    process = subprocess.Popen([*AGENT, "run"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=tmp_path,
                               env={**env, "TTS_AGENT_DEVICE_ID": "cli-test",
                                    "TTS_AGENT_LOG__FORMAT": "json"})
    assert process.stderr is not None
    levels: set[str] = set()
    buffer = b""
    deadline = time.monotonic() + 120
    try:
        while "info" not in levels and time.monotonic() < deadline and process.poll() is None:
            ready, _, _ = select.select([process.stderr], [], [], 1.0)
            if ready:
                buffer += os.read(process.stderr.fileno(), 65536)
                *lines, rest = buffer.split(b"\n")
                buffer = rest
                levels |= {json.loads(line)["level"] for line in lines if line.strip()}
    finally:
        process.terminate()
        process.wait(120)
        process.stderr.close()
    assert "info" in levels


def _stderr_on_a_terminal(argv: list[str], env: dict[str, str], cwd: Path) -> str:
    """Run with stderr on a pseudo-terminal (stdout a pipe); what it wrote there."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen(argv, stdout=subprocess.PIPE,
                               stderr=terminal, stdin=subprocess.DEVNULL, env=env, cwd=cwd)
    os.close(terminal)
    chunks: list[bytes] = []
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        ready, _, _ = select.select([controller], [], [], 1.0)
        if not ready:
            if process.poll() is not None:
                break
            continue
        try:
            data = os.read(controller, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    assert process.wait(60) == OK
    assert process.stdout is not None
    process.stdout.close()
    os.close(controller)
    return b"".join(chunks).decode("utf-8", "replace")


def test_colour_only_on_a_terminal_and_never_with_no_color(env: dict[str, str],
                                                           tmp_path: Path) -> None:
    args = ["synth", "-v", "--text", "Hello.", "--out", "o.wav"]
    argv = [*AGENT, *args]
    console = {**env, "TTS_AGENT_LOG__FORMAT": "console"}
    coloured = _stderr_on_a_terminal(argv, console, tmp_path)
    assert "voice_loaded" in coloured and "\x1b[" in coloured  # a terminal: colour
    plain = _stderr_on_a_terminal(argv, {**console, "NO_COLOR": "1"}, tmp_path)
    assert "voice_loaded" in plain and "\x1b[" not in plain
    piped = tts(*args, env=console, cwd=tmp_path)  # not a terminal: no colour either
    assert "voice_loaded" in piped.stderr and "\x1b[" not in piped.stderr


def test_build_sh_says_its_steps_in_colour_only_on_a_terminal(env: dict[str, str],
                                                              tmp_path: Path) -> None:
    say = ['bash', '-c', f'eval "$(sed -n \'/^say() {{/,/^}}/p\' {REPO / "build.sh"})"; say step']
    assert _stderr_on_a_terminal(say, env, tmp_path).strip() == "\x1b[1m==> step\x1b[0m"
    assert _stderr_on_a_terminal(say, {**env, "NO_COLOR": "1"}, tmp_path).strip() == "==> step"
    piped = subprocess.run(say, capture_output=True, text=True, env=env, timeout=60, check=True)
    assert piped.stderr == "==> step\n"


def test_quantize_writes_no_log_between_build_sh_steps(env: dict[str, str],
                                                       tmp_path: Path) -> None:
    # ./build.sh int8 runs `tts-agent quantize ... >/dev/null`: its stderr is the terminal's.
    from tests.support import quant_voice
    from tests.unit.test_quantize import CALIBRATION, HELDOUT

    bundle = quant_voice.build_bundle(tmp_path / "models")
    (tmp_path / "cal.txt").write_text("\n".join(CALIBRATION) + "\n", encoding="utf-8")
    (tmp_path / "held.txt").write_text("\n".join(HELDOUT) + "\n", encoding="utf-8")
    result = tts("quantize", str(bundle / f"{quant_voice.VOICE}.onnx"), str(tmp_path / "out"),
                 "--calibration", "cal.txt", "--heldout", "held.txt", env=env, cwd=tmp_path)
    assert (result.returncode, result.stderr) == (OK, "")
    assert json.loads(result.stdout)["variants"].keys() == {"fp32", "int8"}


def test_the_exit_codes_are_the_documented_table() -> None:
    page = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    section = page.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    documented = {int(m[1]) for m in re.finditer(r"^\| (\d+) \|", section, re.MULTILINE)}
    assert documented == set(EXIT_CODES)
    assert NO_ANSWER == 3


@pytest.mark.broker
def test_send_succeeds_with_nothing_on_stderr(env: dict[str, str], tmp_path: Path,
                                              mqtt_broker: Broker) -> None:
    result = tts("send", "-h", mqtt_broker.host, "-p", str(mqtt_broker.port),
                 "--device", "kiosk-1", "ping", env=env, cwd=tmp_path)
    assert (result.returncode, result.stderr) == (OK, "")
    assert json.loads(result.stdout)["topic"].endswith("kiosk-1/cmd/ping")
