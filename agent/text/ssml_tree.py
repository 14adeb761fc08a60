"""SSML's XML, read safely: the tree :mod:`agent.text.ssml` walks, and :class:`SsmlError`.

SSML arrives from the network, so it is parsed with defusedxml: a document type declaration
(and with it every entity declaration, the "billion laughs" and external entities) is refused
before anything is expanded, and the tree is bounded while it is built (:data:`MAX_DEPTH`,
:data:`MAX_ELEMENTS`, :data:`MAX_ATTRIBUTE_CHARS`), on top of the request's own text limit.
Comments and processing instructions are dropped; CDATA is text. An element or attribute of
another namespace is named ``prefix:local`` (a vendor's, such as ``amazon:effect``: a prefix
used without a declaration, as Amazon's SSML does, is declared for it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final
from xml.etree.ElementTree import ParseError

from defusedxml import DTDForbidden, EntitiesForbidden, ExternalReferenceForbidden
from defusedxml.ElementTree import DefusedXMLParser

__all__ = ["MAX_ATTRIBUTE_CHARS", "MAX_DEPTH", "MAX_ELEMENTS", "SSML_NAMESPACE", "Node",
           "SsmlError", "parse_tree"]

SSML_NAMESPACE: Final = "http://www.w3.org/2001/10/synthesis"
_NAMESPACES: Final = {"http://www.w3.org/XML/1998/namespace": "xml",
                      "http://www.w3.org/2001/XMLSchema-instance": "xsi"}

MAX_DEPTH: Final = 32
"""Deepest nesting of elements."""
MAX_ELEMENTS: Final = 1000
"""Most elements in one document."""
MAX_ATTRIBUTE_CHARS: Final = 1000
"""Longest attribute value (an ``alias``, a ``ph``...)."""


MAX_REASON_CHARS: Final = 400
"""An error's message is cut to this length (it may quote an attribute value)."""


class SsmlError(ValueError):
    """SSML that cannot be spoken; the message is one line for the sender."""

    def __init__(self, message: str) -> None:
        line = " ".join(message.split())
        super().__init__(line if len(line) <= MAX_REASON_CHARS
                         else line[:MAX_REASON_CHARS - 3] + "...")


@dataclass(slots=True)
class Node:
    tag: str
    attrs: dict[str, str]
    where: str
    """``line L, column C`` of its start tag (as the XML parser counts)."""
    content: list[Node | str] = field(default_factory=list)

    def text(self) -> str:
        return "".join(c for c in self.content if isinstance(c, str))


_UNDECLARED: Final = "urn:x-tts-agent:undeclared:"
"""The namespace given to a prefix used without a declaration."""
_PREFIXED: Final = re.compile(r"(?:</?|\s)([A-Za-z_][A-Za-z0-9_.-]*):[A-Za-z_][A-Za-z0-9_.-]*")
_DECLARED: Final = re.compile(r"xmlns:([A-Za-z_][A-Za-z0-9_.-]*)\s*=")
_SPEAK_TAG: Final = re.compile(r"<speak(?=[\s/>])")


@dataclass(frozen=True, slots=True)
class _Shift:
    """Characters added at ``line``, ``column`` (declarations): positions after it move back."""

    line: int = 0
    column: int = 0
    added: int = 0

    def where(self, line: int, column: int) -> str:
        if line == self.line and column > self.column:
            column -= self.added
        return f"line {line}, column {column}"


