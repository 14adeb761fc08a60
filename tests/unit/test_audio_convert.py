"""Format conversion for the device: resampling, channel mapping, sample encoding, gains."""

from __future__ import annotations

import numpy as np
import pytest

from agent.audio.convert import Resampler, StreamConverter, decode, encode, map_channels
from agent.audio.format import AudioChunk, AudioFormat
from agent.audio.volume import SoftwareGain, fade_out_curve


def _sine(freq: float, rate: int, frames: int, level: float = 0.5) -> np.ndarray:
    t = np.arange(frames) / rate
    return (level * np.sin(2 * np.pi * freq * t)).astype(np.float32)[:, None]


def _peak_hz(signal: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(signal - signal.mean()))
    return float(np.fft.rfftfreq(len(signal), 1 / rate)[int(np.argmax(spectrum))])


@pytest.mark.parametrize(("src", "dst"), [(22050, 48000), (22050, 44100), (48000, 16000),
                                          (16000, 22050), (22050, 47999)])
def test_resampler_output_length_is_exact_and_tone_is_preserved(src: int, dst: int) -> None:
    frames = 2 * src
    resampler = Resampler(src, dst, 1)
    out = np.concatenate([resampler.push(_sine(440, src, frames)), resampler.flush()])[:, 0]

    assert len(out) == round(frames * dst / src)
    ideal = 0.5 * np.sin(2 * np.pi * 440 * np.arange(len(out)) / dst)
    middle = slice(100, len(out) - 100)  # edges ring against the zeros before/after
    assert np.max(np.abs(out[middle] - ideal[middle])) < 1e-3


def test_resampler_streaming_in_odd_pieces_equals_one_shot() -> None:
    signal = _sine(300, 22050, 30000)
    whole = Resampler(22050, 48000, 1)
    expected = np.concatenate([whole.push(signal), whole.flush()])

    pieces = Resampler(22050, 48000, 1)
    out, start = [], 0
    for size in [1, 7, 4096, 13, 0, 9000, 3]:
        out.append(pieces.push(signal[start:start + size]))
        start += size
    out += [pieces.push(signal[start:]), pieces.flush()]
    assert np.array_equal(np.concatenate(out), expected)


def test_downsampling_removes_content_above_the_new_nyquist() -> None:
    resampler = Resampler(48000, 16000, 1)
    high = _sine(12000, 48000, 48000)  # above 8 kHz: must not alias down to 4 kHz
    out = np.concatenate([resampler.push(high), resampler.flush()])[200:-200, 0]
    assert np.max(np.abs(out)) < 1e-3


def test_stream_converter_mono_22k_to_stereo_48k() -> None:
    converter = StreamConverter(48000, 2)
    pcm = (_sine(440, 22050, 22050)[:, 0] * 32767).astype("<i2")
    fmt = AudioFormat(rate=22050)
    halves = [AudioChunk(pcm[:10000].tobytes(), fmt), AudioChunk(pcm[10000:].tobytes(), fmt)]
    out = np.concatenate([converter.push(c) for c in halves] + [converter.flush()])

    assert out.shape == (48000, 2)
    assert np.array_equal(out[:, 0], out[:, 1])
    assert abs(_peak_hz(out[:, 0], 48000) - 440) <= 1.0


def test_stream_converter_same_rate_is_bit_exact() -> None:
    pcm = np.array([1, -1, 32767, -32768, 1234], dtype="<i2")
    converter = StreamConverter(22050, 1)
    out = converter.push(AudioChunk(pcm.tobytes(), AudioFormat(rate=22050)))
    assert encode(out, "S16_LE") == pcm.tobytes()
    assert len(converter.flush()) == 0


def test_encode_formats_round_and_clip() -> None:
    frames = np.array([[0.5], [-1.0], [2.0], [-2.0]], dtype=np.float32)
    assert np.frombuffer(encode(frames, "S16_LE"), "<i2").tolist() == [16384, -32768, 32767,
                                                                        -32768]
    s32 = np.frombuffer(encode(frames, "S32_LE"), "<i4").tolist()
    assert s32 == [1 << 30, -(1 << 31), (1 << 31) - 1, -(1 << 31)]
    s24 = encode(frames, "S24_3LE")
    assert len(s24) == 12
    assert int.from_bytes(s24[0:3], "little", signed=True) == 1 << 22
    assert int.from_bytes(s24[3:6], "little", signed=True) == -(1 << 23)
    with pytest.raises(ValueError, match="unsupported sample format"):
        encode(frames, "MU_LAW")


def test_decode_and_channel_mapping() -> None:
    stereo = AudioChunk(np.array([100, 300, -200, 0], dtype="<i2").tobytes(),
                        AudioFormat(rate=16000, channels=2))
    frames = decode(stereo)
    assert frames.shape == (2, 2)
    assert np.allclose(map_channels(frames, 1)[:, 0] * 32768, [200, -100])
    assert map_channels(frames[:, :1], 4).shape == (2, 4)
    with pytest.raises(ValueError, match="cannot map"):
        map_channels(np.zeros((1, 3), np.float32), 2)


def test_software_gain_ramps_at_a_fixed_slope_and_stops_at_target() -> None:
    gain = SoftwareGain(1.0, ramp_s=0.01)  # full scale in 480 frames at 48 kHz
    assert gain.advance(100, 48000) == 1.0
    gain.set(0.25)
    ramp = np.asarray(gain.advance(1000, 48000))
    steps = np.diff(np.concatenate([[1.0], ramp]))
    assert np.all(steps <= 0)
    assert np.max(np.abs(steps)) <= 1 / 480 + 1e-6  # never a jump
    assert ramp[-1] == pytest.approx(0.25)
    assert np.argmax(ramp <= 0.25 + 1e-6) == pytest.approx(0.75 * 480, abs=2)
    assert gain.advance(10, 48000) == pytest.approx(0.25)


def test_fade_out_curve_is_smooth_and_ends_silent() -> None:
    curve = fade_out_curve(441)
    assert curve[0] > 0.999
    assert curve[-1] == 0.0
    assert np.all(np.diff(curve) <= 0)
    assert np.max(np.abs(np.diff(curve))) < 0.004
