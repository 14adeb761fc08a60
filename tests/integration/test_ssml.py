"""SSML end to end: the real agent over a real Mosquitto playing into an ALSA file PCM (tiny
voice), and ``tts-agent synth --ssml`` with the real voice. A break is that much silence in what
is played, sub and say-as are said as their words, SSML written for other engines is spoken with
what it asked and was ignored in ``started``'s ``warnings``, and markup that is invalid, unknown
or hostile ends ``rejected`` with its reason while nothing is played."""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import wave
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agent.daemon.service import AgentService
from agent.mqtt.topics import HERMES_ERROR, HERMES_SAY, HERMES_SAY_FINISHED, Namespace
from agent.settings import ChimeSettings
from agent.text.normalize.say_as import say_as
from tests.support.alsa_sink import read_samples
from tests.support.broker import Broker, Recorder, agent_settings, running_agent
from tests.support.cli import agent_cli
from tests.support.controller import (
    agent_fixture,
    controller_fixture,
    events_for,
    final_for,
    kinds_for,
    online_controller,
)
from tests.support.host import SAME_WINDOWS_ENV
from tests.support.make_tiny_voice import SAMPLE_RATE, build_config, build_model

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.broker, pytest.mark.alsa]

NS = Namespace("tts")
DEV = NS.device("t1")
BILLION_LAUGHS = (
    '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    + "".join(f'<!ENTITY lol{i} "{("&lol" + str(i - 1) + ";") * 10}">' for i in range(1, 10))
    + "]><speak>&lol9;</speak>").replace("&lol0;", "&lol;")


agent = agent_fixture()
controller = controller_fixture()


def speak(controller: Recorder, request_id: str, text: str, **fields: Any) -> dict[str, Any]:
    controller.publish(DEV.command("speak"), {"id": request_id, "text": text, **fields})
    return final_for(controller, request_id)


def sink(service: AgentService) -> Path:
    return Path(service.settings.audio.device.split("'")[1])


def longest_silence(samples: np.ndarray) -> int:
    """The longest run of exactly zero samples between the first and the last sound."""
    loud = np.flatnonzero(samples != 0)
    if len(loud) < 2:
        return 0
    gaps = np.diff(loud) - 1
    return int(gaps.max())


def test_a_break_of_one_second_is_one_second_of_silence_in_what_is_played(
        agent: AgentService, controller: Recorder) -> None:
    final = speak(controller, "brk-1", '<speak>Hello <break time="1s"/> world</speak>')
    assert final["event"] == "finished", final
    assert kinds_for(controller, "brk-1") == ["accepted", "started", "finished"]
    samples = read_samples(sink(agent))[:, 0]
    assert abs(longest_silence(samples) / SAMPLE_RATE - 1.0) <= 0.020


def test_sub_is_said_as_its_alias(agent: AgentService, controller: Recorder) -> None:
    assert agent.phrase_cache is not None
    assert speak(controller, "sub-0", "The World Wide Web Consortium meets today.")[
        "event"] == "finished"
    hits = agent.phrase_cache.hits
    final = speak(controller, "sub-1", '<speak>The <sub alias="World Wide Web Consortium">W3C'
                                       "</sub> meets today.</speak>")
    assert final["event"] == "finished", final
    assert agent.phrase_cache.hits == hits + 1  # the very utterance of the alias's words


def test_say_as_characters_spells(agent: AgentService, controller: Recorder) -> None:
    assert agent.phrase_cache is not None
    spelled = say_as("characters", "Gate")
    assert spelled.split() == ["g", "eh", "t", "e"]
    assert speak(controller, "chr-0", spelled)["event"] == "finished"
    hits = agent.phrase_cache.hits
    final = speak(controller, "chr-1",
                  '<speak><say-as interpret-as="characters">Gate</say-as></speak>')
    assert final["event"] == "finished", final
    assert agent.phrase_cache.hits == hits + 1  # letter by letter, as the spelled words
    assert speak(controller, "chr-2", "Gate")["event"] == "finished"
    assert agent.phrase_cache.hits == hits + 1  # the word itself sounds otherwise


