"""Sentences and the model inputs made of them, for calibration and for the quality gate.

:func:`read_sentences` reads a sentence file (or the shipped corpus, :func:`packaged_corpus`),
:func:`sentence_feeds` turns the sentences into exactly what :class:`agent.voice.voice.Voice`
feeds the model (``input``, ``input_lengths``, ``scales``, made by the voice's own frontend), and
:class:`CalibrationReader` hands them to onnxruntime's calibrator.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from agent.quantize.errors import QuantizeError

if TYPE_CHECKING:
    from agent.text.frontend import Frontend

__all__ = [
    "CalibrationReader",
    "Feeds",
    "Scales",
    "packaged_corpus",
    "read_sentences",
    "sentence_feeds",
    "sentences_sha256",
]

Feeds = dict[str, np.ndarray]
Scales = tuple[float, float, float]
"""Piper's ``scales`` input: (noise_scale, length_scale, noise_w)."""

MAX_SENTENCE_FILE_BYTES = 1 << 20
MAX_SENTENCES = 1000
MAX_SENTENCE_CHARS = 1000


def packaged_corpus(name: Literal["calibration", "heldout"]) -> Traversable:
    """The sentence file shipped in the package (``agent/quantize/corpus/NAME.txt``):
    ``calibration`` to calibrate on, ``heldout`` for the quality gate (the two are disjoint)."""
    return files("agent.quantize").joinpath("corpus", f"{name}.txt")


def read_sentences(source: Path | Traversable) -> list[str]:
    """Non-empty lines of a UTF-8 file, ``#`` comment lines skipped; size-limited."""
    try:
        with source.open("rb") as handle:
            data = handle.read(MAX_SENTENCE_FILE_BYTES + 1)
        if len(data) > MAX_SENTENCE_FILE_BYTES:
            raise QuantizeError(f"{source}: larger than {MAX_SENTENCE_FILE_BYTES} bytes")
        lines = data.decode("utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise QuantizeError(f"cannot read sentences from {source}: {exc}") from exc
    sentences = [line.strip() for line in lines
                 if line.strip() and not line.lstrip().startswith("#")]
    if not sentences:
        raise QuantizeError(f"{source}: no sentences")
    if len(sentences) > MAX_SENTENCES:
        raise QuantizeError(f"{source}: more than {MAX_SENTENCES} sentences")
    if any(len(s) > MAX_SENTENCE_CHARS for s in sentences):
        raise QuantizeError(f"{source}: a line is longer than {MAX_SENTENCE_CHARS} characters")
    return sentences


def sentences_sha256(sentences: Sequence[str]) -> str:
    """sha256 of the sentences as used (one per line, UTF-8): names a calibration set."""
    return hashlib.sha256("".join(s + "\n" for s in sentences).encode("utf-8")).hexdigest()


def sentence_feeds(frontend: Frontend, texts: Iterable[str],
                   scales: Scales) -> list[tuple[str, Feeds]]:
    """Model inputs (with their text) for every sentence the frontend makes of ``texts``.

    ``frontend`` is the voice's :class:`agent.text.frontend.Frontend`, so the ids are exactly those
    the voice is fed at run time.
    """
    from agent.voice.voice import model_feeds

    feeds: list[tuple[str, Feeds]] = []
    for text in texts:
        for sentence in frontend.sentences(text):
            feeds.append((sentence.text, model_feeds(frontend.ids(sentence), scales)))
    return feeds


class CalibrationReader:
    """onnxruntime ``CalibrationDataReader`` over prepared model inputs.

    Duck-typed (onnxruntime accepts any object with ``get_next``); rewindable.
    """

    def __init__(self, feeds: Sequence[Feeds]) -> None:
        if not feeds:
            raise QuantizeError("no calibration inputs")
        self._feeds = list(feeds)
        self._next = 0

    def __len__(self) -> int:
        return len(self._feeds)

    def get_next(self) -> Feeds | None:
        """The next input, or ``None`` when all were handed out."""
        if self._next >= len(self._feeds):
            return None
        feeds = self._feeds[self._next]
        self._next += 1
        return feeds

    def rewind(self) -> None:
        self._next = 0

    def chunks(self, size: int) -> Iterator[CalibrationReader]:
        """Readers over consecutive slices of ``size`` inputs."""
        for start in range(0, len(self._feeds), size):
            yield CalibrationReader(self._feeds[start:start + size])
