"""German, French and Spanish voices normalize their own language (#29 item 4), end to end: the
real joe voice copied under a config naming that language (``espeak.voice``, ``language.code``),
loaded through :meth:`Voice.load`, its sentences phonemized by the real espeak-ng in that
language and synthesized by onnxruntime; and the health report names each voice's rules."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from agent.library.voices import VoiceLibrary
from agent.settings import Settings
from agent.voice.bundle import write_manifest
from agent.voice.voice import Voice
from tests.conftest import REAL_VOICE
from tests.support import make_tiny_voice

SENTENCES = {
    # language: (espeak voice, language.code, as written, as a listener should hear it)
    "de": ("de", "de_DE", "Der Zug um 7:15 Uhr kostet 12,50 €.",
           "Der Zug um sieben Uhr fünfzehn kostet zwölf Euro fünfzig."),
    "fr": ("fr", "fr_FR", "Le train de 7h15 coûte 12,50 €.",
           "Le train de sept heures quinze coûte douze euros cinquante."),
    "es": ("es", "es_ES", "El tren de las 7:15 cuesta 12,50 €.",
           "El tren de las siete y quince cuesta doce euros con cincuenta."),
}


def copy_in_language(real_voice_dir: Path, target: Path, espeak: str, code: str) -> Path:
    """The joe voice's fp32 model (linked, not copied) with a config naming another language."""
    target.mkdir()
    model = f"{REAL_VOICE}.onnx"
    try:
        os.link(real_voice_dir / model, target / model)
    except OSError:
        (target / model).symlink_to((real_voice_dir / model).resolve())
    config = json.loads((real_voice_dir / f"{model}.json").read_text(encoding="utf-8"))
    config["espeak"] = {"voice": espeak}
    config["language"] = {"code": code, "family": code.split("_", maxsplit=1)[0]}
    (target / f"{model}.json").write_text(json.dumps(config, ensure_ascii=False),
                                          encoding="utf-8")
    write_manifest(target, voice=target.name, version="1.0.0",
                   sample_rate=int(config["audio"]["sample_rate"]), variants={"fp32": model},
                   config=f"{model}.json", source="tests/integration/test_language_voices.py")
    return target


def phonemes(voice: Voice, text: str, *, verbatim: bool = False) -> str:
    return " | ".join("".join(s.phonemes) for s in voice.sentences(text, verbatim=verbatim))


@pytest.mark.parametrize("language", sorted(SENTENCES))
def test_a_voice_in_the_language_reads_its_numbers(language: str, real_voice_dir: Path,
                                                   tmp_path: Path) -> None:
    espeak, code, written, heard = SENTENCES[language]
    bundle = copy_in_language(real_voice_dir, tmp_path / f"{language}-joe", espeak, code)
    voice = Voice.load(bundle)
    normalizer = voice.frontend.normalizer
    assert normalizer is not None and normalizer.key.endswith(f"/{language}")
    got = phonemes(voice, written)
    assert got == phonemes(voice, heard, verbatim=True)
    assert got != phonemes(voice, written, verbatim=True)  # espeak-ng alone reads it otherwise
    audio = np.frombuffer(b"".join(chunk.audio for chunk in voice.synthesize(written)),
                          dtype=np.int16)
    assert audio.size > voice.sample_rate  # over a second of speech
    assert int(np.abs(audio.astype(np.int32)).max()) > 1000


@pytest.mark.parametrize("normalize", [True, False])
def test_health_names_the_rules_of_each_voice(tiny_voice_dir: Path, normalize: bool) -> None:
    models = tiny_voice_dir.parent
    for voice, espeak, code in (("tiny-de", "de", "de_DE"), ("tiny-it", "it", "it_IT")):
        make_tiny_voice.copy_in_language(models, voice, espeak=espeak, code=code,
                                         source="tests/integration/test_language_voices.py")
    library = VoiceLibrary(Settings(models={"dir": models, "default_voice": "tiny-test"},
                                    text={"normalize": normalize}))
    library.load_all()
    rules = {v["voice"]: v["text_rules"] for v in library.status()["voices"]}
    expected = {"tiny-test": "en", "tiny-de": "de", "tiny-it": None}
    assert rules == (expected if normalize else dict.fromkeys(expected))