@pytest.mark.parametrize(("text", "fields", "reason"), [
    ('<speak>Hello <break time="1s"> world</speak>', {},
     "malformed SSML: mismatched tag: line 1, column 38"),
    (BILLION_LAUGHS, {}, "SSML must not have a document type declaration (<!DOCTYPE lolz>)"),
    ('<!DOCTYPE speak [<!ENTITY x SYSTEM "file:///etc/passwd">]><speak>&x;</speak>', {},
     "SSML must not have a document type declaration"),
    ("<speak>Now <blink>hurry</blink></speak>", {},
     "SSML element <blink> is not supported (line 1, column 11)"),
    ('<speak><prosody pitchh="high">Hi</prosody></speak>', {},
     "attribute pitchh of <prosody> is not supported"),
    ('<speak><voice name="nobody">Hi</voice></speak>', {},
     "unknown voice 'nobody' in <voice name> (installed: tiny-test)"),
    ("Hello <break/> there", {"ssml": True}, "malformed SSML"),
])
def test_bad_ssml_is_rejected_with_its_reason_and_nothing_is_played(
        agent: AgentService, controller: Recorder, text: str, fields: dict[str, Any],
        reason: str) -> None:
    final = speak(controller, "bad-1", text, **fields)
    assert final["event"] == "rejected", final
    assert reason in final["reason"]
    assert kinds_for(controller, "bad-1") == ["rejected"]
    assert not np.any(read_samples(sink(agent)))  # the sink stays silent
    assert speak(controller, "after", "Still here.")["event"] == "finished"


OTHER_ENGINES = (
    '<speak version="1.0" xmlns="http://www.w3.org/2001/10/synthesis" '
    'xmlns:mstts="https://www.w3.org/2001/mstts" xml:lang="en-US">'
    '<mstts:express-as style="cheerful"><prosody pitch="+10%" contour="(0%,+20Hz)">'
    'Gate <emphasis level="strong">two</emphasis> is now open.</prosody></mstts:express-as>'
    '<mark name="end"/></speak>')
"""SSML for Azure: every element and attribute but the words is one the agent cannot render."""


def test_ssml_for_other_engines_is_spoken_with_its_warnings_in_started(
        agent: AgentService, controller: Recorder) -> None:
    assert agent.phrase_cache is not None
    assert speak(controller, "oth-0", "Gate two is now open.")["event"] == "finished"
    hits = agent.phrase_cache.hits
    final = speak(controller, "oth-1", OTHER_ENGINES)
    assert final["event"] == "finished", final
    assert kinds_for(controller, "oth-1") == ["accepted", "started", "finished"]
    events = {e["event"]: e for e in events_for(controller, "oth-1")}
    assert events["started"]["warnings"] == [
        "ignored <mstts:express-as>", "ignored <prosody pitch>", "ignored <prosody contour>",
        "ignored <emphasis>: spoken without emphasis", "ignored <mark>"]
    assert "warnings" not in events["accepted"]
    assert agent.phrase_cache.hits == hits + 1  # the very utterance of its words
    assert np.any(read_samples(sink(agent)))


def test_amazon_ssml_and_audio_of_a_url_are_spoken_never_fetched(
        agent: AgentService, controller: Recorder) -> None:
    final = speak(controller, "amz-1", '<speak><audio src="https://example.invalid/ding.mp3">'
                  'Ding.</audio> <amazon:effect name="whispered">Doors closing.</amazon:effect>'
                  "</speak>")
    assert final["event"] == "finished", final
    (started,) = (e for e in events_for(controller, "amz-1") if e["event"] == "started")
    assert started["warnings"] == [
        "ignored <audio src='https://example.invalid/ding.mp3'>: not a chime name, its fallback "
        "spoken", "ignored <amazon:effect>"]
    plain = speak(controller, "amz-0", "Doors closing.")
    assert "warnings" not in plain and plain["event"] == "finished"


