"""Words in capitals: initialisms spelled (ATM, USB, BBC), acronyms and shouted words said.

An all-caps text reads its words as words (known initialisms still spelled); otherwise special
readings, the initialism and acronym lists, short words and :func:`pronounceable` decide. Words
next to numbers, inside addresses and Roman numerals are left to later passes. The rule, in order:
docs/internals.md#normalizer-words-in-capitals.
"""

from __future__ import annotations

import re

from agent.text.normalize.letters import spell, word_set
from agent.text.normalize.options import NormalizeOptions
from agent.text.normalize.roman import roman_value

__all__ = ["ACRONYMS", "INITIALISMS", "MIXED_INITIALISMS", "SHORT_WORDS", "SPECIAL",
           "initialisms", "pronounceable"]

INITIALISMS = word_set("""
    ATM USB BBC FBI CIA CEO CFO UFO NHS EU UK USA UN DVD CD TV PC GPS SMS PDF LED LCD HIV VIP
    ICU DJ ID ATP WC PA AC DC TSA DMV NYPD NYC BMW IBM HP ETA SOS FAQ URL WWW MIT CCTV ER IOU
    RSVP HQ ABC CBS CNN NBC HBO MTV ESPN NFL NBA NHL MLB UPS DHL KFC IRS FDA EPA DNA RNA ADHD
    CPR EMT ASL BBQ DIY FYI PR PS QR SUV USSR UAE NGO GP MP""")
"""Always spelled, also in an all-caps text: they are never English words."""
ACRONYMS = word_set("""
    NASA NATO UNESCO UNICEF FIFA UEFA OPEC NAFTA LASER RADAR SCUBA SONAR COVID AIDS PIN SIM
    ZIP GIF IKEA NOAA WIFI SARS NIMBY BART ASAP OSHA FEMA NASCAR""")
"""Read as words, though some look unpronounceable to the rule (``NOAA``, ``NASCAR``)."""
SPECIAL = {"OK": "okay", "JPEG": "jay peg", "IEEE": "i triple e", "AAA": "triple eh",
           "NAACP": "n double eh c p"}
"""Initialisms people say their own way."""
SHORT_WORDS = word_set("""
    AM AN AS AT BE BY DO GO HE IF IN IS ME MY NO OF OH ON OR SO TO UP WE
    ALL AND ANY ARE BUT CAN DAY DID END FEW FOR GET GOT HAS HAD HER HIM HIS HOW ITS LET MAY
    NEW NOT NOW OFF OLD ONE OUR OUT OWN PUT SAY SEE SHE THE TOO TWO USE WAS WAY WHY YES YET
    YOU BUS CAR BOX BAG KEY MAP PAY TAX WET HOT ICE EAT RUN SIT TOP""")
"""Short words said as words when written in capitals for emphasis (``Do NOT enter``)."""
MIXED_INITIALISMS = word_set("WHO IT US")
"""Spelled among lower-case words (``the WHO``, ``IT support``), words in an all-caps text."""

_WORDS_BY_NUMBERS = SHORT_WORDS - {"AM", "PM"}
"""Words next to a number that are still words (``THE 7:15``, ``AT 5``); ``5 AM`` is a time."""
_UNITS = word_set("HP MP AC DC PC PS")
"""Initialisms that are also units or model names after a number (``300 HP``, ``12 MP``)."""
_VOWELS = set("AEIOUY")
_ONSETS = word_set("""
    B C D F G H J K L M N P Q R S T V W X Z BL BR CH CL CR DR DW FL FR GL GN GR KN KR PH PL PR
    QU SC SCH SCR SH SHR SK SL SM SN SP SPL SPR ST STR SW TH THR TR TW WH WR SQU Y""")
