"""Objective comparison of two renderings of the same utterance (numpy only).

Used by the int8 quality gate (:mod:`agent.quantize.recipe`) and the benchmarks. Both measures are
insensitive to phase, on purpose: a quantized flow shifts the waveform's phase (waveform SNR
near 0 dB) without changing what is heard, while hiss or a dull, smeared spectrum shows up in
both.
"""

from __future__ import annotations

import numpy as np

__all__ = ["mel_distance_db", "spectral_snr_db"]

N_FFT = 1024
HOP = 256


def _stft_magnitude(signal: np.ndarray) -> np.ndarray:
    """|STFT| with a Hann window: frames x (N_FFT // 2 + 1) bins."""
    signal = np.asarray(signal, dtype=np.float64).reshape(-1)
    if signal.size < N_FFT:
        signal = np.pad(signal, (0, N_FFT - signal.size))
    frames = 1 + (signal.size - N_FFT) // HOP
    index = np.arange(N_FFT)[None, :] + HOP * np.arange(frames)[:, None]
    return np.abs(np.fft.rfft(signal[index] * np.hanning(N_FFT), axis=1))


def _mel_filters(sample_rate: int, bands: int, f_max: float) -> np.ndarray:
    """Triangular mel filter bank: bands x (N_FFT // 2 + 1)."""
    freqs = np.fft.rfftfreq(N_FFT, 1.0 / sample_rate)
    mel_max = 2595.0 * np.log10(1.0 + min(f_max, sample_rate / 2) / 700.0)
    edges = 700.0 * (10.0 ** (np.linspace(0.0, mel_max, bands + 2) / 2595.0) - 1.0)
    low, centre, high = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    rising = (freqs[None, :] - low) / (centre - low)
    falling = (high - freqs[None, :]) / (high - centre)
    return np.clip(np.minimum(rising, falling), 0.0, None)


def _same_length(reference: np.ndarray, test: np.ndarray) -> None:
    if np.size(reference) != np.size(test):
        raise ValueError(f"signals differ in length: {np.size(reference)} != {np.size(test)}")


def spectral_snr_db(reference: np.ndarray, test: np.ndarray) -> float:
    """SNR of ``test``'s STFT magnitudes against ``reference``'s, in dB (same length).

    A broken model (wrong weights, noise) scores around 0 dB or below.
    """
    _same_length(reference, test)
    ref, out = _stft_magnitude(reference), _stft_magnitude(test)
    noise = float(np.sum(np.square(ref - out)))
    if noise == 0.0:
        return float("inf")
    return 10.0 * float(np.log10(max(float(np.sum(np.square(ref))), 1e-30) / noise))


def mel_distance_db(reference: np.ndarray, test: np.ndarray, sample_rate: int, *,
                    bands: int = 80, f_max: float = 8000.0, floor_db: float = 80.0) -> float:
    """RMS difference of the log-mel spectrograms (dB): 0..``f_max`` Hz in ``bands`` bands.

    Levels are floored ``floor_db`` below the reference's loudest band, so hiss added in pauses
    counts (it is audible, and it is what breaks speech recognisers) while differences far
    below hearing do not.
    """
    _same_length(reference, test)
    filters = _mel_filters(sample_rate, bands, f_max)
    ref = _stft_magnitude(reference) @ filters.T
    out = _stft_magnitude(test) @ filters.T
    floor = max(float(ref.max()), 1e-12) * 10.0 ** (-floor_db / 20.0)
    diff = 20.0 * np.log10(np.maximum(ref, floor)) - 20.0 * np.log10(np.maximum(out, floor))
    return float(np.sqrt(np.mean(np.square(diff))))
