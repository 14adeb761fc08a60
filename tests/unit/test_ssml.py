"""The SSML subset (agent.text.ssml): every element and attribute, what SSML for other engines
asks that is ignored with a warning, and every way markup is refused (malformed XML, unknown
elements and attributes, DTDs and entities, bounds)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent.mqtt.dispatch import speak_document, speak_request
from agent.mqtt.protocol import SpeakCommand
from agent.text.document import Document, Pause, Phonemes, Sound, Speech
from agent.text.normalize.say_as import say_as
from agent.text.ssml import (
    MAX_ATTRIBUTE_CHARS,
    MAX_DEPTH,
    MAX_ELEMENTS,
    MAX_TOTAL_PAUSE_S,
    MAX_WARNINGS,
    PARAGRAPH_PAUSE_S,
    RATES,
    SAY_AS,
    STRENGTHS,
    VOLUMES,
    SsmlError,
    looks_like_ssml,
    parse_ssml,
)

LIMIT = 5000


def parse(body: str, **kwargs: object) -> Document:
    return parse_ssml(f"<speak>{body}</speak>", max_chars=LIMIT, **kwargs)  # type: ignore[arg-type]


def refused(text: str, *, max_chars: int = 100_000, **kwargs: object) -> str:
    with pytest.raises(SsmlError) as caught:
        parse_ssml(text, max_chars=max_chars, **kwargs)  # type: ignore[arg-type]
    reason = str(caught.value)
    assert "\n" not in reason and len(reason) <= 400
    return reason


def speech(*pieces: str | Phonemes, **kwargs: object) -> Speech:
    return Speech(tuple(pieces), **kwargs)  # type: ignore[arg-type]


# -- elements ----------------------------------------------------------------------------------


def test_a_break_is_a_pause_of_its_time_between_the_words() -> None:
    document = parse('Hello <break time="1s"/> world')
    assert document.parts == (speech("Hello "), Pause(1.0), speech(" world"))


@pytest.mark.parametrize(("time", "seconds"), [
    ("500ms", 0.5), ("1s", 1.0), ("1.5s", 1.5), ("250 ms", 0.25), (".2s", 0.2), ("10s", 10.0),
    ("0ms", 0.0),
])
def test_break_times(time: str, seconds: float) -> None:
    parts = parse(f'a<break time="{time}"/>b').parts
    pauses = [p.seconds for p in parts if isinstance(p, Pause)]
    assert pauses == ([seconds] if seconds else [])


@pytest.mark.parametrize("strength", list(STRENGTHS))
def test_break_strengths(strength: str) -> None:
    parts = parse(f'a<break strength="{strength}"/>b').parts
    pauses = [p.seconds for p in parts if isinstance(p, Pause)]
    assert pauses == ([STRENGTHS[strength]] if STRENGTHS[strength] else [])


def test_a_bare_break_is_medium_and_time_wins_over_strength() -> None:
    assert parse("a<break/>b").parts[1] == Pause(STRENGTHS["medium"])
    assert parse('a<break strength="x-strong" time="200ms"/>b').parts[1] == Pause(0.2)


def test_sentences_end_with_a_stop_and_paragraphs_with_a_pause() -> None:
    document = parse("<p><s>One</s><s>Two!</s></p>\n  <p>Three</p>\n")
    assert document.parts == (speech("One. Two! "), Pause(PARAGRAPH_PAUSE_S),
                              speech("Three. "))


def words_of(document: Document) -> list[tuple[str, bool]]:
    """Each speech part's text with its whitespace collapsed, and whether it is verbatim."""
    return [(" ".join("".join(p for p in part.pieces if isinstance(p, str)).split()),
             part.verbatim) for part in document if isinstance(part, Speech)]


def test_say_as_is_said_in_words_within_its_sentence() -> None:
    document = parse('Code<say-as interpret-as="characters">AB12</say-as>now, '
                     '<say-as interpret-as="cardinal">1,234</say-as> left.')
    assert words_of(document) == [
        ("Code eh b one two now, one thousand two hundred thirty four left.", False)]
    assert say_as("characters", "AB12").split() == ["eh", "b", "one", "two"]


