"""The normalizer as the agent builds it (#16): ``text.date_order`` from the settings reaches the
voice's normalizer, and a voice of a language without rules gets none (espeak-ng reads its
numbers). Real processes (``tts-agent phonemize``), the tiny voice and a copy that declares
Italian, phonemes from the real espeak-ng (German, French, Spanish: test_language_voices)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.support import make_tiny_voice
from tests.support.cli import agent_cli


def phonemes(text: str, models: Path, voice: str = "tiny-test", **env: str) -> str:
    environ = {**os.environ, "TTS_AGENT_MODELS__DIR": str(models),
               "TTS_AGENT_MODELS__DEFAULT_VOICE": "tiny-test", **env}
    result = agent_cli("phonemize", "--json", "--voice", voice, "--text", text, env=environ,
                       timeout=120)
    assert result.returncode == 0, result.stderr
    return " ".join(s["phonemes"] for s in json.loads(result.stdout)["sentences"])


def add_italian_voice(models: Path) -> None:
    """A copy of the tiny voice that declares Italian (``language.code`` it_IT, espeak ``it``),
    a language the normalizer has no rules for."""
    make_tiny_voice.copy_in_language(models, "tiny-it", espeak="it", code="it_IT",
                                     source="tests/integration/test_normalizer_settings.py")


def test_date_order_from_the_settings(tiny_voice_dir: Path) -> None:
    models = tiny_voice_dir.parent
    text = "The office is closed on 3/12."
    mdy = phonemes("The office is closed on March twelfth.", models)
    dmy = phonemes("The office is closed on the third of December.", models)
    assert mdy != dmy
    assert phonemes(text, models) == mdy
    assert phonemes(text, models, TTS_AGENT_TEXT__DATE_ORDER="dmy") == dmy


def test_a_voice_of_a_language_without_rules_gets_no_normalizer(tiny_voice_dir: Path) -> None:
    models = tiny_voice_dir.parent
    add_italian_voice(models)
    text = "Il treno delle 7:15 costa 12,50 € e parte il 3/12."
    as_written = phonemes(text, models, "tiny-it", TTS_AGENT_TEXT__NORMALIZE="false")
    assert phonemes(text, models, "tiny-it") == as_written
    english = "The 7:15 costs $12.50."
    assert phonemes(english, models) != phonemes(english, models,
                                                 TTS_AGENT_TEXT__NORMALIZE="false")
