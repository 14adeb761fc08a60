"""The device lexicon: its file format, every refusal, matching, hostile sizes, the holder."""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

import pytest

from agent.library.lexicon import LexiconHolder, voice_symbols
from agent.text.document import Phonemes
from agent.text.lexicon import Lexicon, LexiconError
from agent.text.lexicon_file import (
    MAX_ENTRIES,
    MAX_FILE_BYTES,
    MAX_KEY_CHARS,
    MAX_KEY_WORDS,
    MAX_VALUE_CHARS,
    load_lexicon,
    parse_lexicon,
    read_lexicon_file,
)

EXAMPLE = """\
version = 1

[words]
"Nguyen" = "win"
"Worcester" = { ipa = "wˈʊstɚ" }
"St Pancras" = "saint pancras"
"St" = "street"
"US" = { text = "U S", case_sensitive = true }
"Straße" = "strasse"
"""


def lexicon(text: str = EXAMPLE, **kwargs: object) -> Lexicon:
    return parse_lexicon(text.encode(), "test.toml", **kwargs)  # type: ignore[arg-type]


def problems(text: str | bytes, **kwargs: object) -> list[str]:
    raw = text if isinstance(text, bytes) else text.encode()
    with pytest.raises(LexiconError) as caught:
        parse_lexicon(raw, "test.toml", **kwargs)  # type: ignore[arg-type]
    assert "\n" not in str(caught.value)
    return caught.value.problems


def words(*lines: str) -> str:
    return "version = 1\n[words]\n" + "\n".join(lines) + "\n"


# -- format ---------------------------------------------------------------------------------


def test_toml_respellings_and_ipa() -> None:
    lex = lexicon()
    assert len(lex) == 6
    assert lex.rewrite("Ask Nguyen at Worcester.") == [
        "Ask win at ", Phonemes("wˈʊstɚ", text="Worcester"), "."]


def test_json_file_reads_the_same(tmp_path: Path) -> None:
    path = tmp_path / "lexicon.json"
    path.write_text(json.dumps({"version": 1, "words": {
        "Nguyen": "win", "Worcester": {"ipa": "wˈʊstɚ"}}}), encoding="utf-8")
    lex = load_lexicon(path)
    assert lex.rewrite("Nguyen, Worcester") == ["win, ", Phonemes("wˈʊstɚ", text="Worcester")]


def test_key_is_the_version_and_the_files_sha256() -> None:
    import hashlib

    lex = lexicon()
    assert lex.key == f"lexicon/v1/{hashlib.sha256(EXAMPLE.encode()).hexdigest()}"
    assert lexicon(EXAMPLE + "\n# a comment\n").key != lex.key
    assert Lexicon().key == "" and lexicon("version = 1\n").key == ""


def test_default_case_sensitivity_and_per_entry_override() -> None:
    lex = lexicon("version = 1\ncase_sensitive = true\n[words]\n"
                  '"Reading" = "redding"\n"ave" = { text = "avenue", case_sensitive = false }\n')
    assert lex.rewrite("Reading reading AVE") == ["redding reading avenue"]


def test_a_utf8_byte_order_mark_is_accepted() -> None:
    assert lexicon("\ufeff" + EXAMPLE).rewrite("Nguyen") == ["win"]


# -- every refusal --------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "reason"), [
    ("version = 2\n", "version 2 is not supported (this agent reads version 1)"),
    ('version = "1"\n', "version '1' is not supported"),
    ("version = true\n", "version True is not supported"),
    ("[words]\n", "no version (add version = 1 at the top)"),
    ("version = 1\nvoice = 'x'\n", "unknown top-level key 'voice'"),
    ("version = 1\ncase_sensitive = 'yes'\n", "case_sensitive must be true or false"),
    ("version = 1\nwords = 3\n", "words must be a table"),
    ('version = 1\n[words]\n"a" = \n', "not valid TOML: Invalid value (at line 3, column 7)"),
    (b"version = 1\n\xff\n", "not UTF-8 text (byte 12)"),
])
def test_file_level_refusals(text: str | bytes, reason: str) -> None:
    assert reason in problems(text)[0]