def test_say_as_words_the_normalizer_would_read_again_are_a_verbatim_stretch() -> None:
    document = parse('A <say-as interpret-as="characters">~</say-as> B')  # not "about"
    assert document.parts == (speech("A "), speech("~", verbatim=True), speech(" B"))


@pytest.mark.parametrize(("kind", "text", "format"), [
    ("characters", "USB", None), ("spell-out", "Kiosk", None), ("digits", "4711", None),
    ("cardinal", "1234", None), ("ordinal", "3", None), ("date", "2026-12-01", "ymd"),
    ("date", "12/01/2026", "mdy"), ("time", "7:15", None), ("telephone", "555-0123", None),
    ("currency", "$12.50", None),
])
def test_every_say_as(kind: str, text: str, format: str | None) -> None:
    attr = "" if format is None else f' format="{format}"'
    document = parse(f'<say-as interpret-as="{kind}"{attr}>{text}</say-as>')
    words = say_as(kind, text, format=format)
    assert words.strip() and not any(c.isdigit() for c in words), words
    assert words_of(document) == [(words, False)]


def test_say_as_of_text_that_is_not_what_it_says_is_refused() -> None:
    reason = refused('<speak><say-as interpret-as="cardinal">many</say-as></speak>')
    assert reason == "say-as cardinal: 'many' is not a number (<say-as> at line 1, column 7)"
    assert "is not a month" in refused(
        '<speak><say-as interpret-as="date" format="dmy">1/13/2026</say-as></speak>')
    assert "needs a non-empty interpret-as" in refused("<speak><say-as>1</say-as></speak>")
    assert set(SAY_AS) >= {"characters", "telephone", "currency"}


def test_sub_says_its_alias_in_the_sentence() -> None:
    document = parse('The <sub alias="World Wide Web Consortium">W3C</sub> '
                     '<sub alias="meets">mts</sub> today')
    assert document.parts == (speech("The World Wide Web Consortium meets today"),)


@pytest.mark.parametrize(("rate", "factor"), [
    *RATES.items(), ("80%", 0.8), ("+25%", 1.25), ("-50%", 0.5), ("1.5", 1.5), ("2", 2.0),
])
def test_prosody_rates(rate: str, factor: float) -> None:
    (part,) = parse(f'<prosody rate="{rate}">quick</prosody>').parts
    assert isinstance(part, Speech) and part.rate == pytest.approx(factor)


@pytest.mark.parametrize(("volume", "factor"), [
    *VOLUMES.items(), ("+6dB", 10 ** (6 / 20)), ("-6 dB", 10 ** (-6 / 20)), ("0dB", 1.0),
    ("50%", 0.5), ("+10%", 1.1), ("-25%", 0.75),
])
def test_prosody_volumes(volume: str, factor: float) -> None:
    (part,) = parse(f'<prosody volume="{volume}">loud</prosody>').parts
    assert isinstance(part, Speech) and part.volume == pytest.approx(factor)


def test_nested_prosody_multiplies_and_ends_with_its_element() -> None:
    document = parse('<prosody rate="slow" volume="soft">a <prosody rate="50%">b</prosody>'
                     "</prosody> c")
    assert document.parts == (speech("a ", rate=0.75, volume=0.5),
                              speech("b", rate=0.375, volume=0.5), speech(" c"))


def test_phoneme_is_ipa_given_as_it_is() -> None:
    document = parse('Say <phoneme alphabet="ipa" ph="təmˈɑːtoʊ">to mato</phoneme> twice')
    assert document.parts == (speech("Say ", Phonemes("təmˈɑːtoʊ", "to mato"), " twice"),)
    assert parse('<phoneme ph="hˈaɪ">hi</phoneme>').parts == (speech(Phonemes("hˈaɪ", "hi")),)


def test_voice_switches_the_voice_of_its_content() -> None:
    document = parse('Hi <voice name="en_GB-alan-low">there <voice name="b">you</voice></voice>')
    assert document.parts == (speech("Hi "), speech("there ", voice="en_GB-alan-low"),
                              speech("you", voice="b"))
    assert document.voices() == {None, "en_GB-alan-low", "b"}


