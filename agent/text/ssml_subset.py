"""Which SSML elements and attributes the agent reads, which it ignores with a warning, and
which it refuses: the checks :mod:`agent.text.ssml` runs on each element.

SSML written for other engines asks for things a Piper voice cannot do (pitch, emphasis, other
languages, vendor effects). As the SSML 1.1 specification lets a processor do with content it
cannot render, those are ignored (their text spoken) and named in a warning; what neither SSML
1.1 nor another namespace defines (a typo such as ``<brake>``) is refused. The lists and the
reasons: ``docs/text.md`` ("SSML").
"""

from __future__ import annotations

from typing import Final

from agent.text.ssml_tree import Node, SsmlError

__all__ = ["ATTRIBUTES", "IGNORED_ATTRIBUTES", "SKIPPED", "TRANSPARENT", "check", "foreign",
           "quoted", "required"]

ATTRIBUTES: Final[dict[str, frozenset[str]]] = {
    "speak": frozenset({"version", "xml:lang", "xml:base", "xsi:schemaLocation"}),
    "p": frozenset({"xml:lang", "xml:id"}), "s": frozenset({"xml:lang", "xml:id"}),
    "break": frozenset({"time", "strength"}), "say-as": frozenset({"interpret-as", "format"}),
    "sub": frozenset({"alias"}), "prosody": frozenset({"rate", "volume"}),
    "phoneme": frozenset({"alphabet", "ph"}), "voice": frozenset({"name"}),
    "audio": frozenset({"src"}),
}
"""The elements read, with the attributes they honour (``xml:base``, ``xml:id``: nothing to do)."""
IGNORED_ATTRIBUTES: Final[dict[str, frozenset[str]]] = {
    "speak": frozenset({"onlangfailure"}),
    "p": frozenset({"onlangfailure"}), "s": frozenset({"onlangfailure"}),
    "prosody": frozenset({"pitch", "contour", "range", "duration"}),
    "say-as": frozenset({"detail"}),
    "voice": frozenset({"gender", "age", "variant", "languages", "required", "ordering",
                        "onvoicefailure", "xml:lang"}),
    "audio": frozenset({"fetchtimeout", "fetchhint", "maxage", "maxstale", "clipBegin",
                        "clipEnd", "repeatCount", "repeatDur", "soundLevel", "speed"}),
}
"""SSML 1.1 attributes of those elements that the agent cannot honour: ignored, with a warning."""
TRANSPARENT: Final = frozenset({"emphasis", "lang", "token", "w", "lookup"})
"""SSML 1.1 elements whose content is spoken as if they were not there (with a warning)."""
SKIPPED: Final = frozenset({"mark", "desc", "meta", "metadata", "lexicon"})
"""SSML 1.1 elements that are not spoken (a mark, a description, metadata)."""
_TEXT_ONLY: Final = frozenset({"say-as", "sub", "phoneme"})
_EMPTY: Final = frozenset({"break"})
_QUOTED_CHARS: Final = 40


def foreign(name: str) -> bool:
    """True for a name of another namespace (``amazon:effect``, ``mstts:express-as``)."""
    return ":" in name and not name.startswith(("xml:", "xsi:"))


def quoted(value: str) -> str:
    """``value`` for a warning: quoted, and cut to a few words."""
    value = " ".join(value.split())
    return repr(value if len(value) <= _QUOTED_CHARS else value[:_QUOTED_CHARS - 3] + "...")


def check(node: Node, *, root: bool) -> list[str]:
    """Refuse an element or attribute outside what is read or ignored, and misplaced content;
    the warnings for the attributes ignored (``ignored <prosody pitch>``)."""
    if node.tag in TRANSPARENT or node.tag in SKIPPED or foreign(node.tag):
        return []  # the element is ignored, and its attributes with it
    allowed = ATTRIBUTES.get(node.tag)
    if allowed is None or (node.tag == "speak" and not root):
        supported = ", ".join(ATTRIBUTES)
        where = "inside <speak>" if node.tag == "speak" else "is not supported"
        raise SsmlError(f"SSML element <{node.tag}> {where} ({node.where}); "
                        f"supported: {supported}")
    ignored = IGNORED_ATTRIBUTES.get(node.tag, frozenset())
    warnings = []
    for name in node.attrs:
        if name in ignored or foreign(name):
            warnings.append(f"ignored <{node.tag} {name}>")
        elif name not in allowed:
            raise SsmlError(f"attribute {name} of <{node.tag}> is not supported ({node.where});"
                            f" supported: {', '.join(sorted(allowed)) or 'none'}")
    if node.tag in _EMPTY and (node.text().strip()
                               or any(isinstance(c, Node) for c in node.content)):
        raise SsmlError(f"<{node.tag}> must be empty ({node.where})")
    for child in node.content:
        if node.tag in _TEXT_ONLY and isinstance(child, Node):
            raise SsmlError(f"<{node.tag}> holds text only, not <{child.tag}> ({child.where})")
    return warnings


def required(node: Node, name: str) -> str:
    value = node.attrs.get(name, "").strip()
    if not value:
        raise SsmlError(f"<{node.tag}> needs a non-empty {name} attribute ({node.where})")
    return value
