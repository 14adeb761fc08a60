"""A persistent, size-bounded cache of synthesized audio for phrases that repeat.

An entry is a whole utterance (:mod:`agent.pipeline.render`), keyed by everything that changes its
audio (:func:`phrase_inputs`), in a file ``<dir>/<key[:2]>/<key>.pcm`` whose payload's sha256 is
checked on every read; writes are atomic, and the least recently used entries are evicted past the
size bound. The exact-request index (:mod:`agent.pipeline.request_key`) maps a request as it came
to its entry, in small ``.ref`` files under the same bound, so a repeat is found without
phonemizing. The keys, the file formats and the bounds: docs/internals.md#the-phrase-cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import astuple
from pathlib import Path
from typing import Any

from agent import __version__, jsonbound
from agent.audio.format import AudioChunk, AudioFormat
from agent.fsutil import atomic_write
from agent.logs import get_logger
from agent.text.frontend import Sentence
from agent.voice.voice import SynthesisParams, Voice

__all__ = ["PhraseCache", "cache_key", "open_phrase_cache", "phrase_inputs", "store_when_complete"]

log = get_logger(__name__)

MAGIC = b"TTSPC1\n"
MAX_HEADER_BYTES = 64 * 1024
REF_MAGIC = b"TTSPX1 "
"""An exact-index file: this, the entry's key, a check binding it to the file's name, newline."""
REF_CHARGE = 4096
"""What an exact-index file counts against the size bound (a filesystem block)."""


def cache_key(text: str, voice: str, model_sha256: str, params: SynthesisParams,
              chunking: tuple[int, ...] = (), *, inputs: Sequence[Any] = ()) -> str:
    """The cache key of ``text`` (already normalised) spoken by that exact model with ``params``;
    ``chunking`` is the voice's clause splitting and stream windows, which also shape the audio;
    ``inputs`` the rest of what does (:func:`phrase_inputs`). JSON-able values only."""
    material = json.dumps([text, voice, model_sha256, astuple(params), chunking, *inputs],
                          ensure_ascii=False)
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


def phrase_inputs(voice: Voice, sentences: Sequence[Sentence]) -> list[Any]:
    """What else shapes ``voice``'s audio of ``sentences`` besides the text, the model file and
    the request's parameters: the variant, the voice config's sha256 (default scales, sample
    rate, id map), the sample rate and sentence silence in force, each sentence's text and
    phoneme ids as fed to the model, and the agent's version."""
    bundle = voice.bundle
    return [voice.variant, bundle.sha256.get(bundle.config_path.name, ""), voice.sample_rate,
            voice.sentence_silence_s, __version__,
            [[s.text, voice.frontend.ids(s)] for s in sentences]]


