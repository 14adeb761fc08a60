"""Side by side, in one run: this agent's shipped voice variant against the reference Piper runtime.

    .venv/bin/python bench/compare_piper.py [--variant int8] [--reps 2] [--json PATH]

Both engines run the same voice (models/en_US-joe-medium: ours loads the bundle's variant, Piper
loads the bundle's original fp32 ``.onnx``) over the same sentences on this machine:

* synthesis speed (1/RTF: audio seconds per second of compute) at 1 and 2 onnxruntime threads,
  text to audio (phonemization included), sentences interleaved between engines so machine load
  hits all of them alike. Piper gets an ``InferenceSession`` with the same thread count (its
  ``PiperVoice`` takes any session; ``PiperVoice.load`` would use onnxruntime's default).
  Our phonemization cache is off here so both engines phonemize every time. Each timed call
  starts after a 50 ms pause, so no engine's idle worker threads still spin into the next one's;
* ours takes this machine's hardware profile's spinning and decoder windows at once
  (``decode_workers``, at most the thread count), as the agent would here;
* ours runs with streaming on (the agent's default); the line under the table gives our int8
  voice with streaming off (every sentence decoded whole) for speed and first audio;
* time to first audio for a 3-sentence paragraph: until ``Voice.synthesize`` yields its first
  chunk, against until Piper's ``synthesize`` yields its first chunk. Both phonemize the whole
  paragraph, then synthesize sentence by sentence, so this compares like with like;
* time to first audio of a repeated phrase: ours from the persistent phrase cache (as the agent
  serves announcements it has said before), Piper synthesizing it again (it has no such cache);
* start-up to ready: a fresh Python process per engine, from spawn to the first audio of a short
  sentence (imports, voice load, our warm-up, first synthesis): the first start (ours builds its
  optimised-model cache) and the median of ``--startup-runs`` later starts;
* peak RSS of those processes (``VmHWM`` after the paragraph and the longest sentence);
* the agent as deployed (``bench/daemon_startup.py``): ``python -m agent run`` from spawn to
  systemd's ``READY=1`` and its peak RSS after speaking the paragraph over MQTT, next to
  Piper's start-up and peak RSS above, and what the fixed stack (interpreter, numpy,
  onnxruntime, pydantic-settings, structlog) costs alone. Our package is byte-compiled first,
  as ``pip install`` leaves it;
* intelligibility: pocketsphinx (its wheel's English model) decodes each engine's audio of the
  held-out sentences; word error rate against the text, at the voice's default noise settings
  (what users hear; random, so it varies from run to run) and with noise scales 0
  (deterministic: the same audio every run).

Medians and ratios are printed; absolute numbers only next to the reference's. piper-tts is a
bench-only dependency (``pip install piper-tts pocketsphinx``); the agent never imports it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import daemon_startup
import numpy as np
from compare_output import ENGINES, WHOLE, daemon_lines, record, streaming_off, table
from results import add_json_option, write_result
from workload import HELDOUT, PARAGRAPH, ROOT, VOICE, read_lines, status_kib

sys.path.insert(0, str(ROOT))

FIRST_TEXT = "Welcome."
REPEATED = "Attention please: the lift on platform two is out of order. We apologise."
CACHE_ENV = "TTS_AGENT_BENCH_CACHE"
"""Where our engine keeps its optimised-model and phrase caches during the bench."""

Synth = Callable[[str], Iterator[np.ndarray]]
"""Text -> float audio per sentence (as each engine yields it)."""


# --- engines -------------------------------------------------------------------------------


def our_voice(bundle_dir: Path, variant: str, threads: int, *, stream: bool = True) -> Any:
    """Our voice as the agent loads it: streaming on with the default windows, the text stages
    of the default ``[text]`` settings (the normalizer on, emoji dropped), its optimised-model
    cache in the bench's cache dir; clause splitting off (Piper has none, and the bench's
    sentences are compared whole)."""
    from agent.hardware.runtime import RuntimeOptions
    from agent.voice.options import TextOptions, VoiceOptions
    from agent.voice.voice import Voice

    cache = os.environ.get(CACHE_ENV)
    spinning, workers = machine_choices()
    runtime = RuntimeOptions(intra_op_threads=threads, allow_spinning=spinning,
                             decode_workers=min(threads, workers),
                             optimized_cache_dir=Path(cache) / "ort" if cache else None)
    return Voice.load(bundle_dir, VoiceOptions(variant=variant, phoneme_cache_size=0,
                                               runtime=runtime, text=TextOptions(),
                                               **({} if stream else {"stream_first_frames": 0})))


def machine_choices() -> tuple[bool, int]:
    """What this machine's hardware profile chooses besides the thread count (which the bench
    sets): spinning, and decoder windows decoded at once (never more than the threads)."""
    import tempfile

    from agent.hardware.effective import resolve_profile
    from agent.settings import Settings

    with tempfile.TemporaryDirectory(prefix="tts-bench-profile-") as tmp:
        settings = Settings(device_id="bench", cache={"dir": tmp},  # this checkout's profiles
                            synthesis={"profiles_dir": str(ROOT / "firmware_profiles")})
        chosen = resolve_profile(settings, use_tune=False).runtime.options
    return chosen.allow_spinning, chosen.decode_workers


def ours(bundle_dir: Path, variant: str, threads: int, *, noise: bool = True,
         stream: bool = True) -> Synth:
    from agent.voice.voice import SynthesisParams

    voice = our_voice(bundle_dir, variant, threads, stream=stream)
    params = None if noise else SynthesisParams(noise_scale=0.0, noise_w=0.0)

    def synth(text: str) -> Iterator[np.ndarray]:
        for chunk in voice.synthesize(text, params):
            yield chunk.samples().reshape(-1).astype(np.float32) / 32768.0

    return synth


def piper(bundle_dir: Path, threads: int, *, noise: bool = True, spinning: bool = True) -> Synth:
    import onnxruntime
    from piper import PiperVoice
    from piper.config import PiperConfig, SynthesisConfig

    model = bundle_dir / f"{VOICE}.onnx"
    options = onnxruntime.SessionOptions()  # what PiperVoice.load uses, plus the thread count
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    if not spinning:  # bench/synth_levers.py: piper-tts with what our profile may set
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = onnxruntime.InferenceSession(str(model), sess_options=options,
                                           providers=["CPUExecutionProvider"])
    config = PiperConfig.from_dict(json.loads(Path(f"{model}.json").read_text(encoding="utf-8")))
    voice = PiperVoice(session=session, config=config)
    params = None if noise else SynthesisConfig(noise_scale=0.0, noise_w_scale=0.0)

    def synth(text: str) -> Iterator[np.ndarray]:
        for chunk in voice.synthesize(text, params):
            yield chunk.audio_float_array

    return synth


def make_engine(name: str, bundle_dir: Path, threads: int, variant: str, *,
                noise: bool = True) -> Synth:
    if name == "piper":
        return piper(bundle_dir, threads, noise=noise)
    return ours(bundle_dir, "fp32" if name == "ours-fp32" else variant, threads, noise=noise,
                stream=name != WHOLE)


# --- measurements --------------------------------------------------------------------------

SETTLE_S = 0.05
"""Pause before each timed call: every engine's onnxruntime session keeps its worker threads
spinning for a moment after a run, and on a small board they would steal the CPU from the next
engine's run (in the agent only one session runs at a time)."""


