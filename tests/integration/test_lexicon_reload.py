"""The device lexicon in the running agent (real Mosquitto, real alsa-lib into a file PCM, the tiny
voice): what a speak says follows the lexicon file while the agent runs, with the phrase cache on
(a repeat plays the very bytes again through its exact-request index, across a restart too,
never the audio of another lexicon); a half-written or broken file never replaces the lexicon in
service; a bad file at start leaves the agent speaking without one; SIGHUP's reload and the
``reload`` command read it again; ``tts-agent check-config`` checks it."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.daemon.service import AgentService
from agent.mqtt.topics import Namespace
from agent.settings import Settings, TextSettings
from agent.text.frontend import Frontend
from tests.integration.test_check_config import Setup, refused
from tests.support.alsa_sink import AlsaConfig
from tests.support.broker import Broker, Recorder, agent_settings, running_agent
from tests.support.cli import agent_cli

pytestmark = [pytest.mark.broker, pytest.mark.alsa]

DEV = Namespace("tts").device("t1")
SENTENCE = "Please welcome Nguyen to Worcester."
V1 = 'version = 1\n\n[words]\n"Nguyen" = "win"\n'
V2 = 'version = 1\n\n[words]\n"Nguyen" = "nuh win"\n"Worcester" = { ipa = "wˈɔːɹsɛstɚ" }\n'
V3 = 'version = 1\n\n[words]\n"Nguyen" = "noo yen"\n"Worcester" = "wooster"\n'


def lexicon_settings(broker: Broker, models_dir: Path, work: Path, lexicon: Path, *,
                     watch: bool = True) -> Settings:
    settings = agent_settings(broker, models_dir, work)
    return settings.model_copy(update={
        "models": settings.models.model_copy(update={"watch": watch, "debounce_s": 0.2}),
        "text": TextSettings(lexicon=lexicon),
    })


def write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def wait_until(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Poll ``check`` (a state the agent reaches on its own threads) with a deadline."""
    pause = threading.Event()
    for _ in range(int(timeout / 0.05)):
        if check():
            return
        pause.wait(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def lexicon_section(service: AgentService) -> dict[str, Any]:
    section = service.health.snapshot()["lexicon"]  # type: ignore[typeddict-item]
    assert isinstance(section, dict)
    return section


def phonemes(service: AgentService, text: str) -> str:
    """What the default voice's frontend makes of ``text`` now (the lexicon in service)."""
    return "".join("".join(s.phonemes) for s in service.voices.get(None).sentences(text))


def plain_phonemes(service: AgentService, text: str) -> str:
    """What ``text`` is without any lexicon (a frontend of the same voice without one)."""
    voice = service.voices.get(None)
    frontend = Frontend(voice.config.espeak_voice, voice.config.phoneme_id_map)
    return "".join("".join(s.phonemes) for s in frontend.sentences(text))


@pytest.fixture()
def controller(mqtt_broker: Broker) -> Iterator[Recorder]:
    with Recorder(mqtt_broker.settings(), [DEV.events.as_filter(), DEV.status.as_filter()],
                  "controller") as recorder:
        yield recorder


def speak(controller: Recorder, request_id: str, text: str = SENTENCE) -> dict[str, Any]:
    controller.publish(DEV.command("speak"), {"id": request_id, "text": text})
    final = controller.wait_json(DEV.events, lambda e: e["id"] == request_id and e["final"], 60)
    assert final["event"] == "finished", final
    return final


def played(service: AgentService) -> bytes:
    """What the last speak played: the file PCM's bytes once the player has closed the device
    (the file plugin starts the file again each time the device is opened)."""
    wait_until(lambda: service.health.snapshot()["audio"]["device"] is None,
               "the player to close the device")
    out = service.settings.audio.device
    assert out is not None
    return Path(out.split("'")[1]).read_bytes()


def test_a_rewritten_lexicon_changes_what_the_next_speak_says(
        mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path, controller: Recorder) -> None:
    lexicon = tmp_path / "lexicon.toml"
    lexicon.write_text(V1, encoding="utf-8")
    settings = lexicon_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent", lexicon)
    with running_agent(settings) as service:
        controller.wait_json(DEV.status, lambda p: p["state"] == "online")
        cache = service.phrase_cache
        assert cache is not None
        assert lexicon_section(service)["entries"] == 1
        assert phonemes(service, SENTENCE) == plain_phonemes(service,
                                                             "Please welcome win to Worcester.")
        first = speak(controller, "v1-a")
        audio_v1 = played(service)
        speak(controller, "v1-b")
        assert cache.stats()["hits"] == 1  # the same text and lexicon: played from the cache
        assert cache.stats()["exact_hits"] == 1  # found as it came: not phonemized again
        assert played(service) == audio_v1  # the very same bytes
        misses = cache.stats()["misses"]
        sha_v1 = lexicon_section(service)["sha256"]

        write_atomically(lexicon, V2)  # renamed over it, as an updater writes it
        wait_until(lambda: lexicon_section(service)["sha256"] != sha_v1, "the new lexicon")
        now = phonemes(service, SENTENCE)
        # the words before the IPA as inside the sentence ("to" tə, not the end-of-text tuː)
        assert now.startswith(plain_phonemes(service, "Please welcome nuh win to Worcester.")
                              .rsplit(" ", 1)[0] + " ")
        assert "wˈɔːɹsɛstɚ" in now and "wˈɔːɹsɛstɚ" not in plain_phonemes(service, SENTENCE)
        second = speak(controller, "v2-a")
        assert cache.stats()["misses"] == misses + 1  # not the cached audio of the old lexicon
        assert cache.stats()["hits"] == 1
        assert second["audio_s"] != first["audio_s"] and played(service) != audio_v1
        assert cache.stats()["entries"] == 2  # the new audio is an entry of its own

        # Half copied in place: refused, the lexicon in service stays; completed: loaded.
        sha_v2 = lexicon_section(service)["sha256"]
        with lexicon.open("w", encoding="utf-8") as handle:
            handle.write(V3[: V3.index("yen") + 1])
            handle.flush()
            wait_until(lambda: lexicon_section(service)["state"] == "degraded",
                       "the half-written file to be refused")
            section = lexicon_section(service)
            assert section["sha256"] == sha_v2 and "not valid TOML" in section["reason"]
            assert "lexicon not ok" in service.health.snapshot()["reasons"][0]
            assert "wˈɔːɹsɛstɚ" in phonemes(service, SENTENCE)
            handle.write(V3[V3.index("yen") + 1:])
        wait_until(lambda: lexicon_section(service)["state"] == "ok", "the completed file")
        assert lexicon_section(service)["sha256"] not in (sha_v1, sha_v2)
        assert phonemes(service, SENTENCE) == plain_phonemes(
            service, "Please welcome noo yen to wooster.")
        speak(controller, "v3-a")
        assert cache.stats()["misses"] == misses + 2
        audio_v3 = played(service)
        assert cache.stats()["exact_hits"] == 1

        write_atomically(lexicon, V1)  # back to the first file: its audio is right again
        wait_until(lambda: lexicon_section(service)["sha256"] == sha_v1, "the first lexicon")
        speak(controller, "v1-c")
        assert cache.stats()["exact_hits"] == 2 and played(service) == audio_v1
        write_atomically(lexicon, V3)
        wait_until(lambda: lexicon_section(service)["state"] == "ok"
                   and lexicon_section(service)["sha256"] != sha_v1, "the third lexicon")
    online = len([p for p in controller.json_on(DEV.status) if p["state"] == "online"])
    with running_agent(settings) as service:  # restarted: the index is on disk
        wait_until(lambda: len([p for p in controller.json_on(DEV.status)
                                if p["state"] == "online"]) > online, "online again")
        speak(controller, "v3-b")
        cache = service.phrase_cache
        assert cache is not None and cache.stats()["misses"] == 0
        assert cache.stats()["exact_hits"] == 1 and played(service) == audio_v3


def test_a_bad_lexicon_at_start_is_reported_and_the_agent_speaks_without_it(
        mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path, controller: Recorder) -> None:
    lexicon = tmp_path / "lexicon.toml"
    lexicon.write_text('version = 1\n[words]\n"Nguyen" = ""\n', encoding="utf-8")
    settings = lexicon_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent", lexicon)
    with running_agent(settings) as service:
        controller.wait_json(DEV.status, lambda p: p["state"] == "online")
        section = lexicon_section(service)
        assert not section["loaded"] and section["state"] == "degraded"
        assert section["reason"] == (f"{lexicon}: entry 'Nguyen' (line 3): respelling is empty")
        assert phonemes(service, SENTENCE) == plain_phonemes(service, SENTENCE)
        speak(controller, "bad-start")
        write_atomically(lexicon, V1)
        wait_until(lambda: lexicon_section(service)["loaded"], "the mended lexicon")
        assert lexicon_section(service)["state"] == "ok"
        assert service.health.snapshot()["state"] == "ok"


def test_sighup_and_the_reload_command_read_it_again(
        mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path, controller: Recorder) -> None:
    lexicon = tmp_path / "lexicon.toml"
    lexicon.write_text(V1, encoding="utf-8")
    settings = lexicon_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent", lexicon,
                                watch=False)  # no watcher: only the reloads read it
    with running_agent(settings) as service:
        controller.wait_json(DEV.status, lambda p: p["state"] == "online")
        assert service.addons.get("lexicon") is not None
        lexicon.write_text(V2, encoding="utf-8")
        assert "wˈɔːɹsɛstɚ" not in phonemes(service, SENTENCE)
        assert "lexicon loaded" in service.reload()  # what SIGHUP runs
        assert "wˈɔːɹsɛstɚ" in phonemes(service, SENTENCE)
        assert "lexicon unchanged" in service.reload()

        lexicon.write_text(V3, encoding="utf-8")
        controller.publish(DEV.command("reload"), {"id": "r1"})
        done = controller.wait_json(DEV.events, lambda e: e["id"] == "r1" and e["final"], 60)
        assert done["event"] == "done"
        assert phonemes(service, SENTENCE) == plain_phonemes(
            service, "Please welcome noo yen to wooster.")

        lexicon.write_text(V3 + '"Bad" = { ipa = "a^" }\n', encoding="utf-8")
        controller.publish(DEV.command("reload"), {"id": "r2"})
        failed = controller.wait_json(DEV.events, lambda e: e["id"] == "r2" and e["final"], 60)
        assert failed["event"] == "failed"
        assert "lexicon rejected" in failed["reason"] and "entry 'Bad'" in failed["reason"]
        assert phonemes(service, SENTENCE) == plain_phonemes(
            service, "Please welcome noo yen to wooster.")  # the one in service is kept