def test_audio_plays_a_chime_and_its_content_is_the_fallback() -> None:
    assert parse('<audio src="ding">ding dong</audio>Doors closing').parts == (
        Sound("ding"), speech("Doors closing"))
    assert parse('<audio src="ding.wav"/>x', sounds={"ding"}).parts[0] == Sound("ding")
    assert parse('<audio src="gong">the gong</audio> now', sounds={"ding"}).parts == (
        speech("the gong now"),)
    assert refused('<speak><audio src="gong"/>x</speak>', sounds={"ding", "alert"}) == (
        "unknown chime 'gong' in <audio src> (line 1, column 7); chimes: alert, ding")


def test_an_unknown_chime_with_a_fallback_is_named_in_the_warnings() -> None:
    document = parse('<audio src="gong">the gong</audio> now', sounds={"ding"})
    assert document.warnings == ("ignored <audio src='gong'>: no such chime, its fallback spoken",)
    assert parse('<audio src="ding">ding dong</audio>x', sounds={"ding"}).warnings == ()


def test_ssml_namespace_version_and_language_are_accepted() -> None:
    text = ('<?xml version="1.0" encoding="UTF-8"?>\n<speak version="1.1" '
            'xmlns="http://www.w3.org/2001/10/synthesis" '
            'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
            'xsi:schemaLocation="http://www.w3.org/2001/10/synthesis synthesis.xsd" '
            'xml:lang="en-US"><p xml:lang="en">Hello <break time="300ms"/> again</p></speak>')
    assert parse_ssml(text, max_chars=LIMIT).parts == (speech("Hello "), Pause(0.3),
                                                        speech(" again. "))


def test_comments_processing_instructions_cdata_and_character_references() -> None:
    document = parse("a <!-- not said --><?x y?> <![CDATA[<b> & c]]> &amp; &#233;&lt;")
    assert document.parts == (speech("a  <b> & c & é<"),)


def test_whitespace_alone_is_no_speech_and_breaks_add_up_within_the_limit() -> None:
    assert parse(' <break time="10s"/>\n <break time="10s"/> ').parts == (Pause(10.0),
                                                                        Pause(10.0))
    assert "add up to more than 60 s" in refused(
        "<speak>" + '<break time="10s"/>' * 7 + "</speak>")


def test_looks_like_ssml() -> None:
    assert looks_like_ssml("<speak>x</speak>")
    assert looks_like_ssml('  \n<speak version="1.0">x</speak>')
    assert looks_like_ssml('<?xml version="1.0"?> <speak/>')
    assert looks_like_ssml('<!DOCTYPE lolz [<!ENTITY lol "lol">]><speak>&lol;</speak>')
    assert looks_like_ssml("<?xml?>")
    assert not looks_like_ssml("<speaker> says hi")
    assert not looks_like_ssml("<?xmlfoo")
    assert not looks_like_ssml("Say <speak>")
    assert not looks_like_ssml("plain text")


# -- SSML written for other engines: ignored with a warning, its text spoken ---------------------


def test_prosody_pitch_is_spoken_with_a_warning_not_refused() -> None:
    document = parse_ssml('<speak><prosody pitch="+10%">Gate B12 is now open.</prosody></speak>',
                          max_chars=LIMIT)
    assert document.parts == (speech("Gate B12 is now open."),)
    assert document.warnings == ("ignored <prosody pitch>",)


@pytest.mark.parametrize(("markup", "part", "warning"), [
    ('<prosody contour="(0%,+20Hz) (50%,+30Hz)">x</prosody>', speech("x"),
     "ignored <prosody contour>"),
    ('<prosody range="x-high" rate="slow">x</prosody>', speech("x", rate=0.75),
     "ignored <prosody range>"),
    ('<prosody duration="2s" volume="soft">x</prosody>', speech("x", volume=0.5),
     "ignored <prosody duration>"),
    ('<voice gender="female" age="30">x</voice>', speech("x"), "ignored <voice gender>"),
    ('<voice name="b" variant="2">x</voice>', speech("x", voice="b"), "ignored <voice variant>"),
    ('<say-as interpret-as="cardinal" detail="2">12</say-as>', speech(" twelve "),
     "ignored <say-as detail>"),
    ('<audio src="ding" clipBegin="1s">x</audio>', Sound("ding"), "ignored <audio clipBegin>"),
    ('<s onlangfailure="ignoretext">x</s>', speech("x. "), "ignored <s onlangfailure>"),
    ('<prosody amazon:max-duration="2s">x</prosody>', speech("x"),
     "ignored <prosody amazon:max-duration>"),
])
def test_attributes_it_cannot_honour_are_ignored_and_named(markup: str, part: Speech | Sound,
                                                         warning: str) -> None:
    document = parse(markup)
    assert document.parts == (part,)
    assert document.warnings[0] == warning