def rtf(engines: dict[str, Synth], sentences: list[str], reps: int, rate: int) -> dict[str, float]:
    """Median real-time factor (compute seconds per audio second) of each engine."""
    for synth in engines.values():
        list(synth(FIRST_TEXT))  # warm up (ours already did at load)
    samples: dict[str, list[float]] = {name: [] for name in engines}
    order = list(engines)
    for rep in range(reps):
        for k, text in enumerate(sentences):
            for name in order[(k + rep) % len(order):] + order[:(k + rep) % len(order)]:
                time.sleep(SETTLE_S)
                started = time.perf_counter()
                audio = np.concatenate(list(engines[name](text)))
                samples[name].append((time.perf_counter() - started) / (audio.size / rate))
    return {name: statistics.median(values) for name, values in samples.items()}


def first_audio(engines: dict[str, Synth], reps: int) -> dict[str, float]:
    """Median seconds until the first chunk of PARAGRAPH."""
    samples: dict[str, list[float]] = {name: [] for name in engines}
    for _ in range(reps):
        for name, synth in engines.items():
            time.sleep(SETTLE_S)
            started = time.perf_counter()
            next(synth(PARAGRAPH))
            samples[name].append(time.perf_counter() - started)
    return {name: statistics.median(values) for name, values in samples.items()}


