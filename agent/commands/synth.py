"""``tts-agent synth``, ``voices`` and ``phonemize``: the engine from the command line."""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import wave
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.commands import (
    CommandError,
    UsageError,
    add_config_argument,
    add_ssml_argument,
    add_synthesis_arguments,
    checked_speaker,
    checked_speech,
    checked_text,
    read_text,
    settings_from_args,
    synthesis_params,
    text_document,
)
from agent.commands.chimes import add_chime_argument, checked_chime

if TYPE_CHECKING:
    from agent.audio.format import AudioChunk, AudioFormat
    from agent.library.voices import VoiceLibrary
    from agent.settings import Settings
    from agent.text.document import Document
    from agent.text.frontend import Frontend
    from agent.voice.voice import Voice



def register(subparsers: Any) -> None:
    synth = subparsers.add_parser("synth", help="synthesize text to a WAV file")
    add_config_argument(synth)
    synth.add_argument("--text", help="text to speak (default: read standard input)")
    synth.add_argument("--out", type=Path, required=True, help="WAV file to write ('-' = stdout)")
    add_ssml_argument(synth)
    add_chime_argument(synth)
    add_synthesis_arguments(synth)
    synth.set_defaults(handler=run_synth)

    voices = subparsers.add_parser("voices", help="list installed voices")
    add_config_argument(voices)
    voices.add_argument("--json", action="store_true", help="machine-readable output")
    voices.set_defaults(handler=run_voices)

    phon = subparsers.add_parser("phonemize", help="show what the text frontend makes of a text")
    add_config_argument(phon)
    phon.add_argument("--text", help="text (default: read standard input)")
    phon.add_argument("--voice", help="voice whose language and id map to use")
    add_ssml_argument(phon)
    phon.add_argument("--json", action="store_true",
                      help="print one JSON object (default: one block of lines per sentence)")
    phon.set_defaults(handler=run_phonemize)


def _voice(settings: Settings, name: str | None) -> tuple[Voice, VoiceLibrary]:
    """The voice ``name`` (None: the default), loaded, and the library it came from."""
    from agent.hardware.effective import profile_or_reason
    from agent.library.voices import VoiceLibrary, VoiceNotFound
    from agent.voice.voice import VoiceLoadError

    profile, _ = profile_or_reason(settings)  # None: one thread, fp32
    library = VoiceLibrary.for_settings(settings, profile=profile)
    try:
        return library.get(name), library
    except VoiceNotFound as exc:
        raise UsageError(str(exc)) from exc
    except VoiceLoadError as exc:
        raise CommandError(str(exc)) from exc


def run_synth(args: argparse.Namespace) -> int:
    from agent.library.voices import VoiceNotFound
    from agent.pipeline.jobs import SpeakRequest
    from agent.pipeline.render import render, request_document
    from agent.voice.voice import VoiceLoadError

    settings = settings_from_args(args)
    text = checked_text(args.text, settings)
    document = text_document(text, args.ssml, settings, "synth")
    checked_speech(text, document, args.voice, settings)
    chimes, chime = checked_chime(args.chime, settings)
    params = synthesis_params(args)
    voice, library = _voice(settings, args.voice)
    checked_speaker(params.speaker_id, voice.name, voice.config.num_speakers)
    request = SpeakRequest(text, voice=voice.name, params=params, document=document,
                           chime=chime)
    try:
        rendered = render(request_document(request), library, request, chimes=chimes)
        first = next(rendered.chunks)
    except VoiceLoadError as exc:  # another voice the text names cannot be loaded
        raise CommandError(str(exc)) from exc
    except (VoiceNotFound, ValueError) as exc:  # text, a chime or a parameter refused
        raise UsageError(str(exc)) from exc
    out = sys.stdout.buffer if str(args.out) == "-" else None
    try:
        target: Any = out if out is not None else open(args.out, "wb")  # noqa: SIM115
    except OSError as exc:
        raise CommandError(f"cannot write {args.out}: {exc}") from exc
    fmt = rendered.format
    with target:
        seconds = _write_wav(target, fmt, itertools.chain([first], rendered.chunks))
    if out is None:
        print(json.dumps({"out": str(args.out), "voice": voice.name, "seconds": round(seconds, 3),
                          "sample_rate": fmt.rate}))
    return 0


def _write_wav(target: Any, fmt: AudioFormat, chunks: Iterable[AudioChunk]) -> float:
    """Write ``chunks`` as a WAV file in ``fmt`` (16-bit); a chunk in another format (a chime)
    is converted to it. Returns the seconds written."""
    from agent.audio.convert import StreamConverter, encode

    converter = StreamConverter(fmt.rate, fmt.channels)
    frames = 0
    with wave.open(target, "wb") as wav:
        wav.setnchannels(fmt.channels)
        wav.setsampwidth(2)
        wav.setframerate(fmt.rate)
        for chunk in chunks:
            if chunk.format == fmt:  # the voice's own audio: as it is
                block = converter.flush()
                wav.writeframes(encode(block, "S16_LE") + chunk.audio)
                frames += len(block) + chunk.frames
            else:
                block = converter.push(chunk)
                wav.writeframes(encode(block, "S16_LE"))
                frames += len(block)
        block = converter.flush()
        wav.writeframes(encode(block, "S16_LE"))
        frames += len(block)
    return frames / fmt.rate