@pytest.mark.parametrize(("element", "warning"), [
    ('emphasis level="strong"', "ignored <emphasis>: spoken without emphasis"),
    ("emphasis", "ignored <emphasis>: spoken without emphasis"),
    ('lang xml:lang="fr-FR"', "ignored <lang>: spoken by the current voice"),
    ('token role="x"', "ignored <token>"), ("w", "ignored <w>"),
    ('lookup ref="dict"', "ignored <lookup>"),
])
def test_elements_it_cannot_render_are_spoken_in_their_sentence(element: str,
                                                                warning: str) -> None:
    tag = element.split(maxsplit=1)[0]
    document = parse(f"Please <{element}>do not</{tag}> leave bags.")
    assert document.parts == (speech("Please do not leave bags."),)
    assert document.warnings == (warning,)


def test_emphasis_of_level_none_asks_for_nothing_to_ignore() -> None:
    document = parse('a <emphasis level="none">b</emphasis>')
    assert document.parts == (speech("a b"),) and document.warnings == ()


@pytest.mark.parametrize("markup", [
    '<mark name="here"/>', "<desc>a bell</desc>", '<meta name="x" content="y"/>',
    '<metadata><rdf:RDF xmlns:rdf="urn:rdf">z</rdf:RDF></metadata>',
    '<lexicon uri="http://example.com/lex.pls" xml:id="lex"/>',
])
def test_marks_descriptions_and_metadata_are_not_spoken(markup: str) -> None:
    document = parse(f"Doors {markup}closing")
    assert document.parts == (speech("Doors closing"),)
    tag = re.match(r"<([a-z]+)", markup)
    assert tag is not None and document.warnings == (f"ignored <{tag[1]}>",)


def test_unknown_say_as_is_its_text_read_as_usual() -> None:
    document = parse('Load <say-as interpret-as="unit">10 kg</say-as> max')
    assert document.parts == (speech("Load 10 kg max"),)
    assert document.warnings == ("ignored <say-as interpret-as='unit'>: its text read as usual",)


def test_phonemes_in_another_alphabet_are_their_text() -> None:
    document = parse('Gate <phoneme alphabet="x-sampa" ph="bi: twElv">B12</phoneme> now')
    assert document.parts == (speech("Gate B12 now"),)
    assert document.warnings == ("ignored <phoneme alphabet='x-sampa'>: its text spoken",)


@pytest.mark.parametrize("src", ["https://example.com/a.mp3", "../../etc/passwd", "/tmp/x.wav",
                                 "a b", ".hidden", "s3://bucket/ding.wav"])
def test_audio_of_a_url_or_path_is_never_fetched_its_fallback_spoken(src: str) -> None:
    document = parse(f'<audio src="{src}">Ding.</audio> Doors closing.', sounds={"ding"})
    assert document.parts == (speech("Ding. Doors closing."),)
    assert document.warnings == (
        f"ignored <audio src={src!r}>: not a chime name, its fallback spoken",)
    bare = parse(f'<audio src="{src}"/>Doors closing.', sounds={"ding"})
    assert bare.parts == (speech("Doors closing."),)
    assert bare.warnings == (f"ignored <audio src={src!r}>: not a chime name, nothing in its "
                             "place",)


