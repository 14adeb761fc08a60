"""Start-up weight, without timing anything: a one-shot ``synth`` of plain text (a fresh
``python -m agent`` process with the tiny voice) imports neither the SSML parser, nor
num2words for a text without numbers, nor the other commands' modules (``send``, ``models``,
``fleet``), nothing of MQTT, and not onnx (a heavy import: the tiny voice's graph
is not split, which its bytes tell); markup and a number bring theirs in.
``bench/import_weight.py`` measures what this locks in."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import agent

CODE = Path(agent.__file__).resolve().parent.parent
"""The code under test (the directory holding the ``agent`` package this test imports)."""
SCRIPT = ("import json, sys\nfrom agent.cli import main\nstatus = main(sys.argv[1:])\n"
          "print(json.dumps({'status': status, 'modules': sorted(sys.modules)}))\n")
"""``tts-agent ARGS`` as the console script runs it, then the modules it imported."""
HEAVY = ("agent.text.ssml", "agent.text.ssml_tree", "agent.text.normalize.say_as", "defusedxml",
         "num2words", "agent.commands.send", "agent.commands.send_account",
         "agent.commands.models", "agent.commands.models_sign", "agent.commands.fleet",
         "agent.commands.tune", "agent.mqtt", "paho",
         "onnx")  # a graph that is not Piper's is not split: known without parsing it


def synth_modules(models: Path, out: Path, text: str) -> set[str]:
    env = {**os.environ, "TTS_AGENT_MODELS__DIR": str(models),
           "TTS_AGENT_MODELS__DEFAULT_VOICE": "tiny-test", "PYTHONPATH": str(CODE)}
    done = subprocess.run([sys.executable, "-c", SCRIPT, "synth", "--text", text, "--out",
                           str(out)], capture_output=True, text=True, env=env, timeout=120,
                          check=False, cwd=out.parent)  # not the checkout: "" leads sys.path
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["status"] == 0, done.stderr
    assert out.stat().st_size > 44  # a WAV with audio: the synthesis did run
    return set(report["modules"])


def test_plain_synth_imports_only_what_it_uses(tiny_voice_dir: Path, tmp_path: Path) -> None:
    plain = synth_modules(tiny_voice_dir.parent, tmp_path / "plain.wav",
                          "Please stand clear of the closing doors.")
    assert {"agent.commands.synth", "agent.voice.voice", "agent.text.normalize"} <= plain
    loaded = sorted(m for m in plain if m.split(".")[0] in HEAVY or any(
        m == h or m.startswith(h + ".") for h in HEAVY))
    assert loaded == []

    marked = synth_modules(tiny_voice_dir.parent, tmp_path / "ssml.wav",
                           "<speak>Gate <break time='200ms'/> 12 is open.</speak>")
    assert {"agent.text.ssml", "defusedxml", "num2words"} <= marked
    assert not any(m.startswith(("agent.commands.send", "agent.mqtt")) for m in marked)


def test_the_daemon_claims_its_state_before_it_imports_the_journal() -> None:
    """``run`` claims the device's state and then starts loading the default voice; what it
    imports until then delays that load, so the claim brings in no journal or MQTT protocol."""
    code = ("import json, sys\nimport agent.daemon.state, agent.library.voices, "
            "agent.mqtt.credentials\nprint(json.dumps(sorted(sys.modules)))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(CODE)}, timeout=60, check=True)
    modules = set(json.loads(done.stdout))
    assert "agent.daemon.state" in modules
    assert not modules & {"agent.mqtt.journal", "agent.mqtt.protocol", "agent.mqtt.client",
                          "paho", "agent.pipeline.worker"}
