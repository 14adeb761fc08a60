"""The ALSA device wrapper: opening and negotiation through real alsa-lib; write recovery.

A ``file`` PCM over ``null`` never underruns and never fills up, so the EPIPE,
short-write and stalled-device branches of :meth:`OutputDevice.write` are driven
by a stand-in PCM object that answers the way pyalsaaudio does (``write`` returns
``-EPIPE`` after re-preparing the stream, 0 when the buffer is full).
"""

from __future__ import annotations

import errno

import alsaaudio
import numpy as np
import pytest

from agent.audio import device as device_module
from agent.audio.device import (
    DeviceError,
    DeviceParams,
    OutputDevice,
    default_period_frames,
    open_output,
)
from tests.support.alsa_sink import AlsaConfig, read_samples


@pytest.mark.alsa
def test_open_negotiates_the_requested_format_and_sizes(alsa: AlsaConfig) -> None:
    out = alsa.add_file("spk")
    device = open_output("spk", 22050, 1, period_frames=256, buffer_periods=6)
    try:
        assert device.params == DeviceParams("spk", 22050, 1, "S16_LE", 256, 1536)
        frames = np.arange(1, 1001, dtype="<i2")
        device.write(frames.tobytes())
        device.drop()
    finally:
        device.close()
    assert np.array_equal(read_samples(out)[:, 0], frames)


@pytest.mark.alsa
def test_default_period_is_about_20_ms(alsa: AlsaConfig) -> None:
    alsa.add_file("spk")
    device = open_output("spk", 48000, 2)
    try:
        assert device.params.period_frames == default_period_frames(48000) == 1024
        assert device.params.buffer_frames == 4 * 1024
        assert device.params.frame_bytes == 4
    finally:
        device.close()


@pytest.mark.alsa
def test_unknown_device_is_a_clear_error(alsa: AlsaConfig) -> None:
    with pytest.raises(DeviceError, match=r"cannot open ALSA device 'nowhere'"):
        open_output("nowhere", 22050, 1)


class _StandInPcm:
    """Answers ``write`` with a scripted sequence, then accepts everything."""

    def __init__(self, script: list[object]) -> None:
        self.script = list(script)
        self.received = bytearray()

    def write(self, data: memoryview) -> int:
        frames = len(data) // 2
        step = self.script.pop(0) if self.script else "all"
        if isinstance(step, Exception):
            raise step
        if step == "all":
            self.received += bytes(data)
            return frames
        count = int(step)  # type: ignore[call-overload]
        if count > 0:
            self.received += bytes(data[: count * 2])
        return count

    def avail(self) -> int:
        return 1024


def _device(pcm: _StandInPcm) -> OutputDevice:
    params = DeviceParams("stand-in", 22050, 1, "S16_LE", 256, 1024)
    return OutputDevice(pcm, params, requested=(22050, 1))


def test_underrun_is_counted_and_the_data_written_again() -> None:
    pcm = _StandInPcm([-errno.EPIPE, "all", -errno.EPIPE])
    device = _device(pcm)
    device.write(b"\x01\x00" * 300)
    device.write(b"\x02\x00" * 10)
    assert device.underruns == 2
    assert bytes(pcm.received) == b"\x01\x00" * 300 + b"\x02\x00" * 10


def test_short_writes_and_full_buffer_continue_where_they_stopped() -> None:
    pcm = _StandInPcm([100, 0, 0, 50, "all"])
    data = np.arange(400, dtype="<i2").tobytes()
    _device(pcm).write(data)
    assert bytes(pcm.received) == data


def test_alsa_error_becomes_device_error() -> None:
    pcm = _StandInPcm([alsaaudio.ALSAAudioError("No such device [hw:1]")])
    with pytest.raises(DeviceError, match="No such device"):
        _device(pcm).write(b"\x00\x00" * 10)


def test_device_that_stops_taking_audio_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(device_module, "_STALL_MIN_S", 0.05)
    pcm = _StandInPcm([0] * 100_000)
    with pytest.raises(DeviceError, match="stopped taking audio"):
        _device(pcm).write(b"\x00\x00" * 10)


def test_endless_underruns_give_up() -> None:
    pcm = _StandInPcm([-errno.EPIPE] * 100)
    with pytest.raises(DeviceError, match="keeps underrunning"):
        _device(pcm).write(b"\x00\x00" * 10)
