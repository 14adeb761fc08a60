"""The normalizer's word passes (agent/text/normalize/: web, codes, abbreviations, initialisms,
roman, symbols): each rule in words, the whole normalizer on announcements, the clauses the
real espeak-ng makes of the result (one sentence for ``Dr. Smith``, a pause at an ellipsis),
and bounded work on hostile input."""

from __future__ import annotations

import pytest

from agent.text.espeak import EspeakPhonemizer
from agent.text.normalize import ORDER, NormalizeOptions, Normalizer
from agent.text.normalize.abbreviations import abbreviations
from agent.text.normalize.codes import codes
from agent.text.normalize.initialisms import initialisms, pronounceable
from agent.text.normalize.letters import announced_number, spell
from agent.text.normalize.roman import roman_numerals, roman_value
from agent.text.normalize.symbols import pauses, symbols
from agent.text.normalize.web import web_addresses

OPTIONS = NormalizeOptions()
NORMALIZE = Normalizer(OPTIONS)


@pytest.fixture(scope="module")
def espeak() -> EspeakPhonemizer:
    return EspeakPhonemizer("en-us")


def test_the_word_passes_run_in_the_normalizer() -> None:
    names = [step.__name__ for step in ORDER]
    for name in ("initialisms", "roman_numerals", "web_addresses", "codes", "abbreviations",
                 "symbols", "pauses"):
        assert name in names
    # capitals and numerals first (they need the text as written), addresses and codes before
    # any number, symbols and pauses after them all
    assert names.index("initialisms") < names.index("roman_numerals") < names.index("codes")
    assert names.index("codes") < names.index("cardinals")
    assert names.index("pauses") < names.index("cardinals") < names.index("symbols")


@pytest.mark.parametrize(("text", "said"), [
    ("USB", "u s b"), ("A4", "eh four"), ("ua", "u eh"), ("B-12", "b one two"),
])
def test_spell(text: str, said: str) -> None:
    assert spell(text) == said


@pytest.mark.parametrize(("number", "said"), [
    ("9", "nine"), ("12", "twelve"), ("123", "one twenty three"), ("105", "one oh five"),
    ("100", "one hundred"), ("1234", "twelve thirty four"), ("1200", "twelve hundred"),
    ("2000", "two thousand"), ("1005", "ten oh five"), ("007", "oh oh seven"),
    ("123456", "one two three four five six"),
])
def test_announced_numbers(number: str, said: str) -> None:
    assert announced_number(number) == said


def test_announced_number_refuses_what_is_not_a_number() -> None:
    with pytest.raises(ValueError, match="not a number"):
        announced_number("12a")


@pytest.mark.parametrize(("text", "said"), [
    ("Write to help@example.com today.", "Write to help at example dot com today."),
    ("www.example.com/info", "w w w dot example dot com slash info"),
    ("Visit www.example.com.", "Visit w w w dot example dot com."),
    ("See https://example.org/help now.", "See example dot org slash help now."),
    ("Go to bbc.co.uk now", "Go to b b c dot co dot u k now"),
    ("Mail first.last@my-shop.io", "Mail first dot last at my dash shop dot i o"),
    ("Try example.com:8080/a_b", "Try example dot com colon eight zero eight zero slash eh"
     " underscore b"),
    # not addresses
    ("Pi is 3.14, e.g. roughly.", "Pi is 3.14, e.g. roughly."),
    ("He arrived.It was late", "He arrived.It was late"),
    ("Meet @ noon", "Meet @ noon"),
])
def test_web_addresses(text: str, said: str) -> None:
    assert web_addresses(text, OPTIONS) == said