def test_amazon_elements_without_a_namespace_declaration_are_their_text() -> None:
    document = parse_ssml('<speak>Quiet <amazon:effect name="whispered">please</amazon:effect>.'
                          '<amazon:breath duration="long"/> <amazon:domain name="news">Now'
                          "</amazon:domain></speak>", max_chars=LIMIT)
    assert document.parts == (speech("Quiet please. Now"),)
    assert document.warnings == ("ignored <amazon:effect>", "ignored <amazon:breath>",
                                 "ignored <amazon:domain>")


def test_azure_ssml_is_spoken_and_what_it_asks_is_named() -> None:
    text = ('<speak version="1.0" xmlns="http://www.w3.org/2001/10/synthesis" '
            'xmlns:mstts="https://www.w3.org/2001/mstts" xml:lang="en-US">'
            '<voice name="b"><mstts:express-as style="cheerful" styledegree="2">'
            '<prosody rate="+20%" pitch="+5%">Welcome aboard!</prosody></mstts:express-as>'
            '<mstts:silence type="Sentenceboundary" value="200ms"/></voice></speak>')
    document = parse_ssml(text, max_chars=LIMIT)
    assert document.parts == (speech("Welcome aboard!", voice="b", rate=1.2),)
    assert document.warnings == ("ignored <mstts:express-as>", "ignored <prosody pitch>",
                                 "ignored <mstts:silence>")


def test_positions_stay_right_after_undeclared_prefixes_are_declared() -> None:
    assert refused("<speak>Hi <amazon:effect>x</amazon:effect> <b>y</speak>") == (
        "malformed SSML: mismatched tag: line 1, column 49")  # at </speak>, as written
    assert refused("<speak>Hi <amazon:effect>x</amazon:effect> <blink/></speak>").startswith(
        "SSML element <blink> is not supported (line 1, column 43)")


def test_warnings_are_each_said_once_and_bounded() -> None:
    document = parse("".join(f'<mark name="m{i}"/><v:e{i}>x</v:e{i}>' for i in range(40)))
    assert document.warnings[0] == "ignored <mark>"
    assert len(document.warnings) == MAX_WARNINGS
    assert document.warnings[-1] == f"and {40 - (MAX_WARNINGS - 2)} more ignored"


def test_warnings_survive_a_chime_first_and_leave_the_cache_key_alone() -> None:
    document = parse('<prosody pitch="low">x</prosody>')
    assert document.with_sound_first("ding").warnings == document.warnings
    assert repr(document) == repr(parse("x"))
    assert document != parse("x")


# -- refusals ----------------------------------------------------------------------------------


def test_malformed_xml_is_refused_with_the_parsers_line_and_column() -> None:
    assert refused("<speak>Hello <break time='1s'> world</speak>") == (
        "malformed SSML: mismatched tag: line 1, column 38")
    assert refused("<speak>a\n<b</speak>").startswith("malformed SSML: not well-formed")
    assert refused("<speak>&nbsp;</speak>") == "malformed SSML: undefined entity: line 1, column 7"
    assert refused("<speak>x</speak><speak>y</speak>").startswith(
        "malformed SSML: junk after document element")
    assert refused("<speak>") == "malformed SSML: no element found: line 1, column 7"


@pytest.mark.parametrize("element", ["audio-x", "b", "brake", "emphasiss"])
def test_an_unknown_element_is_refused_by_name(element: str) -> None:
    reason = refused(f"<speak>Hi <{element}>there</{element}></speak>")
    assert reason.startswith(f"SSML element <{element}> is not supported (line 1, column 10); "
                             "supported: speak, p, s, break, say-as, sub, prosody")


