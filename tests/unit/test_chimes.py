"""Chimes (agent.audio.chimes): plain names only, regular files only, 16-bit PCM WAVs (the plain
or the extensible header) within bounds, every refusal a one-line reason; cached, and read again
when the file changes."""

from __future__ import annotations

import os
import re
import struct
import uuid
import wave
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from agent.audio.chimes import MAX_CHIME_BYTES, ChimeError, Chimes, read_chime
from agent.audio.format import AudioFormat
from agent.settings import ChimeSettings


def write_wav(path: Path, *, rate: int = 22050, channels: int = 1, width: int = 2,
              frames: int = 2205, seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, frames * channels * width, dtype=np.uint8).tobytes()
    with wave.open(str(path), "wb") as wav:
        wav.setnchannels(channels)
        wav.setsampwidth(width)
        wav.setframerate(rate)
        wav.writeframes(data)
    return data


@pytest.fixture()
def chimes(tmp_path: Path) -> Chimes:
    return Chimes(tmp_path, {"urgent": "alert"})


def test_a_chime_is_its_samples_in_its_own_format(tmp_path: Path, chimes: Chimes) -> None:
    mono = write_wav(tmp_path / "ding.wav", rate=44100)
    stereo = write_wav(tmp_path / "alert.wav", rate=8000, channels=2, seed=1)
    ding = chimes.get("ding")
    assert ding.audio == mono and ding.format == AudioFormat(44100, 2, 1)
    alert = chimes.get("alert")
    assert alert.audio == stereo and alert.format == AudioFormat(8000, 2, 2)
    assert chimes.names() == ["alert", "ding"]
    assert chimes.default_for("urgent") == "alert" and chimes.default_for("normal") is None


@pytest.mark.parametrize("name", ["../ding", "a/b", "ding.wav", "", ".hidden", "-x", "x" * 65,
                                  "d\0ng", "dïng"])
def test_only_plain_names(chimes: Chimes, name: str) -> None:
    with pytest.raises(ChimeError, match="is not a plain name"):
        chimes.get(name)


def test_an_unknown_chime_names_the_available_ones(tmp_path: Path, chimes: Chimes) -> None:
    write_wav(tmp_path / "ding.wav")
    with pytest.raises(ChimeError, match=r"^unknown chime 'gong' \(available: ding\)$"):
        chimes.get("gong")
    with pytest.raises(ChimeError, match=r"\(available: none\)"):
        Chimes(tmp_path / "missing").get("gong")


def test_a_symbolic_link_is_refused(tmp_path: Path, chimes: Chimes) -> None:
    write_wav(tmp_path / "real.wav")
    (tmp_path / "ding.wav").symlink_to(tmp_path / "real.wav")
    with pytest.raises(ChimeError, match="is a symbolic link"):
        chimes.get("ding")
    assert chimes.names() == ["real"]


def test_a_fifo_or_directory_is_refused_without_blocking(tmp_path: Path,
                                                        chimes: Chimes) -> None:
    os.mkfifo(tmp_path / "fifo.wav")
    (tmp_path / "dir.wav").mkdir()
    for name in ("fifo", "dir"):
        with pytest.raises(ChimeError, match="is not a regular file"):
            chimes.get(name)
    assert chimes.names() == []


def test_a_huge_file_is_refused_before_it_is_read(tmp_path: Path, chimes: Chimes) -> None:
    with (tmp_path / "big.wav").open("wb") as handle:
        handle.truncate(MAX_CHIME_BYTES + 1)
    with pytest.raises(ChimeError, match=f"bytes; chimes are at most {MAX_CHIME_BYTES} bytes"):
        chimes.get("big")


def header_claims(path: Path, frames: int, frame_bytes: int = 2) -> None:
    """Rewrite the data chunk's size in a plain 44-byte WAV header."""
    data = bytearray(path.read_bytes())
    assert data[36:40] == b"data"
    data[40:44] = struct.pack("<I", frames * frame_bytes)
    path.write_bytes(bytes(data))


