"""``tts-agent say "text"``: speak on the configured ALSA device, no broker needed.

The request goes through the daemon's own pipeline (a one-place job queue, the synthesis
worker, the audio player), so the first sentence plays while the rest is still synthesized; a
small :class:`_Outcome` collector stands in for the request tracker and keeps the final event.
Exit statuses: docs/cli.md#say-speak-on-this-machine; the design: docs/internals.md#tts-agent-say.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agent.commands import (
    CommandError,
    UsageError,
    add_config_argument,
    add_ssml_argument,
    add_synthesis_arguments,
    bounded,
    checked_speaker,
    checked_speech,
    checked_text,
    settings_from_args,
    synthesis_params,
    text_document,
)
from agent.commands.chimes import add_chime_argument, checked_chime
from agent.outcomes import Outcome, Progress

if TYPE_CHECKING:
    from agent.audio.player import AudioPlayer
    from agent.hardware.effective import EffectiveProfile
    from agent.pipeline.jobs import SpeakRequest
    from agent.pipeline.render import ChimeSource
    from agent.pipeline.worker import VoiceSource
    from agent.settings import AudioSettings, Settings

_REQUEST_ID = "say"
_PROBE_START_S = 20.0
"""Beyond ``audio.device_timeout_s``: how long the player's helper process may take to start
before the probe's answer is not waited for (an interpreter start on a slow board)."""
_NO_DEVICE = (errno.ENOENT, errno.ENODEV, errno.ENXIO)
"""The open errors that mean the device does not exist (alsa-lib says them as strerror)."""
_JOIN_S = 5.0
"""How long to wait for the synthesis worker to end (it finishes the sentence in hand)."""
DEVICE_HINT = ("; no sound card? write a WAV file with --device \"file:'/tmp/x.wav',wav\", "
               "or list the PCMs with aplay -L")
"""Appended to a device failure: what to try next."""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("say", help="speak text on the audio device (no broker)")
    add_config_argument(parser)
    parser.add_argument("text", nargs="?", help="text to speak (omit or '-' to read stdin)")
    parser.add_argument("--device", help="ALSA PCM to play on (default: audio.device)")
    parser.add_argument("--volume", type=float, help="volume of this utterance, 0.0-1.0")
    add_ssml_argument(parser)
    add_chime_argument(parser)
    add_synthesis_arguments(parser)
    parser.set_defaults(handler=run)


def _audio_settings(settings: Settings, profile: EffectiveProfile | None,
                    device: str | None) -> AudioSettings:
    from pydantic import ValidationError

    from agent.settings import AudioSettings, effective_audio

    audio = effective_audio(settings.audio, profile)
    if device is None:
        return audio
    try:
        return AudioSettings(**{**audio.model_dump(), "device": device})
    except ValidationError as exc:
        raise UsageError(f"--device: {exc.errors()[0]['msg']}") from exc


def run(args: argparse.Namespace) -> int:
    from agent.hardware.effective import profile_or_reason
    from agent.library.voices import VoiceLibrary, VoiceNotFound
    from agent.pipeline.jobs import SpeakRequest
    from agent.voice.voice import VoiceLoadError

    settings = settings_from_args(args, quiet="error")
    text = checked_text(args.text, settings)
    document = text_document(text, args.ssml, settings, "say")
    checked_speech(text, document, args.voice, settings)
    chimes, chime = checked_chime(args.chime, settings)
    volume = bounded(args.volume, "--volume", 0.0, 1.0)
    params = synthesis_params(args)
    profile, _ = profile_or_reason(settings)  # None: plain settings and library defaults
    audio = _audio_settings(settings, profile, args.device)
    outcome = _Outcome()
    player = _opened_player(audio, outcome)  # no device: said before a voice loads
    try:
        voices = VoiceLibrary.for_settings(settings, profile=profile)
        try:
            voice = voices.get(args.voice)  # loaded here: a bad voice fails before any audio
        except VoiceNotFound as exc:
            raise UsageError(str(exc)) from exc
        except VoiceLoadError as exc:
            raise CommandError(str(exc)) from exc
        checked_speaker(params.speaker_id, voice.name, voice.config.num_speakers)
        request = SpeakRequest(text, voice=voice.name, volume=volume, params=params,
                               document=document, chime=chime)
        final = _speak(audio, player, outcome, voices, request, chimes=chimes)
    finally:
        player.close()  # cuts what still plays, so the worker drops it too
    if not final.played:  # refused before playback (the text): the reason alone
        raise CommandError(final.reason or f"request {final.kind}")
    if final.kind is not Outcome.FINISHED:
        hint = DEVICE_HINT if final.kind is Outcome.FAILED else ""
        raise CommandError(f"playback {final.kind} on {audio.device!r}: {final.reason}{hint}")
    print(json.dumps({"voice": voice.name, "device": audio.device,
                      "seconds": round(final.audio_seconds, 3)}))
    return 0


