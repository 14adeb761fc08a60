"""Web addresses and e-mail addresses read the way people say them aloud.

``help@example.com`` → "help at example dot com"; ``www.example.com/info`` → "w w w dot
example dot com slash info"; ``https://example.org/help`` → "example dot org slash help" (the
scheme is not said, as announcers do not). A dot is "dot", ``/`` "slash", ``-`` "dash", ``_``
"underscore", ``:`` "colon"; a name, mailbox or path word that can be said is said as a word
(four letters with a vowel always: ``lost.property``, ``/timetables``), one that cannot
(``bbc``, ``xkcd``) and a short top-level domain (``uk``, ``io``) are spelled, digits one by
one. A dot right after an address (the end of a sentence) is left as it was. Addresses are
bounded (at most 254 characters, labels of at most 63).
"""

from __future__ import annotations

import re

from agent.text.normalize.initialisms import pronounceable
from agent.text.normalize.letters import digits, spell
from agent.text.normalize.options import NormalizeOptions

__all__ = ["web_addresses"]

_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_TLD = r"[A-Za-z]{2,12}"
_EMAIL = re.compile(
    rf"(?<![\w.%+@-])([A-Za-z0-9_%+-]{{1,64}}(?:\.[A-Za-z0-9_%+-]{{1,64}}){{0,8}})"
    rf"@((?:{_LABEL}\.){{1,8}}{_TLD})(?![\w@-]|\.\w)")
_SCHEME = r"(?:https?|ftp)://"
_WORD_TLDS = frozenset({"com", "org", "net", "edu", "gov", "info", "biz", "mil", "int", "app",
                        "shop", "travel", "museum", "online", "store", "tech", "site", "news"})
_KNOWN_TLDS = _WORD_TLDS | frozenset({
    "io", "co", "uk", "us", "ca", "de", "fr", "nl", "be", "ch", "at", "it", "es", "ie", "eu",
    "au", "nz", "jp", "cn", "in", "br", "se", "no", "dk", "fi", "pl", "pt", "tv", "me", "ai",
    "ly", "gg", "dev", "xyz", "int"})
_URL = re.compile(
    rf"(?<![\w.@/-])(?:({_SCHEME})((?:{_LABEL}\.){{0,8}}{_LABEL})"
    rf"|((?:www\.)(?:{_LABEL}\.){{0,8}}{_TLD})"
    rf"|((?:{_LABEL}\.){{1,8}}(?:{'|'.join(sorted(_KNOWN_TLDS, key=len, reverse=True))})))"
    rf"(?![\w@-]|\.\w)"
    r"(:\d{1,5})?((?:/[A-Za-z0-9._~%+=&?#-]{0,80}){0,12})")
_PATH_PIECE = re.compile(r"[A-Za-z]+|\d+|[._~%+=&?#/-]")
_SAID = {".": "dot", "/": "slash", "-": "dash", "_": "underscore", "~": "tilde",
         "%": "percent", "+": "plus", "=": "equals", "&": "and", "?": "question mark",
         "#": "hash"}
MAX_ADDRESS = 254
_VOWEL = re.compile(r"[aeiouy]")


def _word(piece: str) -> str:
    """A piece said as a word when it is one: four letters or more with a vowel (``docs``,
    ``strengths``), or a shorter pronounceable one; others spelled."""
    if piece.isdigit():
        return digits(piece)
    lower = piece.lower()
    if len(lower) >= 4 and _VOWEL.search(lower):
        return lower
    return lower if pronounceable(lower.upper()) else spell(lower)


def _said(text: str, *, tld: bool = False) -> str:
    """A host name, user name or path, piece by piece (``.`` dot, ``/`` slash...)."""
    words: list[str] = []
    pieces = _PATH_PIECE.findall(text)
    for index, piece in enumerate(pieces):
        if piece in _SAID:
            words.append(_SAID[piece])
        elif piece == "a" and pieces[index - 1:index] == ["-"] and pieces[index + 1:index + 2] == [
                "-"]:
            words.append("a")  # the article between words: report-a-fault
        elif tld and index == len(pieces) - 1 and piece.isalpha():
            lower = piece.lower()
            said = lower in _WORD_TLDS or (len(lower) >= 4 and _VOWEL.search(lower))
            words.append(lower if said else spell(piece))
        else:
            words.append(_word(piece))
    return " ".join(words)


def _email(match: re.Match[str]) -> str:
    if len(match.group(0)) > MAX_ADDRESS:
        return match.group(0)
    return f"{_said(match.group(1))} at {_said(match.group(2), tld=True)}"


def _url(match: re.Match[str]) -> str:
    whole = match.group(0)
    if len(whole) > MAX_ADDRESS:
        return whole
    host = match.group(2) or match.group(3) or match.group(4) or ""
    port, path = match.group(5), match.group(6).rstrip(".,;:!?")
    tail = match.group(6)[len(path):]
    host_words = _said(host[4:], tld=True) if host.lower().startswith("www.") else ""
    said = ("w w w dot " + host_words) if host_words else _said(host, tld=True)
    if port:
        said += " colon " + digits(port[1:])
    if path.strip("/"):
        said += " " + _said(path.rstrip("/"))
    return said + tail


def web_addresses(text: str, options: NormalizeOptions) -> str:
    """E-mail addresses, then web addresses, in words."""
    del options
    if "@" in text:
        text = _EMAIL.sub(_email, text)
    if "." in text:
        text = _URL.sub(_url, text)
    return text