class PhraseCache:
    """Disk cache of synthesized phrases. Thread-safe; safe across processes sharing ``root``.

    ``exact_index=False`` leaves the exact-request index out: every lookup phonemizes the
    request to find its entry, which is slower (``bench/phrase_cache.py`` measures both ways).
    """

    def __init__(self, root: Path, max_bytes: int, *, exact_index: bool = True) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self.exact_index = exact_index
        self._lock = threading.Lock()
        self.hits = self.misses = self.evictions = self.corrupt = self.exact_hits = 0
        root.mkdir(parents=True, exist_ok=True)
        self._sizes: dict[Path, int] = {}
        for path in root.glob("??/*"):
            if path.suffix not in (".pcm", ".ref"):
                continue  # a temporary file of a write under way
            try:
                self._sizes[path] = _charge(path, path.stat().st_size)
            except FileNotFoundError:
                continue

    def _path(self, key: str, suffix: str = ".pcm") -> Path:
        if len(key) != 64 or any(c not in "0123456789abcdef" for c in key):
            raise ValueError("cache keys are sha256 hex digests")
        return self.root / key[:2] / f"{key}{suffix}"

    def get(self, key: str) -> list[AudioChunk] | None:
        """The cached chunks for ``key``, or None (miss, or an entry that failed its checks)."""
        path = self._path(key)
        chunks = self._load(path)
        with self._lock:
            if chunks is None:
                self.misses += 1
            else:
                self.hits += 1
        return chunks

    def _load(self, path: Path) -> list[AudioChunk] | None:
        """The entry at ``path`` (its mtime refreshed), or None; a damaged one is removed."""
        try:
            with path.open("rb") as handle:
                chunks = self._read(handle.read())
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            self._corrupt(path, exc)
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # least recently used = oldest mtime
        return chunks

    def _corrupt(self, path: Path, exc: Exception) -> None:
        log.warning("phrase_cache_corrupt", entry=path.name, reason=str(exc))
        self._drop(path)
        with self._lock:
            self.corrupt += 1

    # -- the exact-request index ---------------------------------------------------------

    def get_exact(self, exact: str) -> list[AudioChunk] | None:
        """The chunks of the entry the request of key ``exact``
        (:func:`agent.pipeline.request_key.request_key`) was last served, counted as a hit; None
        (not counted: the caller looks the entry up by its key next) when there is no such
        record, its entry is gone, or either fails its checks."""
        ref = self._path(exact, ".ref")
        try:
            with ref.open("rb") as handle:
                entry = self._path(_ref_target(exact, handle.read(256)))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            self._corrupt(ref, exc)
            return None
        chunks = self._load(entry)
        if chunks is None:
            return None
        with contextlib.suppress(OSError):
            os.utime(ref)
        with self._lock:
            self.hits += 1
            self.exact_hits += 1
        return chunks

    def put_exact(self, exact: str, key: str) -> None:
        """Record that the request of key ``exact`` is served the entry ``key``."""
        path = self._path(exact, ".ref")
        self._path(key)  # checks it
        path.parent.mkdir(exist_ok=True)
        atomic_write(path, REF_MAGIC + f"{key} {_ref_check(exact, key)}\n".encode(),
                     prefix=".ref-")
        with self._lock:
            self._sizes[path] = REF_CHARGE
        self._evict()

    @staticmethod
    def _read(data: bytes) -> list[AudioChunk]:
        if not data.startswith(MAGIC):
            raise ValueError("bad magic")
        end = data.find(b"\n", len(MAGIC), len(MAGIC) + MAX_HEADER_BYTES)
        if end < 0:
            raise ValueError("no header")
        header: Any = jsonbound.loads(data[len(MAGIC):end], max_bytes=MAX_HEADER_BYTES)
        payload = data[end + 1:]
        digest = hashlib.sha256(payload).hexdigest()
        if len(payload) != header["bytes"] or digest != header["sha256"]:
            raise ValueError("payload does not match its header")
        first = AudioFormat(rate=int(header["rate"]), width=int(header["width"]),
                            channels=int(header["channels"]))
        chunks, offset = [], 0
        for entry in header["chunks"]:
            fmt = first if "rate" not in entry else AudioFormat(
                rate=int(entry["rate"]), width=int(entry["width"]),
                channels=int(entry["channels"]))
            size = int(entry["frames"]) * fmt.frame_bytes
            if size < 0:
                raise ValueError("negative chunk length")
            chunks.append(AudioChunk(payload[offset:offset + size], fmt, str(entry["text"])))
            offset += size
        if offset != len(payload) or not chunks:
            raise ValueError("chunk table does not cover the payload")
        return chunks

    def put(self, key: str, chunks: Sequence[AudioChunk]) -> bool:
        """Store ``chunks`` under ``key``; False when the entry alone exceeds the bound."""
        if not chunks:
            raise ValueError("a cache entry is a non-empty list of chunks")
        payload = b"".join(c.audio for c in chunks)
        fmt = chunks[0].format
        header: dict[str, Any] = {
            "rate": fmt.rate, "width": fmt.width, "channels": fmt.channels,
            "bytes": len(payload), "sha256": hashlib.sha256(payload).hexdigest(),
            "chunks": [_chunk_entry(c, fmt) for c in chunks],
        }
        blob = MAGIC + json.dumps(header, ensure_ascii=False).encode("utf-8") + b"\n" + payload
        if len(blob) > self.max_bytes:
            return False
        path = self._path(key)
        path.parent.mkdir(exist_ok=True)
        atomic_write(path, blob, prefix=".put-")
        with self._lock:
            self._sizes[path] = len(blob)
        self._evict()
        return True

    def _evict(self) -> None:
        with self._lock:
            total = sum(self._sizes.values())
            if total <= self.max_bytes:
                return
            entries = []
            for path in list(self._sizes):
                try:
                    entries.append((path.stat().st_mtime_ns, path))
                except FileNotFoundError:
                    total -= self._sizes.pop(path)
            for _, path in sorted(entries):
                if total <= self.max_bytes:
                    break
                total -= self._sizes.pop(path, 0)
                path.unlink(missing_ok=True)
                self.evictions += path.suffix == ".pcm"  # a record is not an utterance

    def _drop(self, path: Path) -> None:
        path.unlink(missing_ok=True)
        with self._lock:
            self._sizes.pop(path, None)

    def stats(self) -> dict[str, int]:
        """Counters and current size, for health reports: ``entries`` are utterances,
        ``exact_entries`` exact-index records, ``bytes`` what both count against the bound,
        ``exact_hits`` the hits found through the index (they count in ``hits`` too)."""
        with self._lock:
            refs = sum(1 for path in self._sizes if path.suffix == ".ref")
            return {"entries": len(self._sizes) - refs, "exact_entries": refs,
                    "bytes": sum(self._sizes.values()), "max_bytes": self.max_bytes,
                    "hits": self.hits, "misses": self.misses, "exact_hits": self.exact_hits,
                    "evictions": self.evictions, "corrupt": self.corrupt}


