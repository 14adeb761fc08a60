"""The normalizer's electrical units, dimensions, micro and ohm signs, short numbers, "est.",
signs, words in web addresses and sequels (#29): each rule, and what looks like it but is not."""

from __future__ import annotations

import pytest

from agent.text.normalize import NormalizeOptions, Normalizer

MDY = Normalizer(NormalizeOptions())


@pytest.mark.parametrize(("text", "said"), [
    ("The charger gives 12 V at 2 A.", "The charger gives twelve volts at two amps."),
    ("Input: 230V AC only.", "Input: two hundred thirty volts eh c only."),
    ("This fuse is rated 5 A.", "This fuse is rated five amps."),
    ("Standby draw is 500 mA.", "Standby draw is five hundred milliamps."),
    ("Replace the 60 W bulb.", "Replace the sixty watt bulb."),
    ("The panel makes 450 W.", "The panel makes four hundred fifty watts."),
    ("The heater uses 1.5 kW.", "The heater uses one point five kilowatts."),
    ("A 1 V cell.", "A one volt cell."),
    ("Give 250 μg daily.", "Give two hundred fifty micrograms daily."),  # Greek mu
    ("Give 250 µg daily.", "Give two hundred fifty micrograms daily."),  # micro sign
    ("The resistor is 10 Ω.", "The resistor is ten ohms."),
    ("A 5 kΩ resistor.", "A five kilohm resistor."),
])
def test_electrical_units_and_micro_and_ohm_signs(text: str, said: str) -> None:
    assert MDY(text) == said


@pytest.mark.parametrize(("text", "said"), [
    # amps and watts only where the text speaks of electricity; never after a code word
    ("Take exit 12 W.", "Take exit twelve W."),
    ("Platform 5 A is closed.", "Platform five A is closed."),
    ("Meet at Gate 5 A, fuse box.", "Meet at Gate five A, fuse box."),
    ("Seat 12A by the fuse box.", "Seat twelve eh by the fuse box."),
    ("Grade 5 A students.", "Grade five A students."),
])
def test_letters_that_are_no_unit_are_left(text: str, said: str) -> None:
    assert MDY(text) == said


@pytest.mark.parametrize(("text", "said"), [
    ("A 10 x 12 ft room.", "A ten by twelve foot room."),
    ("Tiles are 3x4 m.", "Tiles are three by four meters."),
    ("Pallets of 1.2 x 0.8 m.", "Pallets of one point two by zero point eight meters."),
    ("Boxes of 40 × 30 × 20 cm.", "Boxes of forty by thirty by twenty centimeters."),
    ("A 4x4 car.", "A four by four car."),
    # not dimensions: a multiplier, a code
    ("Use 2x the dose.", "Use 2x the dose."),
    ("Bus X12 now.", "Bus x twelve now."),
])
def test_dimensions_are_by(text: str, said: str) -> None:
    assert MDY(text) == said


@pytest.mark.parametrize(("text", "said"), [
    ("Text JOIN to 80888 to enter.", "Text Join to eight oh eight eight eight to enter."),
    ("Send STOP to 60123.", "Send Stop to six oh one two three."),
    ("Emergency number: 112.", "Emergency number: one one two."),
    ("Police on 101.", "Police on one oh one."),
    ("In an emergency, 911 is free.", "In an emergency, nine one one is free."),
    ("Fire services: 999", "Fire services: nine nine nine"),
    ("WhatsApp us on 4155550123.", "WhatsApp us on four one five five five five oh one two three."),
    ("Taxi rank, phone 555-0123.", "Taxi rank, phone five five five, oh one two three."),
    # amounts, not numbers to call
    ("We sold 911 tickets.", "We sold nine hundred eleven tickets."),
    ("Bus number 111 is late.", "Bus number one hundred eleven is late."),
    ("Room 101 is free.", "Room one oh one is free."),
    ("Send 5 to 10 people.", "Send five to ten people."),
    ("Population 3,400,000.", "Population three million four hundred thousand."),
])
def test_short_numbers_that_are_not_amounts(text: str, said: str) -> None:
    assert MDY(text) == said


@pytest.mark.parametrize(("text", "said"), [
    ("Est. 1998, family run.", "established nineteen ninety eight, family run."),
    ("Smith and Sons, est. 1887.", "Smith and Sons, established eighteen eighty seven."),
    ("Est. wait: 20 min.", "estimated wait: twenty minutes."),
    ("The stop is opp. the library.", "The stop is opposite the library."),
    ("Parking nr. the gate.", "Parking near the gate."),
    ("House Nr. 5.", "House number five."),
    ("The best. Then", "The best. Then"),  # "est." inside a word is no abbreviation
    ("© 2026 City Transit.", "copyright twenty twenty six City Transit."),
    ("Keep at 20 °C ± 2.", "Keep at twenty degrees Celsius plus or minus two."),
])
def test_abbreviations_and_signs(text: str, said: str) -> None:
    assert MDY(text) == said


@pytest.mark.parametrize(("text", "said"), [
    ("Email lost.property@station.example today.",
     "Email lost dot property at station dot example today."),
    ("See example.com/opening-hours now.", "See example dot com slash opening dash hours now."),
    ("See example.org/report-a-fault now.",
     "See example dot org slash report dash a dash fault now."),
    ("Get www.citybus.example/timetables now.",
     "Get w w w dot citybus dot example slash timetables now."),
    ("Read example.com/docs/news now.", "Read example dot com slash docs slash news now."),
    # short names that are no words are still spelled, and so are short domains
    ("Go to www.bbc.co.uk now.", "Go to w w w dot b b c dot co dot u k now."),
    ("Mail xkcd@my.io now.", "Mail x k c d at my dot i o now."),
])
def test_words_in_addresses_are_words(text: str, said: str) -> None:
    assert MDY(text) == said


@pytest.mark.parametrize(("text", "said"), [
    ("Jaws II is on at eight.", "Jaws two is on at eight."),
    ("Rocky III starts soon.", "Rocky three starts soon."),
    ("Final Fantasy VII is on sale.", "Final Fantasy seven is on sale."),
    ("Street Fighter II finals.", "Street Fighter two finals."),
    # rulers keep their ordinal
    ("Elizabeth II opened it.", "Elizabeth the second opened it."),
    ("Henry VIII had six wives.", "Henry the eighth had six wives."),
    ("Pope John Paul II visited.", "Pope John Paul the second visited."),
    ("King Arthur II rode.", "King Arthur the second rode."),  # a royal title before a name
    ("Queen Elizabeth I ruled.", "Queen Elizabeth the first ruled."),
    # a lone I and Malcolm X are not numerals here
    ("Rocky I was first.", "Rocky I was first."),
    ("Malcolm X spoke.", "Malcolm X spoke."),
])
def test_sequels_are_numbers_and_rulers_ordinals(text: str, said: str) -> None:
    assert MDY(text) == said


@pytest.mark.timeout(60)
@pytest.mark.parametrize("unit", [
    "12 V ", "5 A fuse ", "3x", "1 x 2 x ", "250 μg ", "10 Ω ", "text A to 8", "911 ",
    "emergency: 1", "4155550123", "Est. ", "opp. ", "© ", "a.example/", "Jaws II ",
])
def test_hostile_input_finishes(unit: str) -> None:
    text = (unit * (50_000 // len(unit) + 1))[:50_000]
    assert isinstance(MDY(text), str)