def test_check_config_checks_the_lexicon(tmp_path: Path, tiny_models_dir: Path,
                                         alsa: AlsaConfig) -> None:
    setup = Setup(tmp_path, tiny_models_dir, alsa)
    lexicon = tmp_path / "lexicon.toml"
    setup.values["text"] = {"lexicon": str(lexicon)}
    lexicon.write_text(V2, encoding="utf-8")
    result = setup.run()
    assert result.returncode == 0 and result.stderr == "", result.stderr
    lexicon.write_text(V2 + '"Zed" = { ipa = "ʘ" }\n', encoding="utf-8")
    line = refused(setup.run(), "text.lexicon", str(lexicon), "entry 'Zed' (line 6)",
                   "IPA symbol 'ʘ' (U+0298) is not one voice tiny-test can say")
    assert line
    lexicon.write_text("version = 1\n[words]\n\"a\" = \"\"\n\"b\" = 3\n", encoding="utf-8")
    result = setup.run()
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 2  # one line per problem
    gate = setup.run("--gate")  # the agent starts without it and reports it
    assert gate.returncode == 0
    assert all(": warning: text.lexicon: " in x for x in gate.stderr.splitlines())


@pytest.mark.parametrize(("raw", "reason"), [
    (b'{"version": 1, "words": ' + b"[" * 1000 + b"]" * 1000 + b"}",
     "nested too deeply (a lexicon is one table of words)"),
    (b'{"version": ' + b"1" * 5000 + b', "words": {}}',
     "not valid JSON: number too long: 5000 characters, limit 100"),
])
def test_check_config_refuses_a_deep_or_huge_json_lexicon(
        tmp_path: Path, tiny_models_dir: Path, alsa: AlsaConfig, raw: bytes, reason: str) -> None:
    """#27: a JSON lexicon goes through the bounded parser (agent.jsonbound): nesting and
    number literals are refused with a reason before the parser or int() see them."""
    setup = Setup(tmp_path, tiny_models_dir, alsa)
    lexicon = tmp_path / "lexicon.json"
    setup.values["text"] = {"lexicon": str(lexicon)}
    lexicon.write_bytes(raw)
    refused(setup.run(), "text.lexicon", str(lexicon), reason)
    gate = setup.run("--gate")
    assert gate.returncode == 0 and reason in gate.stderr, gate.stderr


