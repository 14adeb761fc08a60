"""The frontend's text stages (#16): pieces of text and given phonemes, the normalizer and the
lexicon (small fakes here: the real ones have their own tests), symbols, and the cache key.

espeak-ng is the real system library; the id map is the toy one of test_frontend plus the IPA
the texts need, or the real voice's where it is prepared.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.text.document import Phonemes, Piece
from agent.text.frontend import Frontend, TextError, given_phonemes

# every symbol espeak-ng's en-us IPA uses for these texts, one id each
IPA = "^$_ ,.?!:;'ˈˌːəɚɪʊʌɛæɑɔaeioubdfghjklmnprstvwzðθʃʒŋɹɾʔ" + "\u0303\u0329"
MAP: dict[str, list[int]] = {symbol: [number] for number, symbol in enumerate(IPA)}


def joined(sentences: list) -> list[str]:  # type: ignore[type-arg]
    return ["".join(s.phonemes) for s in sentences]


class Upper:
    """A fake normalizer: writes 'NUMBER' out as 'number one', keyed by a version."""

    def __init__(self, version: str = "1") -> None:
        self.key = f"fake/{version}"
        self.calls = 0

    def __call__(self, text: str) -> str:
        self.calls += 1
        return text.replace("NUMBER", "number one")


class Words:
    """A fake lexicon that can be swapped: word -> respelling or Phonemes."""

    def __init__(self, entries: dict[str, str | Phonemes], key: str) -> None:
        self.entries, self.key = entries, key

    def rewrite(self, text: str) -> list[Piece]:
        out: list[Piece] = []
        for word in text.split(" "):
            entry = self.entries.get(word.strip(".,"), word)
            tail = word[len(word.rstrip(".,")):]
            if isinstance(entry, Phonemes):
                out.extend([" ", entry, tail + " "])
            else:
                out.append((entry if entry is not word else word.rstrip(".,")) + tail + " ")
        return out


@pytest.fixture()
def frontend() -> Frontend:
    return Frontend("en-us", MAP)


def test_plain_text_as_pieces_is_the_same_text(frontend: Frontend) -> None:
    text = "Welcome to the station. Mind the gap!"
    assert frontend.sentences([text]) == frontend.sentences(text)
    # adjacent text pieces are one stretch for espeak-ng: no clause end at the seam
    assert frontend.sentences(["Welcome to ", "the station. Mind ", "the gap!"]) == \
        frontend.sentences(text)


def test_given_phonemes_join_the_sentence_they_stand_in(frontend: Frontend) -> None:
    sentences = frontend.sentences(["Welcome to ", Phonemes("wˈʊstɚ", "Worcester"),
                                    " station. Next stop."])
    assert [s.text for s in sentences] == ["Welcome to Worcester station.", "Next stop."]
    first = joined(sentences)[0]
    assert " wˈʊstɚ stˈeɪʃən." in first and first.startswith("wˈɛlkʌm t")
    assert frontend.ids(sentences[0]) == [MAP["^"][0], MAP["_"][0], *[
        i for p in sentences[0].phonemes for i in (MAP[p][0], MAP["_"][0])], MAP["$"][0]]


@pytest.mark.parametrize(("before", "word", "after"), [
    ("Welcome to ", "Worcester", " station."),
    ("This is a ", "test", "."),
    ("Change at ", "Worcester", ", then wait."),
    ("Hello. Trains for ", "London", " leave here."),
])
def test_given_phonemes_are_said_as_the_word_would_be(frontend: Frontend, before: str,
                                                      word: str, after: str) -> None:
    # the words around given phonemes get their forms inside a sentence ("to" tə, "a" ɐ), not
    # the ones at the end of a text (tuː, ˈeɪ): given espeak-ng's own phonemes for the word,
    # the sentence is exactly espeak-ng's sentence
    ipa = "".join(frontend.sentences(word)[0].phonemes)
    pieces = frontend.sentences([before, Phonemes(ipa, word), after])
    assert joined(pieces) == joined(frontend.sentences(before + word + after))
    assert [s.text for s in pieces] == [s.text for s in frontend.sentences(before + word + after)]


def test_punctuation_after_given_phonemes_ends_their_clause(frontend: Frontend) -> None:
    sentences = frontend.sentences(["Say ", Phonemes("tˈɛst", "test"), ". Then ",
                                    Phonemes("ðæt"), ", please"])
    assert [s.text for s in sentences] == ["Say test.", "Then ðæt, please"]
    assert joined(sentences)[0].endswith(" tˈɛst.")
    assert ", plˈiːz" in joined(sentences)[1]
    paused = frontend.sentences(["Gate ", Phonemes("bˈiː", "B"), "... boarding now."])
    assert joined(paused) == ["ɡˈeɪt bˈiː, bˈoːɹdɪŋ nˈaʊ."]  # an ellipsis is a pause
    only = frontend.sentences([Phonemes("tˈɛst", "test")])
    assert joined(only) == ["tˈɛst"]


def test_given_phonemes_are_nfd_like_espeak(frontend: Frontend) -> None:
    piece = Phonemes("n\u00e3", "nasal")  # precomposed a with tilde
    assert given_phonemes(piece, MAP) == "na\u0303"
    assert frontend.sentences([piece])[0].phonemes == ("n", "a", "\u0303")


@pytest.mark.parametrize(("ipa", "named"), [
    ("tQst", "'Q' (U+0051 LATIN CAPITAL LETTER Q)"),
    ("t\u0278st", "U+0278 LATIN SMALL LETTER PHI"),
])
def test_an_ipa_symbol_the_voice_lacks_is_named(frontend: Frontend, ipa: str,
                                                named: str) -> None:
    with pytest.raises(TextError, match="is not one this voice can say") as info:
        frontend.sentences(["Say ", Phonemes(ipa, "test"), "."])
    assert named in str(info.value) and "'test'" in str(info.value)


def test_limits_count_text_and_phonemes() -> None:
    small = Frontend("en-us", MAP, max_chars=10)
    small.sentences(["abc ", Phonemes("tˈɛst")])
    with pytest.raises(TextError, match="longer than 10"):
        small.sentences(["abcdef ", Phonemes("tˈɛstɪŋ")])
    with pytest.raises(TextError, match="empty"):
        small.sentences([" ", "\n"])


def test_the_normalizer_runs_unless_verbatim() -> None:
    normalizer = Upper()
    frontend = Frontend("en-us", MAP, normalizer=normalizer)
    said = joined(frontend.sentences("Press NUMBER."))
    assert said == joined(Frontend("en-us", MAP).sentences("Press number one."))
    verbatim = joined(frontend.sentences("Press NUMBER.", verbatim=True))
    assert verbatim != said
    assert frontend.text_key.startswith("normalizer=fake/1|")


def test_normalized_text_is_cached_with_the_normalizers_key() -> None:
    normalizer = Upper()
    frontend = Frontend("en-us", MAP, normalizer=normalizer)
    frontend.sentences("Press NUMBER.")
    frontend.sentences("Press NUMBER.")
    assert normalizer.calls == 1  # the second came from the LRU
    frontend.sentences("Press NUMBER.", verbatim=True)  # another entry: not normalised
    assert frontend.cache_info()["size"] == 2


def test_a_swapped_lexicon_is_never_served_stale() -> None:
    lexicon = Words({"Worcester": "Wooster"}, key="lexicon/1")
    frontend = Frontend("en-us", MAP, lexicon=lexicon)
    before = joined(frontend.sentences("Change at Worcester."))
    assert before == joined(Frontend("en-us", MAP).sentences("Change at Wooster."))
    lexicon.entries, lexicon.key = {"Worcester": Phonemes("wˈɪstɚ", "Worcester")}, "lexicon/2"
    after = frontend.sentences("Change at Worcester.")
    assert joined(after)[0].endswith(" wˈɪstɚ.") and joined(after) != before
    assert "lexicon=lexicon/2" in frontend.text_key


def test_the_lexicons_phonemes_are_checked_too() -> None:
    frontend = Frontend("en-us", MAP, lexicon=Words({"Zed": Phonemes("Qed")}, key="k"))
    with pytest.raises(TextError, match="'Q'"):
        frontend.sentences("Zed.")


def test_symbols_without_a_reading_are_dropped_when_asked() -> None:
    dropping = Frontend("en-us", MAP, drop_symbols=True)
    naming = Frontend("en-us", MAP)
    assert joined(dropping.sentences("Party \U0001f389 time!")) == \
        joined(naming.sentences("Party time!"))
    assert len(joined(naming.sentences("Party \U0001f389 time!"))[0]) > \
        len(joined(dropping.sentences("Party \U0001f389 time!"))[0])  # espeak-ng names it
    with pytest.raises(TextError, match="nothing to speak"):
        dropping.sentences("\U0001f389\U0001f44d\U0001f3fd")
    assert dropping.text_key.endswith("symbols=drop")
    assert naming.text_key.endswith("symbols=keep")


@pytest.mark.voice
def test_pieces_with_the_real_voices_id_map(real_voice_dir: Path) -> None:
    config = json.loads(next(real_voice_dir.glob("*.onnx.json")).read_text(encoding="utf-8"))
    frontend = Frontend("en-us", config["phoneme_id_map"])
    sentences = frontend.sentences(["Change at ", Phonemes("wˈʊstɚ", "Worcester"), "."])
    assert joined(sentences) == ["tʃˈeɪndʒ æt wˈʊstɚ."]
    assert all(isinstance(i, int) for i in frontend.ids(sentences[0]))
