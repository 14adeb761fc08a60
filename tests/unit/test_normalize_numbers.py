"""The normalizer's numeric passes (agent/text/normalize/): each category in words, the options,
the key, the languages, and bounded work on hostile input."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent.text.normalize import RULES_DIGEST, NormalizeOptions, Normalizer, rules_digest, spoken
from agent.text.normalize.say_as import say_as

MDY = Normalizer(NormalizeOptions())
DMY = Normalizer(NormalizeOptions(date_order="dmy"))
YMD = Normalizer(NormalizeOptions(date_order="ymd"))


@pytest.mark.parametrize(("text", "said"), [
    # cardinals and decimals
    ("There are 1,250 seats.", "There are one thousand two hundred fifty seats."),
    ("Population 3,400,000.", "Population three million four hundred thousand."),
    ("Bus 7 leaves.", "Bus seven leaves."),
    ("Pi is 3.14.", "Pi is three point one four."),
    ("Rainfall of 0.25 inches.", "Rainfall of zero point two five inches."),
    ("A drop of .5 points.", "A drop of point five points."),
    ("It was -3 outside.", "It was minus three outside."),
    ("Agent 007.", "Agent zero zero seven."),
    # ordinals
    ("Take the 1st exit.", "Take the first exit."),
    ("She finished 2nd, he 3rd.", "She finished second, he third."),
    ("Our 21st sale, the 100th guest.", "Our twenty first sale, the one hundredth guest."),
    # money
    ("Tickets are $12.50 each.", "Tickets are twelve dollars and fifty cents each."),
    ("A coffee costs $3.", "A coffee costs three dollars."),
    ("Only $1.", "Only one dollar."),
    ("Entry is €40.", "Entry is forty euros."),
    ("It costs 5 €.", "It costs five euros."),
    ("Lunch is £7.99 today.", "Lunch is seven pounds and ninety nine pence today."),
    ("Just 50p.", "Just fifty pence."),
    ("Only 99¢ a cup.", "Only ninety nine cents a cup."),
    ("Parking is $0.50.", "Parking is fifty cents."),
    ("Fine of $1,000.", "Fine of one thousand dollars."),
    ("Pay USD 5 or 5 EUR.", "Pay five dollars or five euros."),
    ("A $1.5 million grant.", "A one point five million dollar grant."),
    ("Tea for ¥500.", "Tea for five hundred yen."),
    ("A $3B deal, a $10K prize.", "A three billion dollar deal, a ten thousand dollar prize."),
    ("Get a $5 meal for $5.", "Get a five dollar meal for five dollars."),
    ("A pizza $5 meal deal.", "A pizza five dollars meal deal."),
    # times
    ("The 7:15 train.", "The seven fifteen train."),
    ("Boarding at 18:45.", "Boarding at eighteen forty five."),
    ("Departs 19:05 today.", "Departs nineteen oh five today."),
    ("Doors open at 9:30 am today.", "Doors open at nine thirty a.m today."),
    ("Closing at 5 pm.", "Closing at five p.m."),
    ("Open 5pm to 11PM daily.", "Open five p.m to eleven p.m daily."),
    ("The last bus is at 12:05 a.m.", "The last bus is at twelve oh five a.m."),
    ("We start at 08:00.", "We start at eight o'clock."),
    ("Curfew 22:00.", "Curfew twenty two hundred."),
    ("Closed at 00:00.", "Closed at midnight."),
    ("Meet at 12:00 noon.", "Meet at twelve noon."),
    ("The 1445 to Leeds departs at 0905.",
     "The fourteen forty five to Leeds departs at oh nine oh five."),
    ("Arrival 1400, briefing 1430 hrs.",
     "Arrival fourteen hundred, briefing fourteen thirty hours."),
    ("From 2000 to 2010.", "From two thousand to twenty ten."),
    # dates
    ("Valid until 2026-12-01.", "Valid until December first twenty twenty six."),
    ("The fair opens March 3rd.", "The fair opens March third."),
    ("Starts 2026-12-01T09:30:15.", "Starts December first twenty twenty six at nine thirty."),
    ("Closed on Jan. 1.", "Closed on January first."),
    ("See you on 4 July 2026.", "See you on the fourth of July twenty twenty six."),
    ("Due 12/25/2026.", "Due December twenty fifth twenty twenty six."),
    ("Closed on 3/12.", "Closed on March twelfth."),
    ("Opens May 5, 2026.", "Opens May fifth twenty twenty six."),
    # years and decades
    ("Built in 1999.", "Built in nineteen ninety nine."),
    ("Since 2008.", "Since two thousand eight."),
    ("Founded in 1850.", "Founded in eighteen fifty."),
    ("Open since 2026.", "Open since twenty twenty six."),
    ("Rebuilt in 1905.", "Rebuilt in nineteen oh five."),
    ("In the 1990s.", "In the nineteen nineties."),
    ("Hits of the '80s.", "Hits of the eighties."),
    ("We seat 1500 guests.", "We seat one thousand five hundred guests."),
    ("The 2026 season starts.", "The twenty twenty six season starts."),
    ("The 2026 guests left.", "The two thousand twenty six guests left."),
    ("Reopens in March 2027.", "Reopens in March twenty twenty seven."),
    ("Valid until Dec. 2026.", "Valid until December twenty twenty six."),
    # phone numbers
    ("Call 555-0123 for help.", "Call five five five, oh one two three for help."),
    ("Call (415) 555-0123.", "Call four one five, five five five, oh one two three."),
    ("Call +1 415 555 0123.", "Call plus one, four one five, five five five, oh one two three."),
    ("Dial 911 now.", "Dial nine one one now."),
    ("In an emergency dial 112 or 999.", "In an emergency dial one one two or nine nine nine."),
    # ranges and scores
    ("Wait 10–15 minutes.", "Wait ten to fifteen minutes."),
    ("Open 9-5 daily.", "Open nine to five daily."),
    ("The final score was 3-2.", "The final score was three to two."),
    ("Open 2024–2026.", "Open twenty twenty four to twenty twenty six."),
    ("Save 10-15% now.", "Save ten to fifteen percent now."),
    # fractions and percent
    ("Add 1/2 cup.", "Add one half cup."),
    ("About 3/4 full.", "About three quarters full."),
    ("Wait 1 1/2 hours.", "Wait one and a half hours."),
    ("Only 2/3 left.", "Only two thirds left."),
    ("Add ½ cup.", "Add one half cup."),
    ("Save 20% today.", "Save twenty percent today."),
    ("Battery at 7.5%.", "Battery at seven point five percent."),
    # temperatures and units
    ("It is 22°C outside.", "It is twenty two degrees Celsius outside."),
    ("Low of -5 °F tonight.", "Low of minus five degrees Fahrenheit tonight."),
    ("Speed limit 50 km/h.", "Speed limit fifty kilometers per hour."),
    ("Bags up to 23 kg.", "Bags up to twenty three kilograms."),
    ("Just 1 kg.", "Just one kilogram."),
    ("Gap of 15 cm.", "Gap of fifteen centimeters."),
    ("Drive 60 mph.", "Drive sixty miles per hour."),
    ("Only 5 mi away.", "Only five miles away."),
    ("Only 3 ft tall.", "Only three feet tall."),
    ("Weighs 10 lb.", "Weighs ten pounds."),
    ("Add 500 ml.", "Add five hundred milliliters."),
    ("Free 2 GB.", "Free two gigabytes."),
    ("A 500 m walk.", "A five hundred meter walk."),
    # time ranges, UK-style times, money per unit, short decades, national phone numbers
    ("Open 9am-9pm daily.", "Open nine a.m to nine p.m daily."),
    ("Open 10:00–12:30.", "Open ten o'clock to twelve thirty."),
    ("Doors at 7.30pm.", "Doors at seven thirty p.m."),
    ("Prices from $9.99/month.", "Prices from nine dollars and ninety nine cents per month."),
    ("The 90s were great.", "The nineties were great."),
    ("Call us on 0800 123 4567.", "Call us on oh eight oh oh, one two three, four five six seven."),
    ("Tel: 020 7946 0958", "Tel: oh two oh, seven nine four six, oh nine five eight"),
    ("Call 1-800-555-0199.", "Call one, eight oh oh, five five five, oh one nine nine."),
    ("Sale starts on the 3rd of May.", "Sale starts on the third of May."),
    ("Born on 12 Dec. Then he left.", "Born on the twelfth of December. Then he left."),
    ("We are open 24/7.", "We are open twenty four seven."),
    ("He is 6 ft 2 in tall.", "He is six feet two inches tall."),
    ("Clearance 1 ft 1 in.", "Clearance one foot one inch."),
    ("The year is 2026.", "The year is twenty twenty six."),
    # ranges of money, temperatures and ordinals; a unit before a hyphen
    ("Tickets are $5-$10.", "Tickets are five dollars to ten dollars."),
    ("Tickets are $5-10.", "Tickets are five dollars to ten dollars."),
    ("Budgets of $1000-2000.", "Budgets of one thousand dollars to two thousand dollars."),
    ("Highs of 20-25°C today.", "Highs of twenty to twenty five degrees Celsius today."),
    ("The 1st-3rd floors are closed.", "The first to third floors are closed."),
    ("The 2 km-long tunnel.", "The two kilometer-long tunnel."),
    # letters that are more often something else than a unit
    ("Take exit 12 W now.", "Take exit twelve W now."),
    ("It is 300 K here.", "It is three hundred K here."),
    # digits of other scripts are read, never dropped
    ("Call ٥٥٥-٠١٢٣ now.", "Call five five five, oh one two three now."),
    ("Only １２ seats, from $１２.５０.",
     "Only twelve seats, from twelve dollars and fifty cents."),
])
def test_numbers_are_put_in_words(text: str, said: str) -> None:
    assert MDY(text) == said


@pytest.mark.parametrize(("text", "mdy", "dmy"), [
    ("Closed on 3/12.", "Closed on March twelfth.", "Closed on the third of December."),
    ("Due 12/03/2026.", "Due December third twenty twenty six.",
     "Due the twelfth of March twenty twenty six."),
    ("Valid until 2026-12-01.", "Valid until December first twenty twenty six.",
     "Valid until the first of December twenty twenty six."),
    # only one order is a date: that one, whatever the setting
    ("Due 25/12/2026.", "Due the twenty fifth of December twenty twenty six.",
     "Due the twenty fifth of December twenty twenty six."),
])
def test_date_order_reads_numeric_dates(text: str, mdy: str, dmy: str) -> None:
    assert MDY(text) == mdy
    assert DMY(text) == dmy


def test_year_first_dates() -> None:
    assert YMD("Due 2026/12/03.") == "Due December third twenty twenty six."


@pytest.mark.parametrize("text", [
    "Version 1.2.3 and 10.0.0.1",  # not one number
    "Just words, no numbers.",
])
def test_what_is_not_understood_is_left_as_it_was(text: str) -> None:
    assert MDY(text) == text


def test_british_english_keeps_and() -> None:
    british = Normalizer.for_language("en_GB")
    assert british is not None
    assert british("We expect 250 guests.") == "We expect two hundred and fifty guests."
    assert MDY("We expect 250 guests.") == "We expect two hundred fifty guests."
    assert british.key != MDY.key


def test_only_english_has_these_passes() -> None:
    for code in ("en", "en_US", "en-us", "en_GB", "EN"):
        assert isinstance(Normalizer.for_language(code), Normalizer), code
    for code in ("it_IT", "nl", "zh_CN", "", "eng"):  # de, fr, es: test_normalize_languages
        assert Normalizer.for_language(code) is None, code


def test_key_follows_the_options() -> None:
    assert MDY.key == Normalizer().key
    assert MDY.key != DMY.key != YMD.key
    assert "date_order=dmy" in DMY.key


def test_key_follows_the_rules(tmp_path: Path) -> None:
    assert RULES_DIGEST in MDY.key
    (tmp_path / "money.py").write_text("RATE = 1\n", encoding="utf-8")
    (tmp_path / "notes.md").write_text("not a rule\n", encoding="utf-8")
    before = rules_digest(tmp_path, "0.5.14")
    (tmp_path / "notes.md").write_text("still not a rule\n", encoding="utf-8")
    assert rules_digest(tmp_path, "0.5.14") == before
    assert rules_digest(tmp_path, "0.5.15") != before  # another num2words
    (tmp_path / "money.py").write_text("RATE = 2\n", encoding="utf-8")
    assert rules_digest(tmp_path, "0.5.14") != before  # an edited pass
    (tmp_path / "words.txt").write_text("ATM\n", encoding="utf-8")
    assert rules_digest(tmp_path, "0.5.14") != before  # a word list


def test_options_refuse_an_unknown_date_order() -> None:
    with pytest.raises(ValueError, match="date_order 'dym' is not one of mdy, dmy, ymd"):
        NormalizeOptions(date_order="dym")  # type: ignore[arg-type]


def test_long_numbers_are_read_digit_by_digit() -> None:
    long = "1" * (spoken.MAX_WHOLE_DIGITS + 1)
    assert MDY(f"code {long}") == "code " + " ".join(["one"] * len(long))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("unit", [
    "1", "1,", "1.", "$1", "1-", "1:", "12:3", "1/", "-1", "1 ", "£1.", "1st", "19", "1°",
    "+1 ", "(555) ", "1 km/", "555-", "2026-", "March 1", "1 1/2 ", "9.", "0", "a1", "%",
    "9am-", "0800 ", "$1/mo", "7.30", "Tel: 1 ", "1:00-", "١", "１,", "call 12 or ", "at 1200 ",
    "the 1445 to ",
])
def test_hostile_input_finishes(unit: str) -> None:
    text = (unit * (50_000 // len(unit) + 1))[:50_000]
    said = MDY(text)
    assert isinstance(said, str)


# --- say-as (SSML) ----------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "text", "fmt", "said"), [
    ("characters", "USB-a1", None, "u s b dash eh one"),
    ("spell-out", "Joe", None, "j o e"),
    ("digits", "0123", None, "zero one two three"),
    ("cardinal", "-1,234.5", None, "minus one thousand two hundred thirty four point five"),
    ("ordinal", "21st", None, "twenty first"),
    ("ordinal", "3", None, "third"),
    ("date", "12/03/2026", None, "December third twenty twenty six"),
    ("date", "12/03/2026", "dmy", "the twelfth of March twenty twenty six"),
    ("date", "2026-12-03", None, "December third twenty twenty six"),
    ("date", "March 3", "md", "March third"),
    ("date", "2026", "y", "twenty twenty six"),
    ("date", "3/2026", "my", "March twenty twenty six"),
    ("date", "Dec", "m", "December"),
    ("date", "21st", "d", "the twenty first"),
    ("time", "7:15 pm", None, "seven fifteen p.m"),
    ("time", "19:05", None, "nineteen oh five"),
    ("telephone", "+1 (415) 555-0123", None,
     "plus one, four one five, five five five, oh one two three"),
    ("currency", "$12.50", None, "twelve dollars and fifty cents"),
    ("currency", "12.50", "EUR", "twelve euros and fifty cents"),
])
def test_say_as_reads_what_it_is_told(kind: str, text: str, fmt: str | None, said: str) -> None:
    assert say_as(kind, text, format=fmt) == said


@pytest.mark.parametrize(("kind", "text", "fmt", "reason"), [
    ("cardinal", "abc", None, "say-as cardinal: 'abc' is not a number"),
    ("ordinal", "first", None, "say-as ordinal: 'first' is not an ordinal number"),
    ("digits", "12a", None, "say-as digits: '12a' is not digits"),
    ("date", "13/45/2026", None, "say-as date: '13' in '13/45/2026' is not a month"),
    ("date", "2/30/2026", None, "is not a day of that month"),
    ("date", "1/2", "xyz", "format 'xyz' is not one of"),
    ("date", "1/2", "mdy", "does not have the 3 parts of mdy"),
    ("time", "7:15 hello", None, "say-as time: '7:15 hello' is not a time"),
    ("telephone", "call me", None, "say-as telephone: 'call me' is not a phone number"),
    ("currency", "12", None, "say-as currency: '12' is not an amount with a currency"),
    ("currency", "12", "XYZ", "format 'XYZ' is not a currency code"),
    ("bogus", "x", None, "say-as: interpret-as 'bogus' is not supported"),
    ("cardinal", "", None, "say-as cardinal: the text is empty"),
    ("characters", "x" * 201, None, "201 characters, more than 200"),
])
def test_say_as_refuses_what_is_not_so(kind: str, text: str, fmt: str | None,
                                       reason: str) -> None:
    with pytest.raises(ValueError, match=re.escape(reason)):
        say_as(kind, text, format=fmt)
