"""Roman numerals in names and titles: ``Henry VIII`` → "Henry the eighth", ``Chapter IV`` →
"Chapter four", ``World War II`` → "World War two".

Only after a title word (:data:`TITLE_WORDS`: the number) or a capitalised word (not in
:data:`NOT_NAMES`): after a ruler's name (:data:`REGNAL_NAMES`, or a title such as ``King``) the
ordinal with "the", after any other a sequel's number (``Jaws II`` "Jaws two"); canonical
numerals only. The rules:
docs/internals.md#normalizer-roman-numerals.
"""

from __future__ import annotations

import re

from agent.text.normalize.letters import word_set
from agent.text.normalize.options import NormalizeOptions
from agent.text.normalize.spoken import num2words

__all__ = ["NOT_NAMES", "ROYAL", "TITLE_WORDS", "roman_numerals", "roman_value"]

TITLE_WORDS = word_set("""
    chapter chapters part parts volume vol book act scene section article title phase stage
    round series episode season level class grade type mark mk war psalm canto appendix
    annex schedule bowl apollo gemini tier""")
"""A numeral after one of these (any case) is a number: ``Part II`` part two."""
ROYAL = word_set("King Queen Pope Emperor Empress Tsar Czar Prince Princess Duke Duchess Kaiser"
                  " Sultan Pharaoh Saint St")
"""Before a name, they let ``I`` be a numeral: ``King George I`` King George the first."""
NOT_NAMES = word_set("""
    The A An And Or But In On At To For Of By From With As Is Are Was Were Be I We You He She
    It They This That These Those My Your Our Their His Her Its If So Not No Yes Please Then
    Gate Platform Seat Room Row Terminal Track Exit Level Floor Bay Stand Zone Door Line Route
    Bus Car Coach Carriage Counter Desk Belt Carousel Flight Train Bed Ward Berth Pier Dock
    Lane Aisle Box Unit Suite Block Wing Size Vitamin Type Grade Class Model Version""")
"""Capitalised words after which a numeral-looking word is not a regnal number."""
REGNAL_NAMES = word_set("""
    Henry Elizabeth George Edward William Charles James John Richard Mary Anne Victoria Louis
    Philip Philippe Felipe Juan Carlos Alfonso Ferdinand Isabella Frederick Friedrich Frederik
    Wilhelm Ludwig Otto Leopold Francis Franz Joseph Napoleon Alexander Nicholas Ivan Peter
    Catherine Paul Pius Benedict Gregory Leo Innocent Clement Urban Boniface Sixtus Adrian
    Constantine Justinian Christian Gustav Gustavus Olaf Harald Haakon Magnus Eric Erik
    Sigismund Casimir Stanislaus Rudolf Maximilian Umberto Vittorio Emmanuel Manuel Pedro
    Afonso Sancho Ramesses Rameses Ramses Thutmose Amenhotep Ptolemy Cleopatra Darius Xerxes
    Antiochus Herod David Duncan Robert Macbeth Llywelyn Owain Stephen Harold Canute
    Cnut Ethelred Edmund Alfred Matilda Margaret Sophia Albert Baudouin Rainier Willem Beatrix
    Carl Hussein Abdullah Mohammed Mehmed Suleiman Selim Murad Bayezid Mahmud Akihito Naruhito
    Hirohito Rama Norodom Sihanouk Tupou Mswati Letsie Moshoeshoe""")
"""Given names of kings, queens, popes and emperors: after one a numeral is regnal
(``Henry VIII`` "the eighth"); after another name it is a number (``Jaws II`` "two")."""

_NUMERAL = re.compile(r"C{0,3}(?:XC|XL|L?X{0,3})(?:IX|IV|V?I{0,3})")
_VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100}
_CANDIDATE = re.compile(r"(?<![\w.'-])([A-Za-z]{1,20})(\.?)( {1,3})([IVXLC]{1,9})(?![\w-])")
_WORD_BEFORE = re.compile(r"([A-Za-z]{1,20})\.? {1,3}$")


def roman_value(word: str) -> int | None:
    """The value of a canonical Roman numeral of I, V, X, L, C (``XIV`` 14), else None."""
    if not word or len(word) > 9 or not _NUMERAL.fullmatch(word):
        return None
    total = 0
    for index, char in enumerate(word):
        value = _VALUES[char]
        following = _VALUES[word[index + 1]] if index + 1 < len(word) else 0
        total += -value if value < following else value
    return total


def _words(number: int, *, ordinal: bool = False) -> str:
    said = num2words(number, lang="en", to="ordinal" if ordinal else "cardinal")
    return str(said).replace("-", " ").replace(",", "")


def _reading(text: str, match: re.Match[str]) -> str | None:
    before, dot, numeral = match.group(1), match.group(2), match.group(4)
    value = roman_value(numeral)
    if value is None:
        return None
    if before.lower() in TITLE_WORDS:
        return _words(value)
    if dot or not (before[0].isupper() and before[1:].islower()) or before in NOT_NAMES:
        return None
    return _after_name(text, match, before, numeral, value)


def _after_name(text: str, match: re.Match[str], before: str, numeral: str,
                value: int) -> str | None:
    """After a ruler's name (or a royal title) the ordinal; after another name, a sequel."""
    if not 1 <= value <= 39:
        return None
    title = _WORD_BEFORE.search(text, max(0, match.start() - 25), match.start())
    royal = title is not None and title.group(1) in ROYAL
    if before in REGNAL_NAMES or royal:
        return None if value == 1 and not royal else "the " + _words(value, ordinal=True)
    if value == 1 or numeral == "X":  # "Rocky I" is rare, "Malcolm X" is a name
        return None
    return _words(value)  # a sequel: "Jaws II" two, "Final Fantasy VII" seven


def roman_numerals(text: str, options: NormalizeOptions) -> str:
    """Roman numerals after title words and names, in words (rules in the module docstring)."""
    del options
    if not any(c in "IVXLC" for c in text):
        return text

    def replace(match: re.Match[str]) -> str:
        said = _reading(text, match)
        if said is None:
            return match.group(0)
        return match.group(1) + match.group(2) + match.group(3) + said

    return _CANDIDATE.sub(replace, text)
