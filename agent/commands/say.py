"""``tts-agent say "text"``: speak on the configured ALSA device, no broker needed.

The sentences are synthesized on this thread and handed to the audio player as
they come, so the first one plays while the rest are still being synthesized.
Exit status 0 once everything has been played out; 1 with a one-line reason when
the voice, the text or the audio device fails; 130 on Ctrl-C (playback is cut).
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from agent.commands import (
    CommandError,
    add_config_argument,
    add_synthesis_arguments,
    bounded,
    checked_text,
    settings_from_args,
    synthesis_params,
)

if TYPE_CHECKING:
    from agent.settings import AudioSettings, Settings

_REQUEST_ID = "say"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("say", help="speak text on the audio device (no broker)")
    add_config_argument(parser)
    parser.add_argument("text", nargs="?", help="text to speak (omit or '-' to read stdin)")
    parser.add_argument("--device", help="ALSA PCM to play on (default: audio.device)")
    parser.add_argument("--volume", type=float, help="volume of this utterance, 0.0-1.0")
    add_synthesis_arguments(parser)
    parser.set_defaults(handler=run)


def _audio_settings(settings: Settings, profile: Any, device: str | None) -> AudioSettings:
    from pydantic import ValidationError

    from agent.settings import AudioSettings

    audio = settings.audio if profile is None else settings.audio.with_profile(profile.audio)
    if device is None:
        return audio
    try:
        return AudioSettings(**{**audio.model_dump(), "device": device})
    except ValidationError as exc:
        raise CommandError(f"--device: {exc.errors()[0]['msg']}") from exc


def run(args: argparse.Namespace) -> int:
    from agent.hardware import profile_or_reason
    from agent.library.voices import VoiceLibrary, VoiceNotFound
    from agent.voice.voice import VoiceLoadError

    settings = settings_from_args(args)
    text = checked_text(args.text, settings)
    volume = bounded(args.volume, "--volume", 0.0, 1.0)
    params = synthesis_params(args)
    profile, _ = profile_or_reason(settings)  # None: plain settings and library defaults
    audio = _audio_settings(settings, profile, args.device)
    try:
        voice = VoiceLibrary.for_settings(settings, profile=profile).get(args.voice)
    except (VoiceNotFound, VoiceLoadError) as exc:
        raise CommandError(str(exc)) from exc
    event = _speak(audio, voice, text, params, 1.0 if volume is None else volume)
    if event.kind != "finished":
        raise CommandError(f"playback {event.kind} on {audio.device!r}: {event.reason}")
    print(json.dumps({"voice": voice.name, "device": audio.device,
                      "seconds": round(event.audio_seconds, 3)}))
    return 0


def _speak(audio: AudioSettings, voice: Any, text: str, params: Any, volume: float) -> Any:
    """Synthesize into a play item while the player plays it; returns its final event."""
    from agent.audio.format import AudioFormat
    from agent.audio.item import PlaybackEvent, PlayItem
    from agent.audio.player import AudioPlayer
    from agent.text.frontend import TextError

    def ignore(_event: PlaybackEvent) -> None:  # player thread; the item carries the result
        return None

    player = AudioPlayer(audio, ignore)
    player.start()
    item = PlayItem(_REQUEST_ID, volume=volume, format=AudioFormat(rate=voice.sample_rate),
                    max_buffered_s=audio.item_buffer_s)
    try:
        player.submit(item)
        try:
            for chunk in voice.synthesize(text, params):
                if not item.put(chunk):
                    break  # the player gave up (device failure): its event says why
            item.close()
        except (TextError, ValueError) as exc:
            item.fail(str(exc))
            raise CommandError(str(exc)) from exc
        result = None
        while result is None:
            result = item.wait(0.5)
        return result
    except KeyboardInterrupt:
        player.stop(flush=True)
        raise
    finally:
        player.close()