@pytest.mark.parametrize(("text", "said"), [
    ("Gate B12 is open.", "Gate b twelve is open."),
    ("Flight UA 1234 is boarding.", "Flight u eh twelve thirty four is boarding."),
    ("Flight UA1234 is boarding.", "Flight u eh twelve thirty four is boarding."),
    ("BA 287 to Paris", "b eh two eighty seven to Paris"),
    ("Platform 9B.", "Platform nine b."),
    ("Seat 14C please.", "Seat fourteen c please."),
    ("Row 12B, seat 12A", "Row twelve b, seat twelve eh"),
    ("A4 paper", "eh four paper"),
    ("Room #3", "Room number 3"),
    ("Room 101, please", "Room one oh one, please"),
    ("Flight 1234 to Denver", "Flight twelve thirty four to Denver"),
    ("Call Ext. 4021 or Apt. 305", "Call Ext. forty twenty one or Apt. three oh five"),
    ("Vitamin B12 and CO2", "Vitamin b twelve and c o two"),
    ("Gate A is open, Exit C", "Gate eh is open, Exit c"),
    # left for the numbers
    ("Platform 9", "Platform 9"),
    ("We seat 1500 guests.", "We seat 1500 guests."),
    ("Drive 5km, at 3pm, the 1st", "Drive 5km, at 3pm, the 1st"),
    ("A 2GB card", "A 2GB card"),
    ("ARRIVING AT 5 PM", "ARRIVING AT 5 PM"),
    ("Call 555-0123", "Call 555-0123"),
])
def test_codes(text: str, said: str) -> None:
    assert codes(text, OPTIONS) == said


@pytest.mark.parametrize(("text", "said"), [
    ("Dr. Smith to reception.", "doctor Smith to reception."),
    ("Mr. Jones, please.", "mister Jones, please."),
    ("Mrs. Brown and Ms. Green", "missus Brown and miz Green"),
    ("Prof. Lee speaks", "professor Lee speaks"),
    ("She lives at 12 Baker St.", "She lives at 12 Baker street."),
    ("12 Baker St. Trains leave", "12 Baker street. Trains leave"),
    ("12 Baker St is closed", "12 Baker street is closed"),
    ("Trains to St. Louis", "Trains to saint Louis"),
    ("St. Paul's is open", "saint Paul's is open"),
    ("Turn onto 5th Ave. now.", "Turn onto 5th avenue now."),
    ("Mulholland Dr. is closed", "Mulholland drive is closed"),
    ("Room No. 5 is free.", "Room number 5 is free."),
    ("Nos. 5 and 6", "numbers 5 and 6"),
    ("Bring food, e.g. fruit.", "Bring food, for example fruit."),
    ("Wait here, i.e. by the door.", "Wait here, that is by the door."),
    ("Apples, pears, etc. are sold.", "Apples, pears, et cetera are sold."),
    ("Apples, pears, etc.", "Apples, pears, et cetera."),
    ("Lakers vs. Celtics", "Lakers versus Celtics"),
    ("approx. 5 km", "approximately 5 km"),
    ("Wait 1 min or 2 hrs.", "Wait 1 minute or 2 hours."),
    ("Acme Inc. is open", "Acme incorporated is open"),
    ("See Fig. 3, max. 5 people", "See figure 3, maximum 5 people"),
    ("the U.S. team", "the u s team"),
    ("Made in the U.K.", "Made in the u k."),
    ("Open 9 a.m. daily", "Open 9 a.m. daily"),
    ("Say no. Then go", "Say no. Then go"),
    ("John F. Kennedy airport", "John F Kennedy airport"),
    ("Dr. J. Smith and Mrs. K. Lee", "doctor J Smith and missus K Lee"),
    ("Go to Gate B. Then wait.", "Go to Gate B. Then wait."),
    ("Plan A. Then rest.", "Plan A. Then rest."),
])
def test_abbreviations(text: str, said: str) -> None:
    assert abbreviations(text, OPTIONS) == said


@pytest.mark.parametrize(("text", "said"), [
    ("Use the ATM inside.", "Use the eh t m inside."),
    ("Plug in a USB cable.", "Plug in a u s b cable."),
    ("The FBI and the BBC", "The f b i and the b b c"),
    ("Two ATMs here", "Two eh t m's here"),
    ("Ask NASA, NATO or UNESCO", "Ask Nasa, Nato or Unesco"),
    ("Enter your PIN", "Enter your Pin"),
    ("A JPEG file", "A jay peg file"),
    ("The NHS and the TSA", "The n h s and the t s eh"),
    ("Do NOT enter, EXIT only", "Do Not enter, Exit only"),
    ("PLEASE STAND CLEAR OF THE DOORS", "Please Stand Clear Of The Doors"),
    ("NEW TRAINS ON TIME", "New Trains On Time"),
    ("PLEASE USE THE ATM", "Please Use The eh t m"),
    ("DR. SMITH TO RECEPTION", "Dr. Smith To Reception"),
    ("AT&T and R&D", "eh t and t and r and d"),
    ("Q&A session", "q and eh session"),
    ("IT support, the WHO, the US", "i t support, the w h o, the u s"),
    ("WHO IS IT FOR", "Who Is It For"),
    ("OK, use TCP/IP", "okay, use t c p/i p"),
    ("ETA 5 min, NYC-bound, COVID-19, 300 HP", "e t eh 5 min, n y c-bound, COVID-19, 300 HP"),
    # left for the later passes
    ("Henry VIII and World War II", "Henry VIII and World War II"),
    ("Flight UA 1234, 5 GB, USD 5", "Flight UA 1234, 5 GB, USD 5"),
    ("Visit WWW.EXAMPLE.COM now", "Visit WWW.EXAMPLE.COM now"),
    ("I am here", "I am here"),
])
def test_initialisms(text: str, said: str) -> None:
    assert initialisms(text, OPTIONS) == said