@pytest.mark.voice
def test_the_real_voice_speaks_the_lexicon(mqtt_broker: Broker, real_voice_dir: Path,
                                           tmp_path: Path, controller: Recorder) -> None:
    lexicon = tmp_path / "lexicon.toml"
    lexicon.write_text(V2 + '"Zed" = { ipa = "zQ" }\n', encoding="utf-8")
    settings = agent_settings(mqtt_broker, real_voice_dir.parent, tmp_path / "agent",
                              voice=real_voice_dir.name)
    settings = settings.model_copy(update={"text": TextSettings(lexicon=lexicon)})
    with running_agent(settings) as service:
        controller.wait_json(DEV.status, lambda p: p["state"] == "online")
        section = lexicon_section(service)  # checked against the real voice's id map
        assert section["state"] == "degraded" and not section["loaded"]
        assert (f"IPA symbol 'Q' (U+0051) is not one voice {real_voice_dir.name} can say"
                in section["reason"])
        lexicon.write_text(V2, encoding="utf-8")
        assert "lexicon loaded" in service.reload()
        assert "wˈɔːɹsɛstɚ" in phonemes(service, SENTENCE)
        controller.publish(DEV.command("speak"), {"id": "joe-lex", "text": SENTENCE})
        final = controller.wait_json(DEV.events,
                                     lambda e: e["id"] == "joe-lex" and e["final"], 120)
        assert final["event"] == "finished" and final["audio_s"] > 1.0