def test_audio_plays_the_chime_as_part_of_the_utterance_or_its_fallback(
        mqtt_broker: Broker, tiny_voice_dir: Path, tmp_path: Path) -> None:
    chimes = tmp_path / "chimes"
    runpy.run_path(str(REPO / "chimes" / "make_chimes.py"))["write"](chimes)
    settings = agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent")
    settings = settings.model_copy(update={"chimes": ChimeSettings(dir=chimes)})
    with running_agent(settings) as service, Recorder(
            mqtt_broker.settings(), [DEV.events.as_filter(), DEV.status.as_filter()],
            "ctl") as ctl:
        ctl.wait_json(DEV.status, lambda p: p["state"] == "online")
        assert service.phrase_cache is not None
        assert speak(ctl, "au-0", "Doors closing.", chime="ding")["event"] == "finished"
        hits = service.phrase_cache.hits
        final = speak(ctl, "au-1", '<speak><audio src="ding"/>Doors closing.</speak>')
        assert final["event"] == "finished", final
        assert service.phrase_cache.hits == hits + 1  # the chime, then the speech: one entry
        final = speak(ctl, "au-2", '<speak><audio src="gong">Doors closing.</audio></speak>')
        assert final["event"] == "finished", final
        assert service.phrase_cache.hits == hits + 1  # the fallback: speech without a chime
        final = speak(ctl, "au-3", '<speak><audio src="gong"/>Doors closing.</speak>')
        assert final["event"] == "rejected"
        assert final["reason"] == ("unknown chime 'gong' in <audio src> (line 1, column 7); "
                                   "chimes: alert, ding")
        assert kinds_for(ctl, "au-3") == ["rejected"]


def test_ssml_false_reads_the_text_as_it_is(agent: AgentService, controller: Recorder) -> None:
    final = speak(controller, "lit-1", "<speak>", ssml=False)
    assert final["event"] == "finished", final


def test_hermes_say_takes_ssml(mqtt_broker: Broker, tiny_voice_dir: Path,
                               tmp_path: Path) -> None:
    settings = agent_settings(mqtt_broker, tiny_voice_dir.parent, tmp_path / "agent",
                              mqtt={"site_id": "kitchen"})
    filters = [HERMES_SAY_FINISHED.as_filter(), HERMES_ERROR.as_filter(),
               DEV.events.as_filter(), DEV.status.as_filter()]
    with running_agent(settings), online_controller(mqtt_broker, filters=filters,
                                                    name="rhasspy") as hermes:
        hermes.publish(HERMES_SAY, {"text": '<speak>Dinner <break time="300ms"/> is ready'
                                            "</speak>", "siteId": "kitchen", "id": "h-1"})
        assert hermes.wait_json(HERMES_SAY_FINISHED, lambda p: p["id"] == "h-1")
        assert hermes.wait_json(DEV.events, lambda e: e["id"] == "h-1" and e["final"])[
            "event"] == "finished"
        hermes.publish(HERMES_SAY, {"text": "<speak><blink>now</blink></speak>",
                                    "siteId": "kitchen", "id": "h-2", "sessionId": "s-2"})
        error = hermes.wait_json(HERMES_ERROR, lambda p: p.get("context") == "h-2")
        assert error["error"].startswith("SSML element <blink> is not supported")
        assert error["sessionId"] == "s-2"


# -- the command line, with the real voice -------------------------------------------------------