@pytest.mark.parametrize(("word", "said"), [
    ("NASA", True), ("LASER", True), ("STOP", True), ("WARNING", True), ("STRENGTH", True),
    ("NHS", False), ("TSA", False), ("ATM", False), ("HTML", False), ("NYPD", False),
    ("A", False), ("B2", False),
])
def test_pronounceable(word: str, said: bool) -> None:
    assert pronounceable(word) is said


@pytest.mark.parametrize(("numeral", "value"), [
    ("II", 2), ("IV", 4), ("VIII", 8), ("XIV", 14), ("XXXIX", 39), ("XC", 90), ("CCCXCIX", 399),
    ("IIII", None), ("IC", None), ("VV", None), ("MIX", None), ("DC", None), ("CIVIL", None),
    ("", None),
])
def test_roman_value(numeral: str, value: int | None) -> None:
    assert roman_value(numeral) == value


@pytest.mark.parametrize(("text", "said"), [
    ("Henry VIII was king.", "Henry the eighth was king."),
    ("Queen Elizabeth II visited.", "Queen Elizabeth the second visited."),
    ("Louis XIV's palace", "Louis the fourteenth's palace"),
    ("Pope John Paul II", "Pope John Paul the second"),
    ("Chapter IV begins.", "Chapter four begins."),
    ("World War II ended.", "World War two ended."),
    ("World War I ended.", "World War one ended."),
    ("Part III, Act V", "Part three, Act five"),
    ("Super Bowl LVIII", "Super Bowl fifty eight"),
    ("Queen Elizabeth I", "Queen Elizabeth the first"),
    ("CHAPTER IV", "CHAPTER four"),
    # not numerals
    ("Then Elizabeth I said no", "Then Elizabeth I said no"),
    ("I think I can", "I think I can"),
    ("MIX the CIVIL DC team", "MIX the CIVIL DC team"),
    ("Gate X is open, Size XL", "Gate X is open, Size XL"),
    ("The IV drip", "The IV drip"),
])
def test_roman_numerals(text: str, said: str) -> None:
    assert roman_numerals(text, OPTIONS) == said


@pytest.mark.parametrize(("text", "said"), [
    ("Tom & Jerry.", "Tom and Jerry."),
    ("Tom&Jerry", "Tom and Jerry"),
    ("Meet @ noon.", "Meet at noon."),
    ("Disney+ and 2 + 2 = 4", "Disney plus and 2 plus 2 equals 4"),
    ("C++ code", "C plus plus code"),
    ("#help", "hash help"),
    ("~five minutes", "about five minutes"),
    ("cash and/or card", "cash and or card"),
    ("yes/no", "yes or no"),
    ("tea w/ milk, w/o sugar", "tea with milk, without sugar"),
    ("Price: N/A", "Price: not applicable"),
    ("50 km/h", "50 km/h"),
])
def test_symbols(text: str, said: str) -> None:
    assert symbols(text, OPTIONS) == said


@pytest.mark.parametrize(("text", "said"), [
    ("Gate B12... boarding now", "Gate B12, boarding now"),
    ("Wait…now", "Wait, now"),
    ("Wait, ... now", "Wait, now"),
    ("Boston - New York", "Boston, New York"),
    ("Boston – New York", "Boston, New York"),
    ("Boston—New York", "Boston, New York"),
    ("Boston -- New York", "Boston, New York"),
    ("check-in and x-ray", "check-in and x-ray"),
    ("Open Mon–Fri, June - August", "Open Mon to Fri, June to August"),
    ("10 - 4 and 9–5", "10 - 4 and 9–5"),
    ("and then...", "and then..."),
    ("...and then", "...and then"),
])
def test_pauses(text: str, said: str) -> None:
    assert pauses(text, OPTIONS) == said