class Builder:
    """The XML parser's target: builds :class:`Node` trees within the bounds."""

    def __init__(self, shift: _Shift | None = None) -> None:
        self.parser: DefusedXMLParser | None = None
        """Set once the parser exists: where the tag being read starts."""
        self.shift = shift or _Shift()
        self._stack: list[Node] = []
        self._count = 0
        self.root: Node | None = None

    def start(self, tag: str, attrs: dict[str, str]) -> None:
        expat = None if self.parser is None else self.parser.parser
        where = ("" if expat is None else
                 self.shift.where(expat.CurrentLineNumber, expat.CurrentColumnNumber))
        self._count += 1
        if self._count > MAX_ELEMENTS:
            raise SsmlError(f"SSML has more than {MAX_ELEMENTS} elements ({where})")
        if len(self._stack) >= MAX_DEPTH:
            raise SsmlError(f"SSML nests deeper than {MAX_DEPTH} elements ({where})")
        names = {}
        for key, value in attrs.items():
            name = _qualified(key, where, "attribute")
            if len(value) > MAX_ATTRIBUTE_CHARS:
                raise SsmlError(f"attribute {name} is longer than {MAX_ATTRIBUTE_CHARS} "
                                f"characters ({len(value)}; {where})")
            names[name] = value
        node = Node(_qualified(tag, where, "element"), names, where)
        if self._stack:
            self._stack[-1].content.append(node)
        else:
            self.root = node
        self._stack.append(node)

    def end(self, tag: str) -> None:
        self._stack.pop()

    def data(self, data: str) -> None:
        if not self._stack:
            return
        content = self._stack[-1].content
        if content and isinstance(content[-1], str):
            content[-1] += data
        else:
            content.append(data)

    def close(self) -> Node | None:
        return self.root


def _qualified(name: str, where: str, kind: str) -> str:
    """``speak`` for ``{ssml-namespace}speak``, ``xml:lang`` for the XML namespace's ``lang``,
    ``prefix:local`` (the parser reports ``{uri}local}prefix``) for another namespace's."""
    if not name.startswith("{"):
        return name
    namespace, _, rest = name[1:].partition("}")
    local, _, prefix = rest.partition("}")
    if namespace == SSML_NAMESPACE and kind == "element":
        return local
    if namespace in _NAMESPACES and kind == "attribute":
        return f"{_NAMESPACES[namespace]}:{local}"
    if namespace == SSML_NAMESPACE or not prefix:  # an SSML attribute, a default namespace
        raise SsmlError(f"unsupported {kind} {local!r} in namespace {namespace!r} ({where})")
    return f"{prefix}:{local}"


def parse_tree(text: str) -> Node:
    """The tree of ``text``; a prefix used without a declaration is declared (once)."""
    try:
        return _parse(text, _Shift())
    except _Unbound:
        pass
    declared = set(_DECLARED.findall(text))
    prefixes = sorted({p for p in _PREFIXED.findall(text)
                       if not p.lower().startswith("xml") and p not in declared})
    speak = _SPEAK_TAG.search(text)
    if speak is None or not prefixes:
        return _parse(text, _Shift(), unbound=True)
    declarations = "".join(f' xmlns:{p}="{_UNDECLARED}{p}"' for p in prefixes)
    before = text[:speak.end()]
    line = before.count("\n") + 1
    column = len(before) - (before.rfind("\n") + 1)
    return _parse(before + declarations + text[speak.end():],
                  _Shift(line, column, len(declarations)), unbound=True)


class _Unbound(Exception):
    """The XML uses a namespace prefix it does not declare."""


def _parse(text: str, shift: _Shift, *, unbound: bool = False) -> Node:
    builder = Builder(shift)
    parser = DefusedXMLParser(target=builder, forbid_dtd=True, forbid_entities=True,
                              forbid_external=True)
    parser.parser.namespace_prefixes = True  # foreign names keep their prefix
    builder.parser = parser
    try:
        parser.feed(text)
        parser.close()
    except ParseError as exc:
        if not unbound and str(exc).startswith("unbound prefix"):
            raise _Unbound from None
        line, column = exc.position
        message = str(exc).split(":")[0]
        raise SsmlError(f"malformed SSML: {message}: {shift.where(line, column)}") from None
    except DTDForbidden as exc:
        raise SsmlError(f"SSML must not have a document type declaration (<!DOCTYPE "
                        f"{exc.name}>): DTDs and entity declarations are refused") from None
    except EntitiesForbidden as exc:
        raise SsmlError(f"SSML must not declare entities (entity {exc.name!r})") from None
    except ExternalReferenceForbidden:
        raise SsmlError("SSML must not refer to external entities") from None
    if builder.root is None:
        raise SsmlError("malformed SSML: no element found")
    return builder.root