_CODAS = word_set("""
    B C D F G H K L M N P R S T V W X Z CH CK CT FT GH LD LF LK LL LM LP LS LT MB MP MS ND NG
    NK NS NT PH PS PT RB RC RD RG RK RL RM RN RP RS RT SH SK SP SS ST TH TS TCH NCH NTS RST
    RTS NDS LDS NGTH NGS RTH NTH XTH FTH LTH MPS NKS LTS CKS""")
_VOWEL_RUNS = word_set("A E I O U Y AI AU AY EA EE EI EU EY IE OA OE OI OO OU OY UE UI IA IO EO UA"
                       " UO IOU EAU")

_CAPS = re.compile(r"(?<![\w.@&'-])([A-Z]{2,})((?:'?s)?)(?![\w@&]|\.\w|-\d)")
_AMPERSAND = re.compile(r"(?<![\w&])([A-Z]{1,3})&([A-Z]{1,3})(?![\w&])")
_LOWER = re.compile(r"[a-z]")
_RUNS = re.compile(r"[AEIOU]+|Y(?![AEIOU])|[^AEIOUY]+|Y")
_NEXT_TO_DIGIT = re.compile(r" ?\d")
_DIGIT_BEFORE = re.compile(r"\d ?$")
_TWO_CAPS = re.compile(r"[A-Z]{2}")


def pronounceable(word: str) -> bool:
    """Whether a word in capitals looks like one English can say: every consonant cluster at
    its start and end is one English has (``STR``, ``NT``), every vowel run is too (``EA``,
    ``OU``), and no run of more than three consonants inside. ``NASA``, ``LASER`` yes;
    ``NHS`` (no vowel), ``TSA`` (``TS-`` onset), ``ATM`` (``-TM`` coda) no."""
    if not word.isalpha() or not word.isascii() or len(word) < 2:
        return False
    runs = _RUNS.findall(word.upper())
    vowels = [run[0] in _VOWELS and not (run == "Y" and index == 0 and len(runs) > 1)
              for index, run in enumerate(runs)]
    if not any(vowels):
        return False
    last = len(runs) - 1
    return all(
        run in _VOWEL_RUNS if vowel else
        run in _ONSETS if index == 0 else
        run in _CODAS if index == last else len(run) <= 3
        for index, (run, vowel) in enumerate(zip(runs, vowels, strict=True)))


def _roman_after_name(text: str, start: int) -> bool:
    before = text[max(0, start - 40):start].rstrip()
    last = before.rsplit(None, 1)[-1] if before.split() else ""
    return bool(last) and last[0].isupper() and last.isalpha()


def _reading(word: str, suffix: str, all_caps: bool) -> str:
    if word in SPECIAL:
        return SPECIAL[word] + suffix
    if word in INITIALISMS or (word in MIXED_INITIALISMS and not all_caps):
        return spell(word) + ("'s" if suffix else "")
    if all_caps or word in ACRONYMS or word in SHORT_WORDS or (
            len(word) > 2 and pronounceable(word)):
        return word.capitalize() + suffix
    return spell(word) + ("'s" if suffix else "")


def initialisms(text: str, options: NormalizeOptions) -> str:
    """Words in capitals spelled or said (the rule in the module's docstring)."""
    del options
    if "&" in text:
        text = _AMPERSAND.sub(lambda m: f"{spell(m[1])} and {spell(m[2])}", text)
    if not _TWO_CAPS.search(text):
        return text
    all_caps = not _LOWER.search(text) and len(_CAPS.findall(text)) >= 2

    def replace(match: re.Match[str]) -> str:
        word, suffix = match.group(1), match.group(2)
        start = match.start()
        if len(word) <= 3 and word not in _WORDS_BY_NUMBERS and (
                word not in INITIALISMS or word in _UNITS) and (
                _NEXT_TO_DIGIT.match(text, match.end())
                or _DIGIT_BEFORE.search(text[max(0, start - 2):start])):
            return match.group(0)
        if not suffix and roman_value(word) and _roman_after_name(text, start):
            return match.group(0)
        return _reading(word, suffix, all_caps)

    return _CAPS.sub(replace, text)