@pytest.mark.parametrize(("markup", "reason"), [
    ('<break time="1s" dur="2s"/>', "attribute dur of <break> is not supported"),
    ('<prosody pitchh="high">x</prosody>',
     "attribute pitchh of <prosody> is not supported (line 1, column 7); supported: rate, volume"),
    ('<foo xmlns="urn:x">y</foo>', "unsupported element 'foo' in namespace 'urn:x'"),
    ('<say-as interpret-as="date" detail="1">1</say-as>', "does not have the 3 parts of mdy"),
    ('<voice>x</voice>', "<voice> needs a non-empty name attribute"),
    ('<s foo="1">x</s>', "attribute foo of <s> is not supported"),
    ('<p><speak>x</speak></p>', "SSML element <speak> inside <speak> (line 1, column 10)"),
    ('<break time="20s"/>', "<break time='20s'> is longer than 10 s"),
    ('<break time="fast"/>', "<break time='fast'> is not a time such as 500ms or 1.5s"),
    ('<break strength="huge"/>', "<break strength='huge'> is not one of none, x-weak"),
    ("<break>x</break>", "<break> must be empty"),
    ('<sub alias="">x</sub>', "<sub> needs a non-empty alias attribute"),
    ('<sub alias="a"><break/></sub>', "<sub> holds text only, not <break>"),
    ("<phoneme>x</phoneme>", "<phoneme> needs a non-empty ph attribute"),
    ('<voice name="../x">y</voice>', "<voice name='../x'> is not a voice name"),
    ('<prosody rate="10%">x</prosody>', "makes the rate 0.1 times the request's, outside"),
    ('<prosody rate="-100%">x</prosody>', "<prosody rate='-100%'> must be above zero"),
    ('<prosody rate="warp">x</prosody>', "<prosody rate='warp'> is not a keyword"),
    ('<prosody volume="+20dB">x</prosody>', "makes the volume 10 times the request's, over 4"),
    ('<prosody volume="-150%">x</prosody>', "<prosody volume='-150%'> is not a keyword"),
])
def test_unsupported_attributes_and_bad_values_are_refused(markup: str, reason: str) -> None:
    assert reason in refused(f"<speak>{markup}</speak>")


def test_the_root_must_be_speak_and_say_something() -> None:
    assert refused("<p>x</p>") == "the root element must be <speak>, not <p>"
    assert refused("<speak> \n </speak>") == "SSML has nothing to speak"
    assert refused("<speak><!-- only --></speak>") == "SSML has nothing to speak"