@pytest.mark.parametrize(("line", "reason"), [
    ('"" = "x"', "entry '' (line 3): the word is empty"),
    ('"  " = "x"', "entry '  ' (line 3): the word is empty"),
    ('"a\\u0007b" = "x"', "the word holds a control character"),
    ('"..." = "x"', "entry '...' (line 3): the word holds no letter or digit"),
    ('"a" = ""', "entry 'a' (line 3): respelling is empty"),
    ('"a" = "x\\ty"', None),
    ('"a" = "x\\u0000"', "respelling holds a control character"),
    ('"a" = { ipa = "" }', "ipa is empty"),
    ('"a" = { ipa = "a^" }', "ipa holds '^', which marks sentences and padding"),
    ('"a" = { ipa = "a_b" }', "ipa holds '_'"),
    ('"a" = 3', "entry 'a' (line 3): must be a respelling (\"win\") or a table with text or ipa"),
    ('"a" = { text = "x", ipa = "y" }', "give exactly one of text and ipa"),
    ('"a" = { case_sensitive = true }', "give exactly one of text and ipa"),
    ('"a" = { text = 3 }', "text must be a string"),
    ('"a" = { ipa = 3 }', "ipa must be a string"),
    ('"a" = { text = "x", case_sensitive = "no" }', "case_sensitive must be true or false"),
    ('"a" = { text = "x", voice = "y" }', "unknown field 'voice'"),
    ('St.Pancras = "x"', "a word with a dot must be quoted"),
])
def test_entry_refusals_name_the_entry_and_line(line: str, reason: str | None) -> None:
    if reason is None:  # a tab in a respelling is whitespace, collapsed
        assert lexicon(words(line)).rewrite("a") == ["x y"]
        return
    assert reason in problems(words(line))[0]


def test_lengths_are_bounded() -> None:
    longest = "a" * MAX_KEY_CHARS
    assert len(lexicon(words(f'"{longest}" = "x"'))) == 1
    assert "longer than 100 characters" in problems(words(f'"{longest}a" = "x"'))[0]
    value = "b" * MAX_VALUE_CHARS
    assert len(lexicon(words(f'"a" = "{value}"'))) == 1
    assert "respelling is longer than 200" in problems(words(f'"a" = "{value}b"'))[0]
    assert "ipa is longer than 200" in problems(words(f'"a" = {{ ipa = "{value}b" }}'))[0]
    phrase = " ".join(["a"] * MAX_KEY_WORDS)
    assert len(lexicon(words(f'"{phrase}" = "x"'))) == 1
    assert "the phrase has more than 12 words" in problems(words(f'"{phrase} b" = "x"'))[0]
    assert "more than 12 words" in problems(words(f'"{"." * 12}a" = "x"'))[0]  # marks count


def test_duplicates_are_refused_case_folded() -> None:
    found = problems(words('"Nguyen" = "win"', '"nguyen" = "win"', '"NGUYEN " = "win"'))
    assert found[0] == ("entry 'nguyen' (line 4) repeats 'Nguyen' (keys are compared "
                        "case-folded unless both are case_sensitive)")
    assert len(found) == 2
    assert "given twice" in problems(b'{"version": 1, "words": {"a": "b", "a": "c"}}',
                                     json_format=True)[0]
    assert "Cannot overwrite a value" in problems(words('"a" = "b"', '"a" = "c"'))[0]
    # Two case-sensitive spellings are two entries (they never match the same text).
    both = lexicon(words('"US" = { text = "U S", case_sensitive = true }',
                         '"Us" = { text = "uss", case_sensitive = true }'))
    assert both.rewrite("US Us us") == ["U S uss us"]
    assert problems(words('"US" = { text = "U S", case_sensitive = true }', '"us" = "x"'))


def test_every_problem_is_listed_up_to_ten() -> None:
    with pytest.raises(LexiconError) as caught:
        parse_lexicon(words(*[f'"w{i}" = ""' for i in range(15)]).encode(), "f.toml")
    assert len(caught.value.problems) == 10 and caught.value.total == 15
    assert str(caught.value) == "f.toml: entry 'w0' (line 3): respelling is empty (and 14 more)"


def test_ipa_symbols_are_checked_against_the_voice() -> None:
    known = frozenset("wˈʊstɚ ")
    assert len(lexicon(words('"W" = { ipa = "wˈʊstɚ" }'), symbols=known)) == 1
    assert problems(words('"W" = { ipa = "wˈʊQ" }'), symbols=known,
                    symbols_from="voice en_US-joe-medium")[0] == (
        "entry 'W' (line 3): IPA symbol 'Q' (U+0051) is not one voice en_US-joe-medium can say")


def test_voice_symbols_come_from_the_voices_id_map(tiny_models_dir: Path) -> None:
    name = next(p.name for p in tiny_models_dir.iterdir() if p.is_dir())
    found = voice_symbols(tiny_models_dir, name)
    assert found is not None and "a" in found[0] and found[1] == f"voice {name}"
    assert voice_symbols(tiny_models_dir, "not-installed") is None


