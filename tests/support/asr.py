"""Speech recognition for tests: does the audio say the words? (pocketsphinx, offline model)."""

from __future__ import annotations

import numpy as np

from agent.audio.format import AudioChunk

ASR_RATE = 16000


def transcribe(chunks: list[AudioChunk]) -> str:
    """Lower-case words pocketsphinx hears in mono 16-bit ``chunks`` (resampled to 16 kHz)."""
    from pocketsphinx import Decoder

    rate = chunks[0].format.rate
    samples = np.concatenate([c.samples()[:, 0].astype(np.float32) for c in chunks])
    positions = np.arange(0, len(samples) - 1, rate / ASR_RATE)
    resampled = np.interp(positions, np.arange(len(samples)), samples)
    pcm = np.clip(resampled * 0.8, -32768, 32767).astype("<i2").tobytes()
    decoder = Decoder(samprate=ASR_RATE, loglevel="FATAL")
    decoder.start_utt()
    decoder.process_raw(pcm, full_utt=True)
    decoder.end_utt()
    hyp = decoder.hyp()
    return hyp.hypstr.lower() if hyp is not None else ""
