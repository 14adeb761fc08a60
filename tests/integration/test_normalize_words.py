"""The word passes of the normalizer end to end: ``tts-agent phonemize`` as a user runs it (a real
process, the voice's frontend, the real espeak-ng) reads abbreviations, codes, initialisms, Roman
numerals, addresses and pauses the way the normalizer writes them."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tests.support.cli import agent_cli


def _sentences(models: Path, text: str) -> list[dict[str, Any]]:
    env = {**os.environ, "TTS_AGENT_MODELS__DIR": str(models),
           "TTS_AGENT_MODELS__DEFAULT_VOICE": "tiny-test", "TTS_AGENT_LOG__FORMAT": "json"}
    result = agent_cli("phonemize", "--json", "--text", text, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    sentences: list[dict[str, Any]] = json.loads(result.stdout)["sentences"]
    return sentences


def test_a_title_does_not_end_the_sentence(tiny_voice_dir: Path) -> None:
    # before the normalizer: "Dr." and "Smith to reception." were two sentences
    sentences = _sentences(tiny_voice_dir.parent,
                           "Dr. Smith and Mr. Jones to reception. Trains to St. Louis wait.")
    assert [s["text"] for s in sentences] == ["doctor Smith and mister Jones to reception.",
                                              "Trains to saint Louis wait."]


def test_an_ellipsis_is_a_pause_and_codes_are_spelled(tiny_voice_dir: Path) -> None:
    sentences = _sentences(tiny_voice_dir.parent, "Flight UA 1234, Gate B12... boarding now")
    assert [s["text"] for s in sentences] == [
        "Flight u eh twelve thirty four, Gate b twelve, boarding now"]
    assert sentences[0]["phonemes"].count(",") == 2
    assert "ɐ" not in sentences[0]["phonemes"]  # the letter A, not the article


def test_initialisms_numerals_addresses_and_symbols(tiny_voice_dir: Path) -> None:
    sentences = _sentences(tiny_voice_dir.parent,
                           "Henry VIII & NASA use the ATM at help@example.com.")
    assert [s["text"] for s in sentences] == [
        "Henry the eighth and Nasa use the eh t m at help at example dot com."]