def test_hostile_sizes_are_refused_before_parsing(tmp_path: Path) -> None:
    big = tmp_path / "big.toml"
    big.write_bytes(b"version = 1\n#" + b"x" * MAX_FILE_BYTES)
    with pytest.raises(LexiconError, match=f"larger than {MAX_FILE_BYTES} bytes"):
        read_lexicon_file(big)
    assert "larger than" in problems(b"#" * (MAX_FILE_BYTES + 1))[0]
    many = words(*[f'"w{i}" = "x"' for i in range(MAX_ENTRIES + 1)])
    assert problems(many) == [f"{MAX_ENTRIES + 1} entries, more than {MAX_ENTRIES}"]


@pytest.mark.parametrize(("raw", "json_format"), [
    (b"[" * 200_000, True),
    (b"version = 1\nx = " + b"[" * 200_000, False),
    (b"version = 1\nx = " + b"{a=" * 100_000, False),
])
def test_deep_nesting_is_a_reason_not_a_crash(raw: bytes, json_format: bool) -> None:
    assert problems(raw, json_format=json_format) == [
        "nested too deeply (a lexicon is one table of words)"]


def test_only_a_regular_file_is_read(tmp_path: Path) -> None:
    real = tmp_path / "real.toml"
    real.write_text(EXAMPLE, encoding="utf-8")
    link = tmp_path / "link.toml"
    link.symlink_to(real)
    with pytest.raises(LexiconError, match="a symbolic link"):
        read_lexicon_file(link)
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    with pytest.raises(LexiconError, match="a FIFO, not a regular file"):
        read_lexicon_file(fifo)  # never waits for a writer
    with pytest.raises(LexiconError, match="a directory, not a regular file"):
        read_lexicon_file(tmp_path)
    with pytest.raises(LexiconError, match="No such file"):
        read_lexicon_file(tmp_path / "missing.toml")
    assert read_lexicon_file(real) == EXAMPLE.encode()


# -- matching -------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("Nguyen", "win"),
    ("Nguyen's car", "win's car"),
    ("(Nguyen)", "(win)"),
    ("Nguyenx Xnguyen", "Nguyenx Xnguyen"),  # never inside a word
    ("nguyen NGUYEN", "win win"),  # case-insensitive by default
    ("St Pancras and St. Albans", "saint pancras and street. Albans"),  # longest first
    ("St   Pancras", "saint pancras"),  # a run of spaces is one space
    ("St Pancrass", "street Pancrass"),
    ("US us", "U S us"),  # case-sensitive entry
    ("Straße STRASSE", "strasse strasse"),  # Unicode case folding
    ("Nguyen-Nguyen", "win-win"),
    ("Nguyen\u0301", "Nguyen\u0301"),  # a combining mark is part of the word
])
def test_rewrite_whole_words_longest_first(text: str, expected: str) -> None:
    assert lexicon().rewrite(text) == [expected]


def test_phonemes_pieces_split_the_text() -> None:
    lex = lexicon(words('"Worcester" = { ipa = "wˈʊstɚ" }', '"Nguyen" = "win"'))
    assert lex.rewrite("Worcester") == [Phonemes("wˈʊstɚ", text="Worcester")]
    assert lex.rewrite("worcester Worcester, Nguyen") == [
        Phonemes("wˈʊstɚ", text="worcester"), " ", Phonemes("wˈʊstɚ", text="Worcester"),
        ", win"]
    assert lex.rewrite("Worcestershire") == ["Worcestershire"]
    assert lex.rewrite("") == [] and Lexicon().rewrite("") == []
    assert Lexicon().rewrite("Nguyen") == ["Nguyen"]


def test_respellings_are_not_matched_again() -> None:
    lex = lexicon(words('"a" = "b"', '"b" = "c"'))
    assert lex.rewrite("a b") == ["b c"]


def test_hostile_text_against_a_full_lexicon_is_linear() -> None:
    keys = [f'"{"a " * (MAX_KEY_WORDS - 1)}w{i}" = "x"' for i in range(MAX_ENTRIES)]
    lex = lexicon(words(*keys))
    text = "a " * 10_000  # every word starts a key: each is looked up as far as the longest
    done = threading.Event()
    result: list[object] = []

    def run() -> None:
        result.append(lex.rewrite(text))
        done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(120), "rewrite did not finish"
    assert result == [[text]]
    assert lex.rewrite("a " * (MAX_KEY_WORDS - 1) + "w17 end") == ["x end"]


