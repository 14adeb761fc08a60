"""The normalizer's weekdays, date ranges, ranges of codes and seasons, and signed money (#29):
each rule in words, and what looks like one of them but is not left to the other passes."""

from __future__ import annotations

import pytest

from agent.text.normalize import NormalizeOptions, Normalizer

MDY = Normalizer(NormalizeOptions())


@pytest.mark.parametrize(("text", "said"), [
    # weekday abbreviations, with and without a dot, before a date
    ("Closed Mon 3 Nov.", "Closed Monday the third of November."),
    ("The library reopens Tue., Sept. 9.", "The library reopens Tuesday, September ninth."),
    ("Bin day: Wed, Jan 7.", "Bin day: Wednesday, January seventh."),
    ("Every Thurs until Dec 18.", "Every Thursday until December eighteenth."),
    ("Parents' evening Thu 12 Feb.", "Parents' evening Thursday the twelfth of February."),
    ("From Fri., Aug. 1.", "From Friday, August first."),
    ("Sat. Jan. 10: stocktake.", "Saturday January tenth: stocktake."),
    ("Term ends Fri 19 Dec 2025.",
     "Term ends Friday the nineteenth of December twenty twenty five."),
    ("Delivery Weds or Tues.", "Delivery Wednesday or Tuesday."),
    # two days joined: a range
    ("Open Mon–Sat, closed Sun.", "Open Monday to Saturday, closed Sunday."),
    ("Open MON–FRI 8–6.", "Open Monday to Friday eight to six."),
    ("Open Mon-Fri 9-5, Sat 10-4.", "Open Monday to Friday nine to five, Saturday ten to four."),
    ("Slots Tue–Thu only.", "Slots Tuesday to Thursday only."),
    ("Open Sat & Sun.", "Open Saturday and Sunday."),
    # a sentence that ends on the abbreviation keeps its full stop
    ("Closed Wed. Open Thu.", "Closed Wednesday. Open Thursday."),
    # Sat and Sun are weekdays before a date or a time, or after a word that announces a day
    ("Pharmacy: Sun 10am-4pm.", "Pharmacy: Sunday ten a.m to four p.m."),
    ("Bins on Sat 27 Dec.", "Bins on Saturday the twenty seventh of December."),
    ("We are closed Sun.", "We are closed Sunday."),
])
def test_weekday_abbreviations_are_days(text: str, said: str) -> None:
    assert MDY(text) == said


@pytest.mark.parametrize("text", [
    "The Sun rises at six.",
    "Sun Life Insurance.",
    "She sat on the Sun deck.",
    "Our Sat nav is broken.",
    "A Monday.",
    "mon and fri in lower case",
    "C'mon, Wed's here.",
])
def test_words_that_look_like_weekdays_are_left(text: str) -> None:
    assert MDY(text) == text


@pytest.mark.parametrize(("text", "said"), [
    ("Market Nov 30 – Dec 3.", "Market November thirtieth to December third."),
    ("Valid Nov 28–Dec 2.", "Valid November twenty eighth to December second."),
    ("Half term Oct 27 - Oct 31.", "Half term October twenty seventh to October thirty first."),
    ("From 30 Nov – 3 Dec.", "From the thirtieth of November to the third of December."),
    ("Exams run 3–5 June.", "Exams run the third to the fifth of June."),
    ("Works 2–4 Sept. on line 2.", "Works the second to the fourth of September on line two."),
    ("From the 3rd to the 5th of May.", "From the third to the fifth of May."),
    ("The festival runs June 3-5, 2026.",
     "The festival runs June third to fifth twenty twenty six."),
    ("The exhibition runs Apr–Sep.", "The exhibition runs April to September."),
    ("Open Jan-Mar only.", "Open January to March only."),
    # signs in capitals
    ("STORE CLOSED MON 3 NOV", "Store Closed Monday the third of November"),
    ("SALE ENDS 31 DEC 2026", "Sale Ends the thirty first of December twenty twenty six"),
    ("OPEN JAN–MAR", "Open January to March"),
    ("YOU MAY ENTER", "You May Enter"),  # MAY in capitals is the word
])
def test_date_ranges_have_to(text: str, said: str) -> None:
    assert MDY(text) == said