def cached_first_audio(bundle_dir: Path, variant: str, piper_synth: Synth,
                       reps: int) -> dict[str, float]:
    """Median seconds to the first audio of a phrase said before: ours from the phrase cache
    (its exact-request index: key, read and check the entry; ``bench/phrase_cache.py`` sets it
    against phonemizing to find the entry), Piper synthesizing it again (it has no cache)."""
    from agent.pipeline.phrase_cache import PhraseCache
    from agent.pipeline.render import cached_synthesis
    from agent.voice.voice import SynthesisParams

    cache = PhraseCache(Path(os.environ[CACHE_ENV]) / "phrases", 64 << 20)
    samples: dict[str, list[float]] = {"ours-int8": [], "ours-fp32": [], "piper": []}
    for name, var in (("ours-int8", variant), ("ours-fp32", "fp32")):
        voice = our_voice(bundle_dir, var, 1)
        list(cached_synthesis(cache, voice, REPEATED, SynthesisParams()))  # said once before
        for _ in range(reps):
            started = time.perf_counter()
            next(cached_synthesis(cache, voice, REPEATED, SynthesisParams()))
            samples[name].append(time.perf_counter() - started)
    for _ in range(reps):
        started = time.perf_counter()
        next(piper_synth(REPEATED))
        samples["piper"].append(time.perf_counter() - started)
    return {name: statistics.median(values) for name, values in samples.items()}


def startup(args: argparse.Namespace, name: str) -> dict[str, float]:
    """Spawn a fresh process for ``name``: seconds to first audio, and its peak RSS (MiB)."""
    command = [sys.executable, str(Path(__file__).resolve()), "--child", name,
               "--variant", args.variant, "--models-dir", str(args.models_dir)]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    started = time.perf_counter()
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT) as proc:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        ready = time.perf_counter() - started
        report = json.loads(proc.stdout.readline())
    if proc.returncode != 0 or first.strip() != "first-audio":
        raise RuntimeError(f"{name} child failed ({proc.returncode})")
    return {"startup_s": ready, "rss_mib": report["maxrss_kib"] / 1024.0}


def child(args: argparse.Namespace) -> int:
    """Child process: load one engine, say FIRST_TEXT, report; then measure peak RSS."""
    if args.child != "piper":
        from agent.logs import configure_logging

        configure_logging("warning")  # stdout carries the protocol; logs go to stderr
    synth = make_engine(args.child, resolve(args.models_dir), 1, args.variant)
    next(synth(FIRST_TEXT))
    print("first-audio", flush=True)
    list(synth(PARAGRAPH))
    list(synth(max(read_lines(HELDOUT), key=len)))
    print(json.dumps({"maxrss_kib": status_kib("VmHWM")}), flush=True)
    return 0