def test_a_refused_file_with_many_problems_is_reported_quickly() -> None:
    done = threading.Event()
    found: list[LexiconError] = []

    def run() -> None:
        try:
            parse_lexicon(words(*[f'"w{i}" = ""' for i in range(MAX_ENTRIES)]).encode(), "f")
        except LexiconError as exc:
            found.append(exc)
        done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(120), "the checks did not finish"
    assert found[0].total == MAX_ENTRIES and len(found[0].problems) == 10


# -- the holder -----------------------------------------------------------------------------


def test_holder_swaps_keeps_the_old_on_errors_and_reports(tmp_path: Path) -> None:
    path = tmp_path / "lexicon.toml"
    path.write_text(words('"Nguyen" = "win"'), encoding="utf-8")
    holder = LexiconHolder(path)
    assert holder.key == "" and holder.rewrite("Nguyen") == ["Nguyen"]
    assert holder.reload() == "loaded"
    first = holder.key
    assert holder.rewrite("Nguyen") == ["win"] and first
    assert holder.reload() == "unchanged" and holder.key == first
    status = holder.status()
    assert status["loaded"] and status["entries"] == 1 and status["state"] == "ok"
    assert status["sha256"] == holder.current.sha256[:12] and status["last_error"] is None

    path.write_text(words('"Nguyen" = "wi'), encoding="utf-8")  # half written
    assert holder.reload() == "rejected"
    assert holder.key == first and holder.rewrite("Nguyen") == ["win"]
    status = holder.status()
    assert status["state"] == "degraded" and "not valid TOML" in str(status["reason"])

    path.write_text(words('"Nguyen" = "nuh win"'), encoding="utf-8")
    assert holder.reload() == "loaded"
    assert holder.key not in ("", first) and holder.rewrite("Nguyen") == ["nuh win"]
    assert holder.status()["last_error"] is None

    path.unlink()
    assert holder.reload() == "rejected" and holder.rewrite("Nguyen") == ["nuh win"]


def test_holder_checks_ipa_against_the_default_voice(tiny_models_dir: Path,
                                                     tmp_path: Path) -> None:
    voice = next(p.name for p in tiny_models_dir.iterdir() if p.is_dir())
    path = tmp_path / "lexicon.toml"
    path.write_text(words('"W" = { ipa = "ʘ" }'), encoding="utf-8")
    holder = LexiconHolder(path, tiny_models_dir, voice)
    assert holder.reload() == "rejected"
    assert f"is not one voice {voice} can say" in str(holder.last_error)
    assert not holder.status()["loaded"]


def test_holder_for_settings_loads_at_once(tmp_path: Path) -> None:
    from agent.settings import ModelSettings, Settings, TextSettings

    path = tmp_path / "lexicon.toml"
    shutil.copyfile(Path(__file__), tmp_path / "not-a-lexicon.toml")
    path.write_text(words('"Nguyen" = "win"'), encoding="utf-8")
    settings = Settings(models=ModelSettings(dir=tmp_path / "models"),
                        text=TextSettings(lexicon=path))
    holder = LexiconHolder.for_settings(settings)
    assert holder is not None and holder.rewrite("Nguyen") == ["win"]
    assert LexiconHolder.for_settings(Settings(models=ModelSettings(dir=tmp_path))) is None
    bad = Settings(models=ModelSettings(dir=tmp_path),
                   text=TextSettings(lexicon=tmp_path / "not-a-lexicon.toml"))
    refused = LexiconHolder.for_settings(bad)
    assert refused is not None and refused.key == "" and refused.status()["state"] == "degraded"


@pytest.mark.parametrize("polling", [False, True])
def test_the_watcher_reloads_once_the_file_is_quiet(tmp_path: Path, polling: bool) -> None:
    from agent.library.lexicon import LexiconWatcher

    path = tmp_path / "lexicon.toml"
    path.write_text(words('"Nguyen" = "win"'), encoding="utf-8")
    holder = LexiconHolder(path)
    holder.reload()
    watcher = LexiconWatcher(holder, debounce_s=0.1, polling=polling, poll_interval_s=0.1)
    watcher.start()
    try:
        (tmp_path / "other.toml").write_text("not a lexicon", encoding="utf-8")
        temporary = tmp_path / ".lexicon.toml.tmp"
        temporary.write_text(words('"Nguyen" = "nuh win"'), encoding="utf-8")
        os.replace(temporary, path)
        pause = threading.Event()
        for _ in range(600):
            if holder.rewrite("Nguyen") == ["nuh win"]:
                break
            pause.wait(0.05)
        assert holder.rewrite("Nguyen") == ["nuh win"]
        assert holder.status()["last_error"] is None
    finally:
        watcher.stop()