def _charge(path: Path, size: int) -> int:
    return REF_CHARGE if path.suffix == ".ref" else size


def _ref_check(exact: str, key: str) -> str:
    return hashlib.sha256(f"{exact} {key}".encode()).hexdigest()[:32]


def _ref_target(exact: str, data: bytes) -> str:
    """The entry key an exact-index file of key ``exact`` names; ValueError when damaged."""
    if not data.startswith(REF_MAGIC) or not data.endswith(b"\n"):
        raise ValueError("bad exact-index record")
    key, _, check = data[len(REF_MAGIC):-1].decode("ascii", "replace").partition(" ")
    if check != _ref_check(exact, key):
        raise ValueError("exact-index record does not match its name")
    return key


def _chunk_entry(chunk: AudioChunk, first: AudioFormat) -> dict[str, Any]:
    entry: dict[str, Any] = {"frames": chunk.frames, "text": chunk.text}
    if chunk.format != first:
        entry.update(rate=chunk.format.rate, width=chunk.format.width,
                     channels=chunk.format.channels)
    return entry


def store_when_complete(cache: PhraseCache, key: str, chunks: Iterator[AudioChunk], *,
                        exact: str | None = None, stored: bool = False) -> Iterator[AudioChunk]:
    """``chunks`` as they come, stored in ``cache`` under ``key`` once the last has been taken:
    only an utterance synthesized to its end is stored, an abandoned one never is. ``exact``:
    the request's exact-index key, recorded then too; ``stored``: ``chunks`` are the entry's
    own (a hit), only the record is written."""
    done: list[AudioChunk] = []
    for chunk in chunks:
        done.append(chunk)
        yield chunk
    try:
        if (stored or cache.put(key, done)) and exact is not None:
            cache.put_exact(exact, key)
    except OSError as exc:
        log.warning("phrase_cache_write_failed", error=str(exc))


def open_phrase_cache(root: Path, max_mb: int) -> PhraseCache | None:
    """The phrase cache under ``root``, or None (logged) when it is disabled or not writable."""
    if max_mb <= 0:
        return None
    try:
        return PhraseCache(root, max_mb * 1024 * 1024)
    except OSError as exc:
        log.warning("phrase_cache_disabled", dir=str(root), error=str(exc))
        return None
