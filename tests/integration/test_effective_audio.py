"""The audio settings merged with the hardware profile, resolved once (#24 item 4).

On a board whose profile names a PCM other than ``audio.device`` (left unset, so ``default``),
the daemon's player opens the profile's PCM, and its health report names that PCM, not the
setting; ``tts-agent say`` plays on it and ``check-config`` checks it. An explicit
``audio.device`` wins everywhere alike. Real alsa-lib into ALSA ``file`` PCMs; the profile is a
local profile file forced by the ``profile`` setting, so the host's own board does not matter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agent.commands.check_config import run_checks
from agent.daemon.service import AgentService
from agent.settings import Settings, effective_audio
from tests.support.alsa_sink import AlsaConfig, closed_item, read_samples, tone, wait_until
from tests.support.make_tiny_voice import VOICE

pytestmark = pytest.mark.alsa

BOARD_PCM = "boardpcm"
"""The PCM the board's profile names."""
SET_PCM = "setpcm"
"""The PCM an explicit ``audio.device`` names."""
PROFILE = f"""\
description = "a test board whose sound card is an ALSA file PCM"
[match]
arch = ["no-such-arch"]
[runtime]
intra_op_threads = 1
model_variant = "fp32"
[audio]
alsa_device = "{BOARD_PCM}"
period_frames = 512
buffer_periods = 3
queue_max = 7
"""


@dataclass
class Board:
    """Settings (and the same as environment variables) for a board profiled ``testboard``."""

    tmp_path: Path
    models: Path
    alsa: AlsaConfig
    profiles: Path

    def settings(self, **audio: Any) -> Settings:
        return Settings(
            device_id="t1", profile="testboard",
            synthesis={"profiles_dir": self.profiles},
            models={"dir": self.models, "default_voice": VOICE, "watch": False},
            mqtt={"enabled": False}, cache={"dir": self.tmp_path / "cache"},
            audio={"keep_open_s": 30.0, "reopen_interval_s": 0.05, **audio},
            log={"level": "warning", "format": "console"},
        )

    def say(self, text: str, device: str | None) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TTS_AGENT_")}
        env.update(TTS_AGENT_PROFILE="testboard",
                   TTS_AGENT_SYNTHESIS__PROFILES_DIR=str(self.profiles),
                   TTS_AGENT_MODELS__DIR=str(self.models),
                   TTS_AGENT_MODELS__DEFAULT_VOICE=VOICE,
                   TTS_AGENT_CACHE__DIR=str(self.tmp_path / "cache"),
                   ALSA_CONFIG_PATH=str(self.alsa.path))
        if device is not None:
            env["TTS_AGENT_AUDIO__DEVICE"] = device
        return subprocess.run([sys.executable, "-m", "agent", "say", text], capture_output=True,
                              text=True, env=env, timeout=120, check=False)


@pytest.fixture()
def board(tmp_path: Path, tiny_models_dir: Path, alsa: AlsaConfig) -> Board:
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "testboard.toml").write_text(PROFILE, encoding="utf-8")
    return Board(tmp_path, tiny_models_dir, alsa, profiles)


def _explicit(case: str) -> dict[str, str]:
    return {"device": SET_PCM} if case == "audio.device set" else {}


CASES = ["profiled board", "audio.device set"]


@pytest.mark.parametrize("case", CASES)
def test_health_names_the_pcm_the_player_opened(board: Board, case: str) -> None:
    """Before the fix, health said ``pcm: default`` (the setting) on the profiled board while
    the player played on the profile's PCM."""
    wanted = SET_PCM if case == "audio.device set" else BOARD_PCM
    outs = {name: board.alsa.add_file(name) for name in (BOARD_PCM, SET_PCM)}
    settings = board.settings(**_explicit(case))
    service = AgentService(settings)
    assert service.profile is not None and service.profile.name == "testboard"
    service.start()
    try:
        wait_until(lambda: service.player.stats()["device"] is not None,
                   "the player opened its PCM")
        service.player.submit(closed_item("direct", tone(0.3, 440)))
        wait_until(lambda: service.player.stats()["finished"] == 1, "the tone was played")
        snap = service.health.snapshot()
    finally:
        service.stop(grace_s=2.0)
    audio = snap["audio"]
    assert settings.audio.device == ("default" if case == "profiled board" else SET_PCM)
    assert audio["pcm"] == wanted
    assert audio["device"] is not None and audio["device"]["name"] == wanted
    assert audio["state"] == "ok"
    assert snap["hardware"]["audio"]["alsa_device"] == wanted
    if case == "profiled board":  # the profile's period, as the device was opened with it
        assert audio["device"]["period_frames"] == 512
    played = read_samples(outs[wanted])
    assert np.count_nonzero(played) > 0, "the tone went into the PCM health names"
    other = outs[SET_PCM if wanted == BOARD_PCM else BOARD_PCM]
    assert read_samples(other).size == 0, "nothing went into the other PCM"


@pytest.mark.parametrize("case", CASES)
def test_say_and_check_config_use_the_pcm_the_daemon_opens(board: Board, case: str) -> None:
    wanted = SET_PCM if case == "audio.device set" else BOARD_PCM
    outs = {name: board.alsa.add_file(name) for name in (BOARD_PCM, SET_PCM)}
    settings = board.settings(**_explicit(case))
    service = AgentService(settings)  # built, not started: the player it would run
    try:
        assert service.player.stats()["pcm"] == wanted
        resolved = effective_audio(settings.audio, service.profile)
        assert (resolved.device, resolved.period_frames, resolved.queue_max) == (wanted, 512, 7)
    finally:
        service.stop(grace_s=0.5)

    checks = {c.setting: c for c in run_checks(settings) if c.setting.startswith("audio.device")}
    assert len(checks) == 1
    ((setting, check),) = checks.items()
    assert check.problem is None
    assert f"PCM {wanted!r} writes into the file {outs[wanted]}" in check.note
    assert setting == ("audio.device (from the hardware profile testboard)"
                       if case == "profiled board" else "audio.device")

    said = board.say("Hello there.", device=SET_PCM if case == "audio.device set" else None)
    assert said.returncode == 0, said.stderr
    assert json.loads(said.stdout.splitlines()[-1])["device"] == wanted
    assert np.count_nonzero(read_samples(outs[wanted])) > 0
    other = outs[SET_PCM if wanted == BOARD_PCM else BOARD_PCM]
    assert read_samples(other).size == 0