@pytest.mark.parametrize(("text", "said"), [
    ("Gate B12... boarding now", "Gate b twelve, boarding now"),
    ("Flight UA 1234 departs from Gate C7 at 7:15 pm.",
     "Flight u eh twelve thirty four departs from Gate c seven at seven fifteen p.m."),
    ("Dr. Smith, please come to Room #3.", "doctor Smith, please come to Room number three."),
    ("Room No. 5 is free.", "Room number five is free."),
    ("She lives at 12 Baker St.", "She lives at twelve Baker street."),
    ("Henry VIII & Elizabeth II", "Henry the eighth and Elizabeth the second"),
    ("Write to help@example.com, or call.", "Write to help at example dot com, or call."),
    ("THE 7:15 TO BOSTON IS DELAYED", "The seven fifteen To Boston Is Delayed"),
])
def test_the_normalizer_reads_announcements(text: str, said: str) -> None:
    assert NORMALIZE(text) == said


def _sentences(espeak: EspeakPhonemizer, text: str) -> int:
    clauses = espeak.clauses(text)
    # the last clause ends the text, sentence mark or not
    return sum(c.end_of_sentence for c in clauses[:-1]) + 1


@pytest.mark.parametrize("text", [
    "Dr. Smith to reception.", "Mr. Jones, please come forward.", "Mrs. Brown called.",
    "Trains to St. Louis leave now.", "Prof. Lee will speak.", "Bring food, e.g. fruit.",
    "Apples, pears, etc. are sold here.", "Lakers vs. Celtics tonight.",
    "Meet at 12 Baker St. by the door.", "Room No. 5 is free.", "Dr. J. Smith to desk four.",
    "Fly from John F. Kennedy airport.",
])
def test_an_abbreviation_does_not_end_the_sentence(espeak: EspeakPhonemizer, text: str) -> None:
    # espeak-ng alone makes two sentences of most of these (a falling tone inside the name)
    assert _sentences(espeak, NORMALIZE(text)) == 1


def test_a_street_at_the_end_still_ends_its_sentence(espeak: EspeakPhonemizer) -> None:
    assert _sentences(espeak, NORMALIZE("She lives at 12 Baker St. Trains stop there.")) == 2


@pytest.mark.parametrize("text", [
    "Gate B12... boarding now", "Gate B12 … boarding now", "Boston - New York",
    "Boston – New York", "Boston—New York",
])
def test_ellipses_and_dashes_pause(espeak: EspeakPhonemizer, text: str) -> None:
    clauses = espeak.clauses(NORMALIZE(text))
    assert len(clauses) == 2
    assert clauses[0].terminator == ","


def test_spelled_letters_are_letter_names(espeak: EspeakPhonemizer) -> None:
    # "A" before a word is the article for espeak-ng; the spelled "eh" is the letter
    assert espeak.clauses(NORMALIZE("Use the ATM now"))[0].phonemes == \
        espeak.clauses("Use the A- T M now")[0].phonemes
    gate = espeak.clauses(NORMALIZE("Gate A4 now"))[0].phonemes
    assert "ɐ" not in gate
    assert gate.split()[1] == "ˈeɪ"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("unit", [
    ".", "@", "A", "AB ", "A.", "a.b", "a@b.", "x@", "...a", " - ", "—", "Dr. ", "St. X ",
    "B12 ", "UA 1", "#", "&", "/", "www.", "a-", "I ", "VIII ", "Henry V ", "http://a",
    "e.g.", "U.S.", "12B", "ATMs ",
])
def test_hostile_input_finishes(unit: str) -> None:
    # 50 000 characters of one pattern: every regex is linear, so this ends (a catastrophic one
    # would not within the timeout)
    text = (unit * (50_000 // len(unit) + 1))[:50_000]
    for step in (initialisms, roman_numerals, web_addresses, codes, abbreviations, symbols,
                 pauses):
        assert isinstance(step(text, OPTIONS), str)
    assert isinstance(NORMALIZE(text), str)