@dataclass(frozen=True, slots=True)
class _Final:
    """The request's final event, from the player (``played``) or from the worker."""

    kind: Outcome
    reason: str | None
    audio_seconds: float
    played: bool


class _Outcome:
    """Collects the one request's final event: the :class:`agent.outcomes.Reporter` of both
    the synthesis worker (synthesis thread) and the player (player thread), which alone says
    how much it played (``audio_s``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._final: _Final | None = None
        self._done = threading.Event()

    def is_open(self, request_id: str) -> bool:
        return not self._done.is_set()

    def note(self, request_id: str, **fields: object) -> None:
        return None  # voice and timings: nothing to report them to

    def progress(self, request_id: str, event: Progress, **fields: object) -> bool:
        return not self._done.is_set()  # ``started``: nothing to report it to

    def finish(self, request_id: str, event: Outcome, *, reason: str | None = None,
               audio_s: float | None = None) -> bool:
        return self._settle(_Final(event, reason, audio_s or 0.0, played=audio_s is not None))

    def wait(self, timeout: float) -> _Final | None:
        self._done.wait(timeout)
        with self._lock:
            return self._final

    def _settle(self, final: _Final) -> bool:
        with self._lock:
            if self._final is not None:
                return False
            self._final = final
        self._done.set()
        return True


def _opened_player(audio: AudioSettings, outcome: _Outcome) -> AudioPlayer:
    """The player, started, once its start-up probe has opened the device: a device that does
    not exist (no sound card, an unknown PCM) is the command's error at once, before any voice
    loads, in the words playback would have said it. A device slow to open (or busy) is left
    to playback, which tries it again."""
    from agent.audio.player import AudioPlayer

    player = AudioPlayer(audio, outcome)
    player.start()
    stats = player.wait_probed(audio.device_timeout_s + _PROBE_START_S)
    reason = stats["reason"] if stats is not None and stats["state"] == "degraded" else None
    if reason is not None and any(os.strerror(code) in reason for code in _NO_DEVICE):
        player.close()
        raise CommandError(f"playback failed on {audio.device!r}: {reason}{DEVICE_HINT}")
    return player


def _speak(audio: AudioSettings, player: AudioPlayer, outcome: _Outcome, voices: VoiceSource,
           request: SpeakRequest, *, chimes: ChimeSource | None = None) -> _Final:
    """Queue the request for the synthesis worker while the (started) player plays it;
    returns its final event."""
    from agent.pipeline.jobs import JobQueue, SpeakJob
    from agent.pipeline.worker import SynthesisWorker

    jobs = JobQueue(1)
    worker = SynthesisWorker(jobs, voices, player, outcome, item_buffer_s=audio.item_buffer_s,
                             buffering=audio.buffering, chimes=chimes)
    worker.start()
    try:
        jobs.put(SpeakJob(_REQUEST_ID, request, deadline=None))
        final = None
        while final is None:
            final = outcome.wait(0.5)
        return final
    except KeyboardInterrupt:
        player.stop(flush=True)
        raise
    finally:
        player.close()  # cuts what still plays, so the worker drops it too
        worker.stop(_JOIN_S)
