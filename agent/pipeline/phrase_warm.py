"""The phrase warmer: the configured phrases (``cache.warm_phrases``) pre-synthesized into the
phrase cache after each model load, so that their first request already plays from disk."""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Sequence

from agent.logs import get_logger
from agent.pipeline.phrase_cache import PhraseCache
from agent.pipeline.render import cached_synthesis
from agent.voice.voice import SynthesisParams, Voice

__all__ = ["PhraseWarmer"]

log = get_logger(__name__)


class PhraseWarmer:
    """Pre-synthesizes the configured phrases into the cache after each model load.

    Runs on its own low-priority thread (``phrase-warm``) so a model load or start-up never
    waits for it; :meth:`warm` may be called from any thread.
    """

    def __init__(self, cache: PhraseCache, phrases: Sequence[str]) -> None:
        self.cache = cache
        self.phrases = list(phrases)
        self._queue: queue.Queue[Voice | None] = queue.Queue(maxsize=16)
        self._thread = threading.Thread(target=self._run, name="phrase-warm", daemon=True)
        self.warmed = 0

    def start(self) -> None:
        if self.phrases:
            self._thread.start()

    def warm(self, voice: Voice) -> None:
        """Queue ``voice`` for warming (dropped with a log line if the queue is full)."""
        if not self.phrases:
            return
        try:
            self._queue.put_nowait(voice)
        except queue.Full:
            log.warning("phrase_warm_queue_full", voice=voice.name)

    def _run(self) -> None:
        while (voice := self._queue.get()) is not None:
            for phrase in self.phrases:
                try:
                    for _ in cached_synthesis(self.cache, voice, phrase, SynthesisParams()):
                        pass
                    self.warmed += 1
                except Exception as exc:  # a bad phrase must not stop the others
                    log.warning("phrase_warm_failed", phrase=phrase[:80], error=str(exc))
            log.info("phrases_warmed", voice=voice.name, version=voice.version,
                     phrases=len(self.phrases))

    def stop(self, timeout: float = 5.0) -> None:
        if self._thread.is_alive():
            with contextlib.suppress(queue.Full):
                self._queue.put(None, timeout=timeout)
            self._thread.join(timeout)