def tts_agent(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return agent_cli(*args, env=env, timeout=300)


def wav_samples(path: Path) -> tuple[np.ndarray, int]:
    with wave.open(str(path), "rb") as wav:
        return np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2"), wav.getframerate()


@pytest.mark.voice
def test_synth_ssml_break_is_one_second_of_silence_with_the_real_voice(
        real_voice_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "break.wav"
    done = tts_agent("synth", "--text", '<speak>Hello <break time="1s"/> world</speak>',
                     "--out", str(out), env=_env(real_voice_dir))
    assert done.returncode == 0, done.stderr
    samples, rate = wav_samples(out)
    assert abs(longest_silence(samples) / rate - 1.0) <= 0.020
    report = json.loads(done.stdout)
    assert report["seconds"] > 1.0


@pytest.mark.voice
def test_synth_ssml_sub_and_say_as_are_their_words(real_voice_dir: Path,
                                                   tmp_path: Path) -> None:
    quiet = ("--noise-scale", "0", "--noise-w", "0")
    env = _env(real_voice_dir)
    cases = [
        ('<speak>The <sub alias="World Wide Web Consortium">W3C</sub> meets.</speak>',
         "The World Wide Web Consortium meets."),
        ('<speak><say-as interpret-as="characters">Gate</say-as></speak>',
         say_as("characters", "Gate")),
    ]
    for n, (ssml, words) in enumerate(cases):
        marked, plain = tmp_path / f"ssml{n}.wav", tmp_path / f"plain{n}.wav"
        assert tts_agent("synth", "--ssml", "--text", ssml, "--out", str(marked), *quiet,
                         env=env).returncode == 0
        assert tts_agent("synth", "--text", words, "--out", str(plain), *quiet,
                         env=env).returncode == 0
        assert marked.read_bytes() == plain.read_bytes(), ssml


@pytest.mark.slow
@pytest.mark.voice
def test_synth_ssml_phoneme_and_prosody_are_what_they_say(real_voice_dir: Path,
                                                          tmp_path: Path) -> None:
    env = _env(real_voice_dir)
    quiet = ("--noise-scale", "0", "--noise-w", "0")

    def synth(name: str, text: str, *extra: str) -> np.ndarray:
        out = tmp_path / f"{name}.wav"
        done = tts_agent("synth", "--text", text, "--out", str(out), *quiet, *extra, env=env)
        assert done.returncode == 0, done.stderr
        return wav_samples(out)[0]

    ipa = json.loads(tts_agent("phonemize", "--text", "tomahto", "--json",
                               env=env).stdout)["sentences"][0]["phonemes"]
    given = synth("ipa", f'<speak><phoneme alphabet="ipa" ph="{ipa}">tomato</phoneme></speak>')
    assert np.array_equal(given, synth("tomahto", "tomahto"))  # the IPA, not the word
    assert not np.array_equal(given, synth("tomato", "tomato"))
    slow = synth("slow", '<speak><prosody rate="50%">Platform two.</prosody></speak>')
    assert np.array_equal(slow, synth("long", "Platform two.", "--length-scale", "2"))
    soft = synth("soft", '<speak><prosody volume="-6dB">Platform two.</prosody></speak>')
    loud = synth("plain", "Platform two.").astype(np.float32) * np.float32(10 ** (-6 / 20))
    assert np.array_equal(soft, np.clip(np.rint(loud), -32768, 32767).astype("<i2"))


@pytest.mark.slow
def test_synth_ssml_voice_switches_to_another_installed_voice(tiny_voice_dir: Path,
                                                              tmp_path: Path) -> None:
    from agent.voice.bundle import write_manifest

    other = tiny_voice_dir.parent / "tiny-two"
    other.mkdir()
    build_model(other / "tiny-two.onnx")
    build_config(other / "tiny-two.onnx.json")
    config = json.loads((other / "tiny-two.onnx.json").read_text(encoding="utf-8"))
    config["espeak"]["voice"] = "en"  # British: other phonemes, other audio
    (other / "tiny-two.onnx.json").write_text(json.dumps(config), encoding="utf-8")
    write_manifest(other, voice="tiny-two", version="1.0.0", sample_rate=SAMPLE_RATE,
                   variants={"fp32": "tiny-two.onnx"}, config="tiny-two.onnx.json",
                   source="tests/integration/test_ssml.py")
    env = _env(tiny_voice_dir)
    outs = [tmp_path / "switched.wav", tmp_path / "two.wav", tmp_path / "one.wav"]
    for out, text, voice in [
            (outs[0], '<speak><voice name="tiny-two">Hello there.</voice></speak>', "tiny-test"),
            (outs[1], "Hello there.", "tiny-two"), (outs[2], "Hello there.", "tiny-test")]:
        done = tts_agent("synth", "--voice", voice, "--text", text, "--out", str(out), env=env)
        assert done.returncode == 0, done.stderr
    switched, two, one = (wav_samples(o)[0] for o in outs)
    assert np.array_equal(switched, two) and not np.array_equal(switched, one)
    done = tts_agent("synth", "--text", '<speak><voice name="nobody">Hi</voice></speak>',
                     "--out", str(tmp_path / "x.wav"), env=env)
    assert done.returncode == 2 and "nobody" in done.stderr


@pytest.mark.slow
def test_phonemize_shows_what_ssml_becomes(tiny_voice_dir: Path, tmp_path: Path) -> None:
    runpy.run_path(str(REPO / "chimes" / "make_chimes.py"))["write"](tmp_path / "chimes")
    env = {**_env(tiny_voice_dir), "TTS_AGENT_CHIMES__DIR": str(tmp_path / "chimes")}

    def rows(text: str, *extra: str) -> list[dict[str, Any]]:
        done = tts_agent("phonemize", "--json", "--text", text, *extra, env=env)
        assert done.returncode == 0, done.stderr
        return list(json.loads(done.stdout)["sentences"])

    shown = rows('<speak>Gate <say-as interpret-as="characters">NASA</say-as><break time="1s"/>'
                 '<audio src="ding"/><sub alias="now boarding">nb</sub>.</speak>')
    spelled = rows(f"Gate {say_as('characters', 'NASA')}")
    assert shown[0]["phonemes"] == spelled[0]["phonemes"] != rows("Gate NASA")[0]["phonemes"]
    assert shown[1:3] == [{"pause_s": 1.0}, {"chime": "ding"}]
    assert shown[3]["phonemes"] == rows("now boarding.")[0]["phonemes"]
    assert rows("<speak>Gate</speak>", "--ssml") == rows("Gate")
    assert rows('<speak><audio src="gong">the gong</audio></speak>') == rows("the gong")
    done = tts_agent("phonemize", "--text", '<speak><audio src="gong"/>x</speak>', env=env)
    assert done.returncode == 2
    assert done.stderr == ("tts-agent phonemize: error: unknown chime 'gong' in <audio src> "
                           "(line 1, column 7); chimes: alert, ding\n")


def test_synth_prints_what_ssml_for_other_engines_asked_and_was_ignored(
        tiny_voice_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "x.wav"
    done = tts_agent("synth", "--text", OTHER_ENGINES, "--out", str(out),
                     env=_env(tiny_voice_dir))
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        "tts-agent synth: warning: SSML: ignored <mstts:express-as>",
        "tts-agent synth: warning: SSML: ignored <prosody pitch>",
        "tts-agent synth: warning: SSML: ignored <prosody contour>",
        "tts-agent synth: warning: SSML: ignored <emphasis>: spoken without emphasis",
        "tts-agent synth: warning: SSML: ignored <mark>"]
    assert json.loads(done.stdout)["seconds"] > 0 and out.stat().st_size > 44


@pytest.mark.parametrize(("command", "status"), [("synth", 2), ("say", 2)])
def test_say_and_synth_refuse_bad_ssml_with_one_line(tiny_voice_dir: Path, tmp_path: Path,
                                                     command: str, status: int) -> None:
    extra = ["--out", str(tmp_path / "x.wav")] if command == "synth" else []
    text = ["--text"] if command == "synth" else []
    done = agent_cli(
        command, *text, "<speak><blink/></speak>", *extra, timeout=120,
        env={**_env(tiny_voice_dir), "TTS_AGENT_AUDIO__DEVICE": f"file:'{tmp_path}/o.raw',raw"})
    assert done.returncode == status, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"tts-agent {command}: error: SSML element <blink> is not supported (line 1, column 7); "
        "supported: speak, p, s, break, say-as, sub, prosody, phoneme, voice, audio"]
    assert not (tmp_path / "x.wav").exists() and not (tmp_path / "o.raw").exists()


def test_send_checks_ssml_before_it_connects(tmp_path: Path) -> None:
    done = agent_cli("send", "-p", "1", "--device", "t1", "speak", "--ssml", "Hello <break/>",
                     timeout=60)
    assert done.returncode == 2, done.stderr
    assert "invalid speak command: malformed SSML" in done.stderr
    done = agent_cli("send", "-p", "1", "--device", "t1", "speak", "--ssml",
                     '<speak><prosody pitch="+1%">Hi</prosody></speak>', timeout=60)
    assert done.stderr.splitlines()[0] == "tts-agent send: warning: SSML: ignored <prosody pitch>"


def _env(voice_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TTS_AGENT_")}
    env.update({"TTS_AGENT_MODELS__DIR": str(voice_dir.parent),
                "TTS_AGENT_MODELS__DEFAULT_VOICE": voice_dir.name,
                # fp32: the tiny voice has no int8, which a VNNI host's profile would ask for
                "TTS_AGENT_MODELS__VARIANT": "fp32",
                **SAME_WINDOWS_ENV})  # audio compared across processes, on a busy machine too
    return env