class Recogniser:
    """pocketsphinx with the English model shipped in its wheel, fed 16 kHz 16-bit audio."""

    def __init__(self) -> None:
        from pocketsphinx import Decoder

        self.decoder = Decoder(samprate=16000, logfn=os.devnull)

    def text(self, audio: np.ndarray, rate: int) -> str:
        peak = max(float(np.max(np.abs(audio))), 1e-8)
        target = round(audio.size * 16000 / rate)  # band-limited resampling via the FFT
        resampled = np.fft.irfft(np.fft.rfft(audio / peak * 0.9)[: target // 2 + 1], target)
        pcm = np.clip(resampled * (target / audio.size) * 32767, -32768, 32767).astype("<i2")
        self.decoder.start_utt()
        self.decoder.process_raw(pcm.tobytes(), full_utt=True)
        self.decoder.end_utt()
        hyp = self.decoder.hyp()
        return hyp.hypstr if hyp is not None else ""


def words(text: str) -> list[str]:
    return re.sub(r"[^a-z' ]+", " ", text.lower()).split()


def edit_distance(a: list[str], b: list[str]) -> int:
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        diagonal, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            diagonal, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, diagonal + (x != y))
    return row[-1]


def word_error_rate(engines: dict[str, Synth], sentences: list[str], rate: int) -> dict[str, float]:
    recogniser = Recogniser()
    errors = dict.fromkeys(engines, 0)
    total = 0
    for text in sentences:
        reference = words(text)
        total += len(reference)
        for name, synth in engines.items():
            audio = np.concatenate(list(synth(text)))
            errors[name] += edit_distance(reference, words(recogniser.text(audio, rate)))
    return {name: errors[name] / total for name in engines}


# --- report --------------------------------------------------------------------------------


def resolve(models_dir: Path) -> Path:
    from agent.voice.bundle import resolve_bundle_dir

    return resolve_bundle_dir(models_dir / VOICE)


def startups(args: argparse.Namespace) -> dict[str, Any]:
    """Start-up and peak RSS of a fresh process per engine (the first with an empty
    optimised-model cache), and of the agent's daemon."""
    import shutil

    shutil.rmtree(Path(os.environ[CACHE_ENV]) / "ort", ignore_errors=True)  # a device's first boot
    daemon_startup.byte_compile()  # as pip install leaves the agent on a device
    runs: dict[str, list[dict[str, float]]] = {n: [] for n in ENGINES}
    for _ in range(args.startup_runs + 1):
        for name in ENGINES:
            runs[name].append(startup(args, name))
    # The first start builds the optimised-model cache; every later start (reboots, restarts,
    # updates of other voices) finds it.
    return {
        "startup_cold": {n: r[0]["startup_s"] for n, r in runs.items()},
        "startup": {n: statistics.median(x["startup_s"] for x in r[1:]) for n, r in runs.items()},
        "rss": {n: statistics.median(x["rss_mib"] for x in r[1:]) for n, r in runs.items()},
        "daemon": daemon_startup.measure(args.models_dir, args.variant, args.startup_runs),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models-dir", type=Path, default=ROOT / "models")
    parser.add_argument("--variant", default="int8", help="our shipped variant (default int8)")
    parser.add_argument("--sentences", type=Path, default=HELDOUT)
    parser.add_argument("--reps", type=int, default=2, help="passes over the sentences (RTF)")
    parser.add_argument("--startup-runs", type=int, default=5)
    add_json_option(parser, "compare_piper")
    parser.add_argument("--child", choices=ENGINES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)

    import onnxruntime

    from agent.logs import configure_logging
    from agent.voice.voice import VoiceConfig

    configure_logging("warning")
    import tempfile

    os.environ[CACHE_ENV] = tempfile.mkdtemp(prefix="tts-bench-cache-")  # children inherit it

    bundle_dir = resolve(args.models_dir)
    rate = VoiceConfig.from_file(bundle_dir / f"{VOICE}.onnx.json").sample_rate
    sentences = read_lines(args.sentences)
    results: dict[str, Any] = {}
    for threads in (1, 2):
        engines = {n: make_engine(n, bundle_dir, threads, args.variant) for n in (*ENGINES, WHOLE)}
        results[f"rtf_{threads}"] = rtf(engines, sentences, args.reps, rate)
        results[f"ttfa_{threads}"] = first_audio(engines, 2 * args.reps + 1)
        if threads == 1:
            results["wer"] = word_error_rate({n: engines[n] for n in ENGINES}, sentences, rate)
            results["ttfa_cached"] = cached_first_audio(bundle_dir, args.variant,
                                                        engines["piper"], 2 * args.reps + 1)
        del engines
    quiet = {n: make_engine(n, bundle_dir, 1, args.variant, noise=False) for n in ENGINES}
    results["wer_noise0"] = word_error_rate(quiet, sentences, rate)
    del quiet
    results.update(startups(args))

    from importlib.metadata import version

    print(f"{VOICE} on {platform.machine()}, {os.cpu_count()} CPUs; onnxruntime "
          f"{onnxruntime.__version__}, piper-tts {version('piper-tts')}; {len(sentences)} "
          f"sentences x {args.reps}, start-up x {args.startup_runs}; 1/RTF = audio s per s")
    print(table(results))
    print(streaming_off(results))
    print(daemon_lines(results))
    write_result("compare_piper", record(results), args, raw=results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