def run_voices(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    rows: list[dict[str, Any]] = []
    for entry in sorted(settings.models.dir.glob("*")) if settings.models.dir.is_dir() else []:
        if not entry.name.startswith(".") and entry.is_dir():
            rows += _voice_rows(entry, settings.models.default_voice)
    if args.json:
        print(json.dumps(rows, indent=2))
    elif not rows:
        print(f"no voices installed in {settings.models.dir}")
    for row in rows if not args.json else []:
        if "error" in row:
            print(f"{row['voice']}  BROKEN: {row['error']}")
            continue
        marks = [word for word, on in (("current", row["current"] and row["staged"]),
                                       ("staged", not row["current"]),
                                       ("default", row["default"])) if on]
        mark = f" ({', '.join(marks)})" if marks else ""
        print(f"{row['voice']}  {row['version']}  {row['sample_rate']} Hz  "
              f"{','.join(row['variants'])}{mark}")
    return 0


def _voice_rows(entry: Path, default_voice: str) -> list[dict[str, Any]]:
    """The rows of one voice directory: the bundle it serves (``current``; ``BROKEN`` with the
    reason when it does not read), then each other staged version (``current`` false: what
    ``models activate`` could switch to)."""
    from agent.library.staging import CURRENT, link_target, staged_versions
    from agent.voice.bundle import BundleError, read_manifest, resolve_bundle_dir

    staged = link_target(entry / CURRENT) is not None
    serving = resolve_bundle_dir(entry)
    rows: list[dict[str, Any]] = []
    others = [entry / v for v in staged_versions(entry) if staged
              and (entry / v).resolve() != serving.resolve()]
    for current, directory in [(True, serving), *((False, other) for other in others)]:
        try:
            manifest = read_manifest(directory)
        except BundleError as exc:
            rows.append({"voice": entry.name, "error": str(exc)})
            continue
        rows.append({
            "voice": manifest["voice"], "version": manifest["version"],
            "sample_rate": manifest["sample_rate"], "variants": sorted(manifest["variants"]),
            "default": current and manifest["voice"] == default_voice,
            "current": current, "staged": staged,
        })
    return rows


def run_phonemize(args: argparse.Namespace) -> int:
    from agent.library.lexicon import LexiconHolder
    from agent.library.options import voice_options
    from agent.library.voices import VoiceLibrary, VoiceNotFound
    from agent.text.frontend import TextError
    from agent.voice.bundle import BundleError, read_manifest
    from agent.voice.voice import VoiceConfig, VoiceLoadError, build_frontend

    settings = settings_from_args(args)
    library = VoiceLibrary(settings)
    try:
        bundle_dir = library.bundle_dir(args.voice or settings.models.default_voice)
        config = VoiceConfig.from_file(bundle_dir / read_manifest(bundle_dir)["config"])
    except VoiceNotFound as exc:
        raise UsageError(str(exc)) from exc
    except (VoiceLoadError, BundleError) as exc:
        raise CommandError(str(exc)) from exc
    options = voice_options(settings, lexicon=LexiconHolder.for_settings(settings))
    frontend = build_frontend(config, options, cache_size=0)  # the voice's text stages
    text = read_text(args.text)
    document = text_document(text, args.ssml, settings, "phonemize")
    checked_speech(text, document, args.voice, settings)
    try:
        rows = _phoneme_rows(frontend, text if document is None else document)
    except TextError as exc:
        raise UsageError(str(exc)) from exc
    if args.json:
        print(json.dumps({"sentences": rows}, ensure_ascii=False))
        return 0
    for row in rows:
        if "pause_s" in row:
            print(f"(pause {row['pause_s']:g} s)")
            continue
        if "chime" in row:
            print(f"(chime {row['chime']})")
            continue
        print(f"{row['text']}\n  phonemes  {row['phonemes']}\n"
              f"  ids       {' '.join(map(str, row['ids']))}")
    return 0


def _phoneme_rows(frontend: Frontend, said: str | Document) -> list[dict[str, Any]]:
    """Each sentence of a plain text or of an SSML document's speech (its text, phonemes and
    ids), and the document's pauses (``pause_s``) and chimes (``chime``), in order."""
    from agent.text.document import Pause, Speech

    rows: list[dict[str, Any]] = []
    for part in [said] if isinstance(said, str) else said:
        if isinstance(part, Pause):
            rows.append({"pause_s": part.seconds})
        elif isinstance(part, str | Speech):
            sentences = (frontend.sentences(part) if isinstance(part, str) else
                         frontend.sentences(part.pieces, verbatim=part.verbatim))
            rows += [{"text": s.text, "phonemes": "".join(s.phonemes), "ids": frontend.ids(s)}
                     for s in sentences]
        else:
            rows.append({"chime": part.name})
    return rows