def test_a_header_that_claims_more_than_the_file_holds(tmp_path: Path, chimes: Chimes) -> None:
    write_wav(tmp_path / "short.wav", frames=500)
    header_claims(tmp_path / "short.wav", 1000)
    with pytest.raises(ChimeError, match="truncated: its header says 1000 frames, the file "
                                         "holds 500"):
        chimes.get("short")
    write_wav(tmp_path / "huge.wav", rate=8000, frames=500)
    header_claims(tmp_path / "huge.wav", 2**31 - 1)
    with pytest.raises(ChimeError, match="chimes are at most 10 s"):
        chimes.get("huge")


@pytest.mark.parametrize(("fields", "reason"), [
    ({"width": 1}, "is 8-bit; chimes must be 16-bit PCM"),
    ({"width": 3}, "is 24-bit; chimes must be 16-bit PCM"),
    ({"channels": 3}, "has 3 channels; chimes must be mono or stereo"),
    ({"rate": 96000}, "is at 96000 Hz; chimes must be at 8000-48000 Hz"),
    ({"rate": 4000}, "is at 4000 Hz"),
    ({"frames": 0}, "holds no audio"),
    ({"rate": 8000, "frames": 80_001}, "lasts 10.0 s; chimes are at most 10 s"),
])
def test_formats_the_agent_does_not_play(tmp_path: Path, chimes: Chimes,
                                         fields: dict[str, int], reason: str) -> None:
    write_wav(tmp_path / "bad.wav", **fields)
    with pytest.raises(ChimeError, match=reason):
        chimes.get("bad")
    assert "bad" not in chimes.names()


@pytest.mark.parametrize("data", [b"", b"RIFF", b"not a wav file at all" * 10,
                                  b"RIFF\x10\x00\x00\x00WAVEfmt \x10\x00\x00\x00"])
def test_garbage_is_not_a_wav(data: bytes) -> None:
    with pytest.raises(ChimeError, match=r"^chime 'x' is not a WAV file the agent plays: "):
        read_chime("x", data)


def test_a_changed_file_is_read_again(tmp_path: Path, chimes: Chimes) -> None:
    write_wav(tmp_path / "ding.wav", seed=1)
    first = chimes.get("ding")
    assert chimes.get("ding") is first  # cached while unchanged
    replaced = tmp_path / "new.wav"
    again = write_wav(replaced, seed=2, frames=100)
    replaced.rename(tmp_path / "ding.wav")  # how a chime is replaced: atomically
    assert chimes.get("ding").audio == again
    (tmp_path / "ding.wav").write_bytes(b"broken")
    with pytest.raises(ChimeError, match="not a WAV file"):
        chimes.get("ding")


def test_settings_take_plain_names_per_priority(tmp_path: Path) -> None:
    settings = ChimeSettings(dir=tmp_path, by_priority={"urgent": "alert"})
    assert settings.by_priority == {"urgent": "alert"}
    for bad in ({"urgent": "../alert"}, {"critical": "alert"}, {"urgent": "a.wav"}):
        with pytest.raises(ValidationError):
            ChimeSettings(by_priority=bad)  # type: ignore[arg-type]


def test_the_shipped_chimes_are_generated_the_same_and_play(tmp_path: Path) -> None:
    import runpy

    make = runpy.run_path(str(Path(__file__).parents[2] / "chimes" / "make_chimes.py"))
    first = [p.read_bytes() for p in make["write"](tmp_path / "a")]
    again = [p.read_bytes() for p in make["write"](tmp_path / "b")]
    assert first == again  # the same bytes on every run
    chimes = Chimes(tmp_path / "a")
    assert chimes.names() == ["alert", "ding"]
    for name in chimes.names():
        samples = chimes.get(name).samples()[:, 0].astype(np.int32)
        assert chimes.get(name).format == AudioFormat(44100, 2, 1)
        assert 0.3 < len(samples) / 44100 <= 2.0  # short, before the speech
        assert np.abs(samples).max() <= 16384  # -6 dBFS
        assert abs(samples[0]) <= 1 and samples[-1] == 0  # faded in and out: no click
        assert np.abs(samples[:44]).max() < 2000 and np.abs(samples[-44:]).max() < 200


