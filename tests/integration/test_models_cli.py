"""``tts-agent models`` as an operator runs it: import never destroys what is installed, only
Piper voices get in, verify loads what it checks, rollback goes back once. Real processes, the
tiny generated voice, onnxruntime; one test converts a flat voice under a running agent (real
Mosquitto, real alsa-lib into a file PCM) and checks it keeps speaking."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import wave
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent.daemon.service import AgentService
from agent.library.install import ImportRefused, import_voice
from agent.mqtt.topics import Namespace
from agent.voice.bundle import resolve_bundle_dir, verify_bundle
from tests.support import make_tiny_voice
from tests.support.broker import Broker, Recorder, agent_settings, running_agent
from tests.support.cli import agent_cli

VOICE = make_tiny_voice.VOICE
ONNX = f"{VOICE}.onnx"
DEV = Namespace("tts").device("t1")


def tts(*args: str, models: Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TTS_AGENT_")}
    env.update({"TTS_AGENT_MODELS__DIR": str(models), "TTS_AGENT_MODELS__DEFAULT_VOICE": VOICE,
                "TTS_AGENT_LOG__FORMAT": "json", "TTS_AGENT_LOG__LEVEL": "warning",
                "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    return agent_cli(*args, env=env, timeout=120, cwd=cwd)


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def tree(root: Path) -> dict[str, str]:
    """Every entry under ``root``: a file's sha256, a link's target, ``dir`` for a directory."""
    out = {}
    for path in sorted(root.rglob("*")):
        key = str(path.relative_to(root))
        if path.is_symlink():
            out[key] = "-> " + os.readlink(path)
        elif path.is_dir():
            out[key] = "dir"
        else:
            out[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def new_model(directory: Path, *, gain: float = 0.3, input_name: str = "input") -> Path:
    """A new tiny voice (other bytes than the installed one) as a Piper download: X.onnx and
    X.onnx.json side by side, no manifest."""
    directory.mkdir(parents=True, exist_ok=True)
    make_tiny_voice.build_model(directory / ONNX, gain=gain, input_name=input_name)
    make_tiny_voice.build_config(directory / f"{ONNX}.json")
    return directory / ONNX


@pytest.fixture()
def staged(tiny_voice_dir: Path, tmp_path: Path) -> Path:
    """models/tiny-test/ with versions 1.0.0 and 1.1.0, current -> 1.1.0, previous -> 1.0.0."""
    models = tmp_path / "staged"
    voice_dir = models / VOICE
    voice_dir.mkdir(parents=True)
    shutil.copytree(tiny_voice_dir, voice_dir / "1.0.0")
    make_tiny_voice.build_bundle(models, version="1.1.0", gain=0.4, bundle=voice_dir / "1.1.0")
    (voice_dir / "current").symlink_to("1.1.0")
    (voice_dir / "previous").symlink_to("1.0.0")
    return models


def test_import_into_a_staged_voice_adds_a_version_and_keeps_current(
        staged: Path, tmp_path: Path) -> None:
    before = tree(staged)
    result = tts("models", "import", str(new_model(tmp_path / "dl")), "--version", "1.2.0",
                 "--models-dir", str(staged), models=staged)
    assert result.returncode == 0, result.stderr
    voice_dir = staged / VOICE
    after = tree(staged)
    assert {k: v for k, v in after.items() if k in before} == before  # nothing lost or changed
    assert sorted(p.name for p in voice_dir.iterdir()) == [
        "1.0.0", "1.1.0", "1.2.0", "current", "previous"]
    assert os.readlink(voice_dir / "current") == "1.1.0"
    assert os.readlink(voice_dir / "previous") == "1.0.0"
    assert verify_bundle(voice_dir / "1.2.0").version == "1.2.0"
    assert json.loads(result.stdout)["dir"] == str(voice_dir / "1.2.0")


def test_import_with_activate_switches_current(staged: Path, tmp_path: Path) -> None:
    result = tts("models", "import", str(new_model(tmp_path / "dl")), "--version", "1.2.0",
                 "--activate", models=staged)
    assert result.returncode == 0, result.stderr
    assert os.readlink(staged / VOICE / "current") == "1.2.0"
    assert os.readlink(staged / VOICE / "previous") == "1.1.0"


def test_import_refuses_an_existing_version_unless_identical(
        staged: Path, tmp_path: Path) -> None:
    before = tree(staged)
    result = tts("models", "import", str(new_model(tmp_path / "dl")), "--version", "1.0.0",
                 models=staged)
    assert result.returncode == 2
    assert "1.0.0 is already installed" in one_error_line(result)
    assert tree(staged) == before
    # the same files again (a rerun of the same rollout) are fine and change nothing
    same = tmp_path / "same" / ONNX
    same.parent.mkdir()
    for name in (ONNX, f"{ONNX}.json"):
        shutil.copyfile(staged / VOICE / "1.0.0" / name, same.parent / name)
    result = tts("models", "import", str(same), "--version", "1.0.0", models=staged)
    assert result.returncode == 0, result.stderr
    assert tree(staged) == before


def test_import_over_a_flat_voice_keeps_it_as_a_version(
        tiny_voice_dir: Path, tmp_path: Path) -> None:
    models = tiny_voice_dir.parent
    old = {p.name: p.read_bytes() for p in tiny_voice_dir.iterdir()}
    result = tts("models", "import", str(new_model(tmp_path / "dl")), "--version", "2.0.0",
                 models=models)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in tiny_voice_dir.iterdir()) == ["1.0.0", "2.0.0", "current"]
    assert os.readlink(tiny_voice_dir / "current") == "1.0.0"  # not switched unless asked
    assert {p.name: p.read_bytes() for p in (tiny_voice_dir / "1.0.0").iterdir()} == old
    assert verify_bundle(resolve_bundle_dir(tiny_voice_dir)).version == "1.0.0"
    assert verify_bundle(tiny_voice_dir / "2.0.0").version == "2.0.0"
    assert sorted(p.name for p in models.iterdir()) == [VOICE]  # no staging left behind
    result = tts("models", "verify", models=models)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1.0.0 (current): ok" in result.stdout and "2.0.0: ok" in result.stdout


def test_import_voice_lays_out_a_flat_bundle_then_versions(
        tiny_voice_dir: Path, tmp_path: Path) -> None:
    """(Moved from test_bundle.py.) A fresh import is a flat bundle; importing again adds a
    version, which ``activate`` makes the live one."""
    models = tmp_path / "imported"
    bundle = import_voice(tiny_voice_dir / ONNX, models, version="2.0", source="test")
    assert bundle.dir == models / VOICE
    assert bundle.version == "2.0"
    assert verify_bundle(models / VOICE).sha256 == bundle.sha256
    import_voice(new_model(tmp_path / "dl"), models, version="2.1", source="test",
                 activate=True)
    assert verify_bundle(resolve_bundle_dir(models / VOICE)).version == "2.1"
    assert sorted(p.name for p in models.iterdir()) == [VOICE]
    with pytest.raises(ImportRefused, match="already installed"):
        import_voice(tiny_voice_dir / ONNX, models, version="2.1", source="test")


def wav_named_onnx(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    with wave.open(str(directory / ONNX), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(16000)
        wav.writeframes(b"\x01\x02" * 16000)
    make_tiny_voice.build_config(directory / f"{ONNX}.json")
    return directory / ONNX


@pytest.mark.parametrize(("make", "reason"), [
    (wav_named_onnx, "a WAV file, not an ONNX model"),
    (lambda d: new_model(d, input_name="text"), "not a Piper voice"),
], ids=["wav", "wrong-inputs"])
def test_import_refuses_what_is_not_a_piper_voice(
        staged: Path, tmp_path: Path, make: Callable[[Path], Path], reason: str) -> None:
    before = tree(staged)
    source = make(tmp_path / "dl")
    result = tts("models", "import", str(source), "--version", "9.0.0", models=staged)
    assert result.returncode == 2
    assert reason in one_error_line(result)
    assert tree(staged) == before


def test_import_refuses_a_config_that_is_not_piper(staged: Path, tmp_path: Path) -> None:
    source = new_model(tmp_path / "dl")
    (tmp_path / "dl" / f"{ONNX}.json").write_text('{"audio": {}}')
    result = tts("models", "import", str(source), "--version", "9.0.0", models=staged)
    assert result.returncode == 2
    assert "not a usable Piper voice config" in one_error_line(result)
    assert not (staged / VOICE / "9.0.0").exists()


def test_verify_loads_the_model_it_checks(tiny_voice_dir: Path, tmp_path: Path) -> None:
    """A WAV renamed .onnx with a manifest that matches it: sizes and sha256 agree, so only
    loading it shows that it is no voice."""
    from agent.voice.bundle import write_manifest

    wav_named_onnx(tmp_path / "dl")
    shutil.copyfile(tmp_path / "dl" / ONNX, tiny_voice_dir / ONNX)
    write_manifest(tiny_voice_dir, voice=VOICE, version="1.0.0",
                   sample_rate=make_tiny_voice.SAMPLE_RATE, variants={"fp32": ONNX},
                   config=f"{ONNX}.json", source="test")
    result = tts("models", "verify", models=tiny_voice_dir.parent)
    assert result.returncode == 2
    assert f"{VOICE}: FAILED:" in result.stdout
    assert "a WAV file, not an ONNX model" in result.stdout


def test_verify_checks_the_sample_rates_agree(tiny_voice_dir: Path) -> None:
    manifest = json.loads((tiny_voice_dir / "manifest.json").read_text())
    manifest["sample_rate"] = 22050
    (tiny_voice_dir / "manifest.json").write_text(json.dumps(manifest))
    result = tts("models", "verify", models=tiny_voice_dir.parent)
    assert result.returncode == 2
    assert "manifest says 22050 Hz" in result.stdout


def deep_json(bundle: Path, name: str) -> None:
    """#27: ``name`` becomes 2 KB of 1,000 nested ``[``; a voice config keeps a manifest entry
    that matches it (so only parsing it shows what it is)."""
    from agent.voice.bundle import write_manifest

    (bundle / name).write_bytes(b"[" * 1000 + b"]" * 1000)
    if name != "manifest.json":
        write_manifest(bundle, voice=VOICE, version="1.0.0",
                       sample_rate=make_tiny_voice.SAMPLE_RATE, variants={"fp32": ONNX},
                       config=name, source="test")


@pytest.mark.parametrize(("name", "reason"), [
    ("manifest.json", "unreadable manifest: nested too deeply: more than 200 levels"),
    (f"{ONNX}.json", "unreadable voice config: nested too deeply: more than 200 levels"),
])
def test_json_nested_1000_deep_is_a_reason_not_a_bug(tiny_voice_dir: Path, name: str,
                                                     reason: str) -> None:
    """``models verify`` (status 2, one line naming the file) and ``check-config`` (status 2;
    with ``--gate`` a warning, status 0) say what is wrong; before #27 a deep voice config
    ended ``models verify`` with "unexpected RecursionError ... (a bug)", status 1, and passed
    ``check-config``, which did not parse it."""
    deep_json(tiny_voice_dir, name)
    models = tiny_voice_dir.parent
    verify = tts("models", "verify", models=models)
    assert verify.returncode == 2, verify.stdout + verify.stderr
    assert verify.stdout.splitlines() == [verify.stdout.strip()], verify.stdout
    assert verify.stdout.startswith(f"{VOICE}: FAILED: {tiny_voice_dir / name}: {reason}")
    assert "a bug" not in verify.stderr and "Recursion" not in verify.stdout + verify.stderr
    gate = tts("check-config", "--gate", models=models)  # it parses the config as the agent does
    assert gate.returncode == 0, gate.stderr
    assert reason in one_error_line(gate) and "the agent starts and reports it" in gate.stderr
    strict = tts("check-config", models=models)
    assert strict.returncode == 2 and reason in one_error_line(strict)


def test_verify_deep_runs_the_warm_up(tiny_voice_dir: Path) -> None:
    result = tts("models", "verify", "--deep", models=tiny_voice_dir.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith(f"{VOICE}: ok (")
    assert len(result.stdout.splitlines()) == 1


def test_verify_without_voices_says_so(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = tts("models", "verify", models=Path("empty"), cwd=tmp_path)
    assert result.returncode != 0
    assert f"no voices installed in {tmp_path / 'empty'}" in one_error_line(result)


def test_rollback_goes_back_once(staged: Path) -> None:
    voice_dir = staged / VOICE
    result = tts("models", "rollback", VOICE, models=staged)
    assert result.returncode == 0, result.stderr
    assert os.readlink(voice_dir / "current") == "1.0.0"
    assert not (voice_dir / "previous").is_symlink()
    again = tts("models", "rollback", VOICE, models=staged)
    assert again.returncode == 2
    assert "no previous version" in one_error_line(again)
    assert os.readlink(voice_dir / "current") == "1.0.0"  # not forward again
    # going forward is an explicit activate
    result = tts("models", "activate", VOICE, "1.1.0", models=staged)
    assert result.returncode == 0, result.stderr
    assert os.readlink(voice_dir / "current") == "1.1.0"
    assert os.readlink(voice_dir / "previous") == "1.0.0"


def test_activate_of_a_rejected_version_is_one_line(staged: Path) -> None:
    """A staged version that fails its warm-up: exit 2, the reason as the only line on stderr
    (no ``model_rejected`` log line before it), the result as JSON on stdout, current kept."""
    make_tiny_voice.build_bundle(staged, version="1.2.0", gain=0.0,
                                 bundle=staged / VOICE / "1.2.0")
    result = tts("models", "activate", VOICE, "1.2.0", models=staged)
    assert result.returncode == 2
    line = one_error_line(result)
    assert line.startswith("tts-agent models: error: tiny-test 1.2.0: rejected: ")
    assert "silence" in line
    assert json.loads(result.stdout)["outcome"] == "rejected"
    assert os.readlink(staged / VOICE / "current") == "1.1.0"


def test_voices_lists_every_staged_version_and_marks_current(staged: Path) -> None:
    listed = tts("voices", models=staged)
    assert (listed.returncode, listed.stderr) == (0, "")
    assert listed.stdout.splitlines() == [
        f"{VOICE}  1.1.0  16000 Hz  fp32 (current, default)",
        f"{VOICE}  1.0.0  16000 Hz  fp32 (staged)"]
    rows = json.loads(tts("voices", "--json", models=staged).stdout)
    assert [(r["version"], r["current"], r["staged"]) for r in rows] == [
        ("1.1.0", True, True), ("1.0.0", False, True)]
    assert tts("models", "rollback", VOICE, models=staged).returncode == 0
    after = tts("voices", models=staged).stdout.splitlines()
    assert after[0] == f"{VOICE}  1.0.0  16000 Hz  fp32 (current, default)"
    assert after[1:] == [f"{VOICE}  1.1.0  16000 Hz  fp32 (staged)"]


def test_rollback_of_an_unknown_voice(staged: Path) -> None:
    result = tts("models", "rollback", "nope", models=staged)
    assert result.returncode == 2
    assert "no such voice 'nope'" in one_error_line(result)


# -- under a running agent ----------------------------------------------------------------


Watched = tuple[AgentService, Recorder]


@pytest.fixture()
def watched_agent(tiny_voice_dir: Path, tmp_path: Path, mqtt_broker: Broker) -> Iterator[Watched]:
    """An agent serving the flat tiny voice with the model watcher on."""
    settings = agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent")
    settings = settings.model_copy(update={"models": settings.models.model_copy(
        update={"watch": True, "debounce_s": 0.3})})
    with Recorder(mqtt_broker.settings(), [DEV.events.as_filter(), DEV.status.as_filter()],
                  "controller") as controller, running_agent(settings) as service:
        controller.wait_json(DEV.status, lambda p: p["state"] == "online")
        controller.wait_json(DEV.events, lambda e: e["event"] == "model_loaded")
        yield service, controller


@pytest.mark.broker
@pytest.mark.alsa
def test_a_running_agent_keeps_speaking_while_a_flat_voice_becomes_staged(
        tiny_voice_dir: Path, tmp_path: Path, watched_agent: Watched) -> None:
    service, controller = watched_agent
    models = tiny_voice_dir.parent
    sent: list[str] = []

    def speak(n: int) -> None:
        for _ in range(n):
            sent.append(f"r{len(sent)}")
            controller.publish(DEV.command("speak"), {"id": sent[-1], "text": "Attention please."})

    speak(3)
    result = tts("models", "import", str(new_model(tmp_path / "dl")), "--version", "2.0.0",
                 models=models)
    assert result.returncode == 0, result.stderr
    speak(3)
    result = tts("models", "activate", VOICE, "2.0.0", models=models)
    assert result.returncode == 0, result.stderr
    controller.wait_json(DEV.events, lambda e: e["event"] == "model_loaded"
                         and e["version"] == "2.0.0", timeout=60)
    speak(2)
    finals = {}
    for request_id in sent:
        final = controller.wait_json(
            DEV.events, lambda e, r=request_id: e.get("id") == r and e["final"], timeout=60)
        finals[request_id] = final["event"]
    assert set(finals.values()) == {"finished"}
    rejected = [e for e in controller.json_on(DEV.events) if e["event"] == "model_rejected"]
    assert rejected == []
    assert service.voices.get().version == "2.0.0"


def test_activate_on_a_flat_voice_names_its_one_version(tiny_voice_dir: Path) -> None:
    result = tts("models", "activate", VOICE, "3.0.0", models=tiny_voice_dir.parent)
    assert result.returncode == 2
    assert "has no version '3.0.0' (has: 1.0.0" in one_error_line(result)


def test_import_refuses_oversize_and_non_regular_files_before_reading(
        staged: Path, tmp_path: Path) -> None:
    from agent.library.piper_check import DEFAULT_MAX_MODEL_BYTES

    before = tree(staged)
    big = new_model(tmp_path / "big")
    os.truncate(big, DEFAULT_MAX_MODEL_BYTES + 1)  # sparse: nothing is written
    result = tts("models", "import", str(big), "--version", "9.0.0", models=staged)
    assert result.returncode == 2
    assert "larger than" in one_error_line(result)
    fifo = tmp_path / "fifo" / ONNX
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    make_tiny_voice.build_config(fifo.parent / f"{ONNX}.json")
    result = tts("models", "import", str(fifo), "--version", "9.0.0", models=staged)
    assert result.returncode == 2
    assert f"not a file: {fifo}" in one_error_line(result)
    assert tree(staged) == before


def test_a_conversion_cut_short_is_finished_by_the_next_import(
        tiny_voice_dir: Path, tmp_path: Path) -> None:
    """A conversion killed after ``current`` was made, before the top-level copies went: the
    voice is staged and serves 1.0.0; the next import removes the leftovers, nothing else."""
    version_dir = tiny_voice_dir / "1.0.0"
    version_dir.mkdir()
    for path in list(tiny_voice_dir.iterdir()):
        if path.is_file():
            os.link(path, version_dir / path.name)
    (tiny_voice_dir / "current").symlink_to("1.0.0")
    import_voice(new_model(tmp_path / "dl"), tiny_voice_dir.parent, version="2.0.0",
                 source="test")
    assert sorted(p.name for p in tiny_voice_dir.iterdir()) == ["1.0.0", "2.0.0", "current"]
    assert verify_bundle(resolve_bundle_dir(tiny_voice_dir)).version == "1.0.0"


def test_import_with_activate_of_a_version_that_fails_its_warm_up(
        staged: Path, tmp_path: Path) -> None:
    """A Piper-shaped model that speaks silence passes the import's check and is imported,
    but activating it is rejected: ``current`` stays, exit 2 with the reason."""
    result = tts("models", "import", str(new_model(tmp_path / "dl", gain=0.0)), "--version",
                 "1.2.0", "--activate", models=staged)
    assert result.returncode == 2
    assert "1.2.0: imported but rejected" in one_error_line(result)  # no log line before it
    assert "silence" in one_error_line(result)
    assert os.readlink(staged / VOICE / "current") == "1.1.0"
    assert os.readlink(staged / VOICE / "previous") == "1.0.0"
    assert verify_bundle(staged / VOICE / "1.2.0").version == "1.2.0"


def test_import_follows_the_size_setting(staged: Path, tmp_path: Path) -> None:
    source = new_model(tmp_path / "dl")
    os.truncate(source, (2 << 20))  # sparse
    env_bound = {"TTS_AGENT_MODELS__MAX_MODEL_BYTES": str(1 << 20)}
    result = agent_cli(
        "models", "import", source, "--version", "9.0.0", timeout=120,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("TTS_AGENT_")},
             "TTS_AGENT_MODELS__DIR": str(staged), **env_bound})
    assert result.returncode == 2
    assert f"larger than the {1 << 20} bytes allowed" in one_error_line(result)
    assert not (staged / VOICE / "9.0.0").exists()
