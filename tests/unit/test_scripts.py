"""Scripts a voice can read and symbols without a reading (agent/text/scripts.py, #16)."""

from __future__ import annotations

import pytest

from agent.text.document import Document, Pause, Phonemes, Speech, plain
from agent.text.frontend import BOS, EOS, PAD, Frontend
from agent.text.scripts import (
    NOTHING_TO_SPEAK,
    drop_symbols,
    has_speech,
    mostly_unspeakable,
    scripts_for,
    scripts_of,
    skip_unspeakable,
    skipped_words,
    speech_problem,
    unspeakable,
)

ENGLISH = scripts_for(["en_US", "en-us"])
VOICES = {"en_US-joe-medium": ("en_US", "en-us"), "zh-voice": ("zh_CN", "cmn"),
          "ru-voice": ("ru_RU", "ru")}


@pytest.mark.parametrize(("text", "scripts"), [
    ("你好，欢迎光临。", ["Han"]),
    ("こんにちは", ["Hiragana"]),
    ("カタカナ", ["Katakana"]),
    ("안녕하세요", ["Hangul"]),
    ("مرحبا", ["Arabic"]),
    ("שלום", ["Hebrew"]),
    ("Привет", ["Cyrillic"]),
    ("Καλημέρα", ["Greek"]),
    ("नमस्ते", ["Devanagari"]),
    ("สวัสดี", ["Thai"]),
    ("Train to 東京 and Москва", ["Han", "Cyrillic"]),
])
def test_scripts_an_english_voice_cannot_read(text: str, scripts: list[str]) -> None:
    assert unspeakable(text, ENGLISH) == scripts


@pytest.mark.parametrize("text", [
    "Welcome to the station.", "Zürich, Malmö, São Paulo, Kraków, façade, naïve, Ærø",
    "Price: $12.50 (€40, £7.99) at 22°C - 50% off!", "Gate B12... boarding now", "",
    "Party \U0001f389 time \u2192 now",
])
def test_what_an_english_voice_reads(text: str) -> None:
    assert unspeakable(text, ENGLISH) == []


def test_languages_and_their_scripts() -> None:
    assert scripts_for(["zh_CN", "cmn"]) == {"Latin", "Han", "Bopomofo"}
    assert scripts_for(["ja"]) == {"Latin", "Han", "Hiragana", "Katakana"}
    assert scripts_for(["ru_RU"]) == {"Latin", "Cyrillic"}
    assert scripts_for(["xx-unknown"]) is None  # not judged
    assert unspeakable("你好", None) == []
    assert unspeakable("Привет world", scripts_for(["ru"])) == []
    assert scripts_of("Hi 你好 Привет") == ["Latin", "Han", "Cyrillic"]


@pytest.mark.parametrize(("text", "left"), [
    ("Party \U0001f389\U0001f389 time!", "Party time!"),
    ("Thumbs \U0001f44d\U0001f3fd up", "Thumbs up"),  # skin tone modifier
    ("Family \U0001f468\u200d\U0001f469\u200d\U0001f467 day", "Family day"),  # ZWJ sequence
    ("Flag \U0001f1fa\U0001f1f8 here", "Flag here"),  # regional indicators
    ("Press 1\ufe0f\u20e3 now", "Press 1 now"),  # keycap: the digit stays
    ("Done \u2713 \u2605 \u2665\ufe0f next \u2192", "Done next"),
    ("22°C, № 5, 5 ℃", "22°C, № 5, 5 ℃"),  # symbols with a reading stay
    ("$5 + 3 = 8 %", "$5 + 3 = 8 %"),
    ("plain text", "plain text"),
])
def test_drop_symbols(text: str, left: str) -> None:
    assert drop_symbols(text) == left


def test_has_speech() -> None:
    assert not has_speech("\U0001f389\U0001f389 \U0001f44d")
    assert not has_speech("... !!! ???")
    assert has_speech("\U0001f389 7") and has_speech("$") and has_speech("Hi")


def test_the_reason_names_the_script_the_voice_and_who_can() -> None:
    problem = speech_problem(plain("你好，欢迎光临。"), "en_US-joe-medium", VOICES)
    assert problem == ("text is in Han script, which voice en_US-joe-medium (en_US) cannot "
                       "speak; installed voices that can: zh-voice")
    alone = speech_problem(plain("你好"), "en_US-joe-medium", {"en_US-joe-medium": ("en_US",)})
    assert alone is not None and alone.endswith("installed voices that can: none")
    mixed = speech_problem(plain("你好 Привет"), "en_US-joe-medium", VOICES)
    assert mixed is not None and "Han script and Cyrillic script" in mixed
    assert mixed.endswith("that can: none")


def test_a_request_naming_a_voice_that_can_say_it_passes() -> None:
    assert speech_problem(plain("你好，欢迎光临。"), "zh-voice", VOICES) is None
    document = Document((Speech(("Next: ",)), Speech(("你好",), voice="zh-voice")))
    assert speech_problem(document, "en_US-joe-medium", VOICES) is None
    wrong = Document((Speech(("你好",), voice="ru-voice"),))
    assert "voice ru-voice (ru_RU)" in (speech_problem(wrong, "en_US-joe-medium", VOICES) or "")