@pytest.mark.parametrize(("text", "said"), [
    # a later day first, or a day a month has not: not a range of dates
    ("June 5-3", "June fifth-three"),
    ("Feb 30 – Mar 2", "Feb thirty, March second"),
    # a time after the second number: the times pass reads it
    ("June 3 to 5 pm", "June third to five p.m"),
])
def test_what_is_not_a_date_range_is_not_read_as_one(text: str, said: str) -> None:
    assert MDY(text) == said


@pytest.mark.parametrize(("text", "said"), [
    ("Rooms 201–210 are closed.", "Rooms two oh one to two ten are closed."),
    ("Exams in rooms 101 to 105.", "Exams in rooms one oh one to one oh five."),
    ("Gates B1–B9 are closed.", "Gates b one to b nine are closed."),
    ("Wards 3A-3C are closed.", "Wards three eh to three c are closed."),
    ("Gates 21-27 are north.", "Gates twenty one to twenty seven are north."),
    ("Platforms 9 – 12 are closed.", "Platforms nine to twelve are closed."),
    # seasons and school years: the second year by its last two digits
    ("The 1998–99 season.", "The nineteen ninety eight to ninety nine season."),
    ("Tickets for 2026-27.", "Tickets for twenty twenty six to twenty seven."),
    ("The 2025/26 timetable.", "The twenty twenty five to twenty six timetable."),
    ("The 1905–06 season.", "The nineteen oh five to oh six season."),
    ("The 2005–06 season.", "The two thousand five to two thousand six season."),
    ("The 1999–00 season.", "The nineteen ninety nine to two thousand season."),
    ("Fees for 2024-2025.", "Fees for twenty twenty four to twenty twenty five."),
])
def test_ranges_of_codes_and_seasons(text: str, said: str) -> None:
    assert MDY(text) == said


@pytest.mark.parametrize(("text", "said"), [
    # a code with a hyphen, a phone number, a score: no "to" made up
    ("Proceed to Gate A-12.", "Proceed to Gate A-twelve."),
    ("Lost luggage: 555-0142.", "Lost luggage: five five five, oh one four two."),
    ("COVID-19 rules apply.", "COVID-nineteen rules apply."),
    # codes of two shapes are not a range
    ("Seat 12A-B4.", "Seat 12A-B4."),
    # a year and two digits that are no later year: a range of numbers, or a fraction
    ("Pages 1998-12.", "Pages one thousand nine hundred ninety eight to twelve."),
    ("A ratio of 2025/30.", "A ratio of two thousand twenty five thirtieths."),
])
def test_what_is_not_a_range_of_codes_or_a_season(text: str, said: str) -> None:
    assert MDY(text) == said


@pytest.mark.parametrize(("text", "said"), [
    ("Your balance is -$5.00.", "Your balance is minus five dollars."),
    ("Account balance: -£3.20.", "Account balance: minus three pounds and twenty pence."),
    ("An adjustment of −€12.", "An adjustment of minus twelve euros."),
    ("Balance –$40.00 today.", "Balance minus forty dollars today."),
    ("Card balance is $-5.00.", "Card balance is minus five dollars."),
    ("Energy cost: -€0.42.", "Energy cost: minus forty two cents."),
    ("Balance: -12.50 EUR.", "Balance: minus twelve euros and fifty cents."),
    ("Net (-$1,250) this month.", "Net (minus one thousand two hundred fifty dollars) this month."),
    # not a sign: a dash between words, a range, a hyphen inside a word, brackets alone
    ("Fee £25 - pay by Friday.", "Fee twenty five pounds, pay by Friday."),
    ("Prices from $5 - $10.", "Prices from five dollars to ten dollars."),
    ("Lunch: $8–$12.", "Lunch: eight dollars to twelve dollars."),
    ("Item x-$5 off.", "Item x-five dollars off."),
    ("The fee ($4.50) is paid.", "The fee (four dollars and fifty cents) is paid."),
    ("A credit of +$10.", "A credit of plus ten dollars."),
])
def test_negative_money_keeps_its_sign(text: str, said: str) -> None:
    assert MDY(text) == said


@pytest.mark.timeout(60)
@pytest.mark.parametrize("unit", [
    "Mon ", "Sat. ", "Sun-", "Mon–", "Nov 30 – ", "3–5 June ", "June 3-", "Apr–", "Rooms 201–",
    "B1–", "1998–", "2025/", "-$5 ", "$-", "–$",
])
def test_hostile_input_finishes(unit: str) -> None:
    text = (unit * (50_000 // len(unit) + 1))[:50_000]
    assert isinstance(MDY(text), str)
