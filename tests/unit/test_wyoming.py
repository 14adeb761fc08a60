"""The Wyoming server's pieces that need no running agent: its settings, the bounded event
reader, the sentences of streamed text, the voice catalog."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from agent.library.voices import VoiceLibrary, VoiceNotFound
from agent.settings import Settings, WyomingSettings
from agent.settings.wyoming import parse_uri
from agent.wyoming.catalog import Catalog, both_forms
from agent.wyoming.speech import Refused, SentenceBuffer, check_text, choose_voice
from agent.wyoming.wire import ProtocolError, read_event


@pytest.mark.parametrize(("uri", "parsed"), [
    ("tcp://192.0.2.1:10200", ("tcp", "192.0.2.1", 10200)),
    ("tcp://[::1]:10200", ("tcp", "::1", 10200)),
    ("unix:///run/tts-agent/wyoming.sock", ("unix", "/run/tts-agent/wyoming.sock", 0)),
])
def test_server_addresses(uri: str, parsed: tuple[str, str, int]) -> None:
    assert parse_uri(uri) == parsed
    assert WyomingSettings(uri=uri).uri == uri


@pytest.mark.parametrize(("uri", "why"), [
    ("http://0.0.0.0:10200", "only tcp:// and unix://"),
    ("tcp://0.0.0.0", "expected tcp://HOST:PORT"),
    ("tcp://0.0.0.0:0", "port outside"),
    ("tcp://host:99999", "not a server address"),
    ("unix://relative.sock", "expected unix:///ABSOLUTE/PATH"),
    ("unix:///" + "x" * 150, "at most 107 bytes"),
    ("tcp://h:1?x=1", "no query"),
])
def test_bad_addresses_are_refused_with_the_reason(uri: str, why: str) -> None:
    with pytest.raises(ValidationError, match=why.replace("?", r"\?")):
        Settings(wyoming={"uri": uri})


def test_the_server_is_off_by_default() -> None:
    assert Settings().wyoming.uri is None


def test_unknown_wyoming_settings_are_errors() -> None:
    with pytest.raises(ValidationError, match="extra"):
        Settings(wyoming={"url": "tcp://0.0.0.0:10200"})


def read(data: bytes, max_bytes: int = 4096) -> object:
    async def go() -> object:
        reader = asyncio.StreamReader(limit=max_bytes)
        reader.feed_data(data)
        reader.feed_eof()
        return await read_event(reader, max_bytes)
    return asyncio.run(go())


def test_an_event_with_data_and_payload_is_read() -> None:
    data = json.dumps({"text": "hi"}).encode()
    header = json.dumps({"type": "synthesize", "data": {"a": 1}, "data_length": len(data),
                         "payload_length": 3}).encode()
    event = read(header + b"\n" + data + b"abc")
    assert event.type == "synthesize" and event.data == {"a": 1, "text": "hi"}  # type: ignore[attr-defined]
    assert event.payload == b"abc"  # type: ignore[attr-defined]
    assert read(b"") is None


@pytest.mark.parametrize(("data", "why"), [
    (b'{"type": "x", "payload_length": 1073741824}\n', "larger than 4096 bytes"),
    (b'{"type": "x", "data_length": -1}\n', "non-negative"),
    (b'{"type": "x", "data_length": "9"}\n', "non-negative"),
    (b"[1, 2]\n", "not a JSON object"),
    (b"nonsense\n", "not JSON"),
    (b'{"data": {}}\n', "no type"),
    (b'{"type": "x", "data": [1]}\n', "data is not a JSON object"),
    (b'{"type": "x", "payload_length": 10}\nabc', "closed in the middle"),
    (b'{"type": "x"', "closed in the middle"),
    (b"x" * 5000 + b"\n", "header longer than 4096 bytes"),
])
def test_events_outside_the_bounds_are_refused(data: bytes, why: str) -> None:
    with pytest.raises(ProtocolError, match=why):
        read(data)


@pytest.mark.parametrize("data", [
    b"[" * 100_000 + b"\n",
    b'{"type": "synthesize", "data": {"x": ' + b"[" * 50_000 + b"}}\n",
    b'{"type": "synthesize", "data_length": 50000}\n' + b"[" * 50_000,
], ids=["header", "inline-data", "data"])
def test_deeply_nested_events_are_refused_not_a_crash(data: bytes) -> None:
    with pytest.raises(ProtocolError, match="nested too deeply"):
        read(data, max_bytes=256 * 1024)


def test_streamed_text_becomes_whole_sentences() -> None:
    buffer = SentenceBuffer(1000)
    assert buffer.add("Hello there") == []
    assert buffer.add(". It costs 3.5 euro") == ["Hello there. "]
    assert buffer.add("s! And") == ["It costs 3.5 euros! "]
    assert buffer.add(" then?") == []  # the end of the text may not be the end of a sentence
    assert buffer.add("\n") == ["And then?\n"]
    assert buffer.add("Last one") == []
    assert buffer.flush() == ["Last one"]
    assert buffer.flush() == []


def test_streamed_text_is_bounded_as_a_whole() -> None:
    buffer = SentenceBuffer(10)
    buffer.add("12345")
    with pytest.raises(Refused, match="longer than 10 characters"):
        buffer.add("678901")
    with pytest.raises(Refused, match="must be a string"):
        SentenceBuffer(10).add(5)


@pytest.mark.parametrize(("text", "code"), [("", "empty-text"), ("  \n", "empty-text"),
                                            ("x" * 11, "text-too-long"), (None, "bad-request")])
def test_text_checks(text: object, code: str) -> None:
    with pytest.raises(Refused) as caught:
        check_text(text, 10)
    assert caught.value.code == code


def test_the_catalog_describes_each_installed_voice(tiny_voice_dir: Path) -> None:
    library = VoiceLibrary(Settings(models={"dir": tiny_voice_dir.parent,
                                            "default_voice": "tiny-test"}))
    info = Catalog(library).info()
    (program,) = info.tts
    (voice,) = program.voices
    assert program.supports_synthesize_streaming
    assert (voice.name, voice.version) == ("tiny-test", "1.0.0")
    assert voice.languages == ["en-us", "en_US", "en-US"]  # its espeak voice, both spellings
    assert library.loaded() == []  # describing loads no voice
    config = tiny_voice_dir / "tiny-test.onnx.json"
    data = json.loads(config.read_text())
    data["language"] = {"code": "en_GB"}
    data["speaker_id_map"] = {"alice": 0, "bob": 1}
    config.write_text(json.dumps(data))
    from agent.voice.bundle import write_manifest
    write_manifest(tiny_voice_dir, voice="tiny-test", version="1.1.0", sample_rate=16000,
                   variants={"fp32": "tiny-test.onnx"}, config="tiny-test.onnx.json",
                   source="pypi:tiny-voice==1.1.0")
    (voice,) = Catalog(library).info().tts[0].voices
    assert (voice.version, voice.languages) == ("1.1.0", ["en_GB", "en-GB"])
    assert [s.name for s in voice.speakers or []] == ["alice", "bob"]
    assert voice.attribution.url == "https://pypi.org/project/tiny-voice/"


def test_an_unknown_voice_is_refused_without_the_models_path(tiny_voice_dir: Path) -> None:
    """#28.6: the reason made for an unknown voice (what Wyoming's error event and an MQTT
    reload's answer carry) names the voice and what is installed, never the models path."""
    models = tiny_voice_dir.parent
    library = VoiceLibrary(Settings(models={"dir": models, "default_voice": "tiny-test"}))
    with pytest.raises(Refused) as refused:
        choose_voice(Catalog(library), {"name": "nobody"}, WyomingSettings())
    reasons = [refused.value.reason]
    for attempt in (lambda: library.versions("nobody"), lambda: library.rollback("nobody"),
                    lambda: library.activate("nobody", "1.0.0")):
        with pytest.raises(VoiceNotFound) as missing:
            attempt()
        reasons.append(str(missing.value))
    assert "nobody" in reasons[0] and "tiny-test" in reasons[0]
    for reason in reasons:
        assert "/" not in reason and str(models) not in reason, reason


@pytest.mark.parametrize(("code", "forms"), [
    ("en_US", ["en_US", "en-US"]), ("en-US", ["en-US", "en_US"]),
    ("en-us", ["en-us", "en_US", "en-US"]), ("es_419", ["es_419", "es-419"]), ("de", ["de"]),
    ("en-gb-x-rp", ["en-gb-x-rp"]), ("cmn", ["cmn"]),
])
def test_a_language_is_described_in_both_spellings(code: str, forms: list[str]) -> None:
    """#28.12: Piper's ``en_US`` and the BCP 47 ``en-US`` Home Assistant looks voices up by."""
    assert both_forms(code) == forms