def test_billion_laughs_is_refused_before_any_expansion() -> None:
    lol = "".join(f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">' for i in range(1, 10))
    payload = f'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol0 "lol">{lol}]>' \
              "<speak>&lol9;</speak>"
    assert refused(payload) == ("SSML must not have a document type declaration "
                                "(<!DOCTYPE lolz>): DTDs and entity declarations are refused")


def test_external_entities_and_any_dtd_are_refused() -> None:
    xxe = '<!DOCTYPE speak [<!ENTITY x SYSTEM "file:///etc/passwd">]><speak>&x;</speak>'
    assert "document type declaration (<!DOCTYPE speak>)" in refused(xxe)
    remote = '<!DOCTYPE speak SYSTEM "http://example.com/ssml.dtd"><speak>x</speak>'
    assert "document type declaration" in refused(remote)
    assert "document type declaration" in refused("<!DOCTYPE speak><speak>x</speak>")
    parameter = '<!DOCTYPE speak [<!ENTITY % p SYSTEM "http://example.com/p">%p;]><speak/>'
    assert "document type declaration" in refused(parameter)


def test_deep_nesting_many_elements_and_huge_attributes_are_refused() -> None:
    deep = "<speak>" + "<s>" * MAX_DEPTH + "x" + "</s>" * MAX_DEPTH + "</speak>"
    assert refused(deep).startswith(f"SSML nests deeper than {MAX_DEPTH} elements (line 1, ")
    ok = "<speak>" + "<s>" * (MAX_DEPTH - 1) + "x" + "</s>" * (MAX_DEPTH - 1) + "</speak>"
    assert parse_ssml(ok, max_chars=LIMIT).parts
    many = "<speak>" + "<s>a</s>" * MAX_ELEMENTS + "</speak>"
    assert refused(many).startswith(f"SSML has more than {MAX_ELEMENTS} elements (line 1, ")
    huge = f'<speak><sub alias="{"a" * (MAX_ATTRIBUTE_CHARS + 1)}">x</sub></speak>'
    assert refused(huge) == (f"attribute alias is longer than {MAX_ATTRIBUTE_CHARS} "
                             f"characters ({MAX_ATTRIBUTE_CHARS + 1}; line 1, column 7)")
    assert refused("<speak>" + "a" * 100 + "</speak>", max_chars=50) == (
        "SSML is longer than 50 characters (115)")


def test_a_long_value_in_a_reason_is_cut_to_one_bounded_line() -> None:
    reason = refused(f'<speak><break time="{"9" * 900}\n"/></speak>')
    assert reason.endswith("...") and len(reason) == 400


# -- requests ----------------------------------------------------------------------------------


def command(text: str, **fields: object) -> SpeakCommand:
    return SpeakCommand.model_validate({"text": text, **fields})


def test_a_speak_command_is_ssml_when_it_says_so_or_starts_with_speak() -> None:
    assert speak_document(command("Hello <b>")) is None
    assert speak_document(command("<speak>Hi</speak>")) == Document((speech("Hi"),))
    assert speak_document(command(" <speak>Hi</speak>", ssml=False)) is None
    request = speak_request(command('<speak>a<break time="1s"/>b</speak>'))
    assert request.document == Document((speech("a"), Pause(1.0), speech("b")))
    assert request.text == '<speak>a<break time="1s"/>b</speak>'
    with pytest.raises(SsmlError, match="malformed SSML: syntax error: line 1, column 0"):
        speak_request(command("Hello", ssml=True))
    with pytest.raises(SsmlError, match="unknown chime 'x'"):
        speak_request(command('<speak><audio src="x"/></speak>'), sounds=())


def test_the_page_gives_the_lengths_factors_and_bounds_of_the_code() -> None:
    page = (Path(__file__).parents[2] / "docs" / "text.md").read_text(encoding="utf-8")
    section = page.split("\n## SSML\n", 1)[1].split("\n## ", 1)[0]
    for table in (STRENGTHS, RATES, VOLUMES):
        for keyword, value in table.items():
            pattern = rf"`{keyword}`(?:/`[a-z-]+`)* {value:g}(?:\.0)?\b"
            assert re.search(pattern, section), (keyword, value)
    assert f"a pause of {PARAGRAPH_PAUSE_S:g} s" in section
    assert f"add up to at most {MAX_TOTAL_PAUSE_S:g} s" in section
    assert (f"at most {MAX_DEPTH} levels deep, {MAX_ELEMENTS} elements and "
            f"{MAX_ATTRIBUTE_CHARS} characters per attribute value") in section
    for kind in SAY_AS:
        assert f"`{kind}`" in section, kind


def test_a_journalled_request_replays_as_it_was_asked(tmp_path: Path) -> None:
    from agent.mqtt.publisher import EventPublisher
    from agent.mqtt.tracker import RequestTracker
    from agent.pipeline.jobs import SpeakJob
    from tests.unit.test_journal import DEV, Sent, journal_at, restart

    path = tmp_path / "requests.journal"
    journal = journal_at(path, replay=True)
    journal.load()
    tracker = RequestTracker(EventPublisher(Sent(), DEV), observer=journal)
    asked = {"ssml": speak_request(command('<speak>a<break time="1s"/>b</speak>')),
             "plain": speak_request(command("<speak>as it is</speak>", ssml=False))}
    for request_id, request in asked.items():
        assert tracker.open(request_id, "speak", subject=SpeakJob(request_id, request, None))
    _, jobs, _ = restart(path, replay=True)
    replayed = {job.request_id: job.request for job in jobs.take_all()}
    assert replayed == asked
    assert replayed["plain"].document is None


@pytest.mark.parametrize("body", [
    "a" * 99_000, "&amp;" * 19_000, "<!-- x -->" * 9_000, '<break time="1ms"/>' * 5_000,
    "<s>" * 20_000, "<speak " + " ".join(f'a{i}="x"' for i in range(9_000)) + ">",
    '<sub alias="' + "&#65;" * 19_000 + '">x</sub>', "<![CDATA[" + "]" * 90_000 + "]]>",
])
def test_hostile_documents_of_the_largest_size_are_read_or_refused(body: str) -> None:
    text = f"<speak>{body}</speak>"[:100_000]
    try:
        document = parse_ssml(text, max_chars=100_000)
    except SsmlError as exc:
        assert "\n" not in str(exc)
    else:
        assert document.parts