PCM_GUID = uuid.UUID("00000001-0000-0010-8000-00aa00389b71")
"""KSDATAFORMAT_SUBTYPE_PCM."""


def extensible_wav(audio: bytes, *, rate: int = 22050, channels: int = 1, bits: int = 16,
                   subformat: uuid.UUID = PCM_GUID, cb_size: int = 22,
                   before: bytes = b"") -> bytes:
    """A WAV with the WAVE_FORMAT_EXTENSIBLE (65534) fmt chunk, as Windows and sox (3+
    channels) write it; ``before``: chunks ahead of fmt. Python's wave cannot write one."""
    block = channels * bits // 8
    fmt = struct.pack("<HHIIHH", 0xFFFE, channels, rate, rate * block, block, bits)
    fmt += struct.pack("<H", cb_size)
    if cb_size:
        fmt += struct.pack("<HI", bits, 0x3 if channels == 2 else 0x4) + subformat.bytes_le
    chunks = before + b"fmt " + struct.pack("<I", len(fmt)) + fmt
    chunks += b"data" + struct.pack("<I", len(audio)) + audio + b"\0" * (len(audio) & 1)
    return b"RIFF" + struct.pack("<I", 4 + len(chunks)) + b"WAVE" + chunks


@pytest.mark.parametrize("before", [b"", b"LIST\x03\x00\x00\x00abc\x00"])
def test_the_extensible_header_of_pcm_plays_the_same_samples(tmp_path: Path, chimes: Chimes,
                                                             before: bytes) -> None:
    mono = write_wav(tmp_path / "plain.wav", rate=44100, seed=3)
    (tmp_path / "ext.wav").write_bytes(extensible_wav(mono, rate=44100, before=before))
    stereo = write_wav(tmp_path / "plain2.wav", rate=16000, channels=2, seed=4)
    (tmp_path / "ext2.wav").write_bytes(extensible_wav(stereo, rate=16000, channels=2))
    for plain, ext in (("plain", "ext"), ("plain2", "ext2")):
        chunk = chimes.get(ext)
        assert (chunk.audio, chunk.format) == (chimes.get(plain).audio, chimes.get(plain).format)
    assert chimes.get("ext2").format == AudioFormat(16000, 2, 2)
    assert chimes.names() == ["ext", "ext2", "plain", "plain2"]


@pytest.mark.parametrize(("wav", "reason"), [
    ({"bits": 32, "subformat": uuid.UUID("00000003-0000-0010-8000-00aa00389b71")},
     "of subformat 00000003-0000-0010-8000-00aa00389b71 (IEEE float); chimes must be 16-bit "
     "PCM"),
    ({"subformat": uuid.UUID("00000007-0000-0010-8000-00aa00389b71")},
     "00000007-0000-0010-8000-00aa00389b71 (mu-law)"),
    ({"subformat": uuid.UUID("00000001-0721-11d3-8644-c8c1ca000000")},  # Ambisonic B-format
     "of subformat 00000001-0721-11d3-8644-c8c1ca000000; chimes must be 16-bit PCM"),
    ({"cb_size": 0}, "an extensible WAV header of 18 bytes, without its subformat"),
    ({"channels": 3}, "has 3 channels; chimes must be mono or stereo"),
    ({"bits": 24}, "is 24-bit; chimes must be 16-bit PCM"),
])
def test_the_extensible_header_of_another_format_is_refused_with_its_reason(
        wav: dict[str, Any], reason: str) -> None:
    with pytest.raises(ChimeError, match=f"^chime 'x' .*{re.escape(reason)}"):
        read_chime("x", extensible_wav(b"\0" * 1200, **wav))