def test_nothing_to_speak_once_symbols_are_dropped() -> None:
    assert speech_problem(plain("\U0001f389\U0001f389"), "en_US-joe-medium",
                          VOICES) == NOTHING_TO_SPEAK
    assert speech_problem(plain("\U0001f389\U0001f389"), "en_US-joe-medium", VOICES,
                          drop_symbols=False) is None  # espeak-ng names them
    given = Document((Speech(("\U0001f389", Phonemes("tˈɛst"))),))
    assert speech_problem(given, "en_US-joe-medium", VOICES) is None
    paused = Document((Speech(("\U0001f389",)), Pause(0.5)))
    assert speech_problem(paused, "en_US-joe-medium", VOICES) is None
    assert speech_problem(plain("Hi \U0001f389"), "en_US-joe-medium", VOICES) is None


def test_hostile_input_finishes() -> None:
    # one scan each, no backtracking: a blow-up would hit the test timeout
    text = ("\U0001f389a你" * 20_000) + ("\u200d\ufe0f" * 20_000)
    assert unspeakable(text, ENGLISH) == ["Han"]
    assert drop_symbols(text) == " ".join(["a你"] * 20_000)
    assert has_speech(text)


# --- a word or a symbol of another script (#29 item 5) ---------------------------------------

ENGLISH_VOICE = {"en_US-joe-medium": ("en_US", "en-us")}


@pytest.mark.parametrize("text", [
    "Give 250 μg twice daily.",  # a Greek mu as a unit: refused before #29
    "The meter reads 10 Ω.",
    "Welcome, 欢迎, to the city museum.",
    "Café Ελλάδα is now open.",
    "Здравствуйте! Welcome aboard flight BA 287.",
    "The value of π is about 3.14.",
])
def test_one_word_or_symbol_of_another_script_is_not_refused(text: str) -> None:
    assert speech_problem(plain(text), "en_US-joe-medium", ENGLISH_VOICE) is None


@pytest.mark.parametrize(("text", "scripts"), [
    ("你好，欢迎光临。", ["Han"]),
    ("Добро пожаловать в Москву, welcome", ["Cyrillic"]),
    ("Welcome 東京駅へようこそ", ["Han", "Hiragana"]),  # a Han or kana character weighs three
    ("Καλημέρα σας, friends", ["Greek"]),
])
def test_text_mostly_in_another_script_is_refused_as_before(text: str,
                                                            scripts: list[str]) -> None:
    assert mostly_unspeakable(text, ENGLISH)
    problem = speech_problem(plain(text), "en_US-joe-medium", ENGLISH_VOICE)
    assert problem is not None
    assert problem.startswith("text is in " + " and ".join(f"{s} script" for s in scripts))


@pytest.mark.parametrize(("text", "left", "skipped"), [
    ("Welcome, 欢迎, to the city museum.", "Welcome, to the city museum.", ["欢迎"]),
    ("Café Ελλάδα is now open.", "Café is now open.", ["Ελλάδα"]),
    ("Здравствуйте! Welcome aboard.", "Welcome aboard.", ["Здравствуйте"]),
    ("Train to 東京 now", "Train to now", ["東京"]),
    # a lone Greek letter is a symbol espeak-ng names: it stays
    ("The value of π is 3.14.", "The value of π is 3.14.", []),
    ("Alpha: α-blockers at counter 2.", "Alpha: α-blockers at counter 2.", []),
    ("Dose 250 μg", "Dose 250 μg", []),
    # emoji are drop_symbols's, Latin with accents is the voice's own
    ("Party \U0001f389 time, Zürich", "Party \U0001f389 time, Zürich", []),
])
def test_skip_unspeakable(text: str, left: str, skipped: list[str]) -> None:
    assert skip_unspeakable(text, ENGLISH) == (left, skipped)
    assert skip_unspeakable(text, None) == (text, [])


def test_skipped_words_are_named_per_voice() -> None:
    document = Document((Speech(("Next: 欢迎 and Москва, all aboard now please",)),
                         Speech(("你好",), voice="zh-voice")))
    assert speech_problem(document, "en_US-joe-medium", VOICES) is None
    assert skipped_words(document, "en_US-joe-medium", VOICES) == ["欢迎", "Москва"]


def test_the_frontend_skips_words_of_scripts_its_voice_cannot_read() -> None:
    toy = {PAD: [0], BOS: [1], EOS: [2], " ": [3], ",": [4], ".": [5]}
    skipping = Frontend("en-us", toy, scripts=ENGLISH)
    reading = Frontend("en-us", toy)
    said = [c.phonemes for c in skipping.clauses("Welcome, 欢迎, to the museum.")]
    assert said == [c.phonemes for c in reading.clauses("Welcome, to the museum.")]
    assert said != [c.phonemes for c in reading.clauses("Welcome, 欢迎, to the museum.")]


def test_hostile_input_finishes_when_judged_and_skipped() -> None:
    text = ("a你б" * 20_000) + ("π " * 10_000)
    assert not mostly_unspeakable("abcdefgh" * 1000 + "你", ENGLISH)
    assert mostly_unspeakable(text, ENGLISH)
    left, skipped = skip_unspeakable(text, ENGLISH)
    assert len(skipped) == 20_000 and "你" not in left  # "你б": one run of two scripts