def test_phonemize_shows_the_lexicon(tmp_path: Path, tiny_voice_dir: Path) -> None:
    import json
    import subprocess

    from tests.support import REPO

    lexicon = tmp_path / "lexicon.toml"
    lexicon.write_text(V2, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TTS_AGENT_")}
    env.update(PYTHONPATH=str(REPO), TTS_AGENT_MODELS__DIR=str(tiny_voice_dir.parent),
               TTS_AGENT_MODELS__DEFAULT_VOICE=tiny_voice_dir.name,
               TTS_AGENT_CACHE__DIR=str(tmp_path / "cache"),
               TTS_AGENT_TEXT__LEXICON=str(lexicon))

    def phonemize() -> subprocess.CompletedProcess[str]:
        return agent_cli("phonemize", "--json", "--text", SENTENCE, env=env, timeout=120,
                         cwd=tmp_path)

    result = phonemize()
    assert result.returncode == 0 and result.stderr == "", result.stderr
    said = "".join(s["phonemes"] for s in json.loads(result.stdout)["sentences"])
    assert "wˈɔːɹsɛstɚ" in said and "nˈʌ" in said
    lexicon.write_text('version = 1\n[words]\n"Nguyen" = ""\n', encoding="utf-8")
    result = phonemize()  # a refused lexicon: one log line, the text phonemized without it
    assert result.returncode == 0, result.stderr
    assert "lexicon_rejected" in result.stderr and "respelling is empty" in result.stderr
    assert "wˈɔːɹsɛstɚ" not in result.stdout
