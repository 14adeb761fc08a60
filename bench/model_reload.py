"""Model hot-reload figures with the real voice: time from a file change to the new model serving,
and resident memory across repeated reloads (onnxruntime sessions are known to leak when created
and destroyed repeatedly).

It stages two versions of the installed voice that differ only in an ONNX doc string (so their
sha256 differ and each switch is a real reload), then swaps the ``current`` symlink back and forth
while the model watcher runs, exactly as an OTA updater would.

    .venv/bin/python bench/model_reload.py [--reloads 50] [--debounce 0.25]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent.library.voices import VoiceLibrary  # noqa: E402
from agent.library.watch import ModelWatcher  # noqa: E402
from agent.logs import configure_logging  # noqa: E402
from agent.settings import Settings  # noqa: E402
from agent.voice.bundle import verify_bundle, write_manifest  # noqa: E402

VOICE = "en_US-joe-medium"


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def stage_versions(src: Path, voice_dir: Path) -> None:
    import onnx

    source = verify_bundle(src)
    model = onnx.load(str(source.model_path("fp32")))
    for version in ("a", "b"):
        target = voice_dir / version
        target.mkdir(parents=True)
        model.doc_string = f"bench copy {version}"
        onnx.save(model, str(target / f"{VOICE}.onnx"))
        shutil.copyfile(source.config_path, target / f"{VOICE}.onnx.json")
        write_manifest(target, voice=VOICE, version=version, sample_rate=source.sample_rate,
                       variants={"fp32": f"{VOICE}.onnx"}, config=f"{VOICE}.onnx.json",
                       source="bench")
    (voice_dir / "current").symlink_to("a")


def swap(voice_dir: Path, version: str) -> None:
    tmp = voice_dir / ".current.swap"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(version)
    os.replace(tmp, voice_dir / "current")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reloads", type=int, default=50)
    parser.add_argument("--debounce", type=float, default=0.25)
    parser.add_argument("--models", type=Path, default=ROOT / "models")
    args = parser.parse_args()
    configure_logging("warning", "console")
    work = Path(tempfile.mkdtemp(prefix="reload-bench-"))
    try:
        voice_dir = work / VOICE
        stage_versions(args.models / VOICE, voice_dir)
        loaded = threading.Event()
        events: list[dict[str, Any]] = []

        def on_event(event: dict[str, Any]) -> None:
            events.append(event)
            loaded.set()

        settings = Settings(models={"dir": work, "default_voice": VOICE,
                                    "debounce_s": args.debounce})
        library = VoiceLibrary(settings, on_event=on_event, settle_s=args.debounce)
        rss_before = rss_mib()
        library.get()
        rss_loaded = rss_mib()
        watcher = ModelWatcher(library, debounce_s=args.debounce)
        watcher.start()
        to_serving: list[float] = []
        validate: list[float] = []
        rss_at: dict[int, float] = {}
        for n in range(1, args.reloads + 1):
            target = "b" if n % 2 else "a"
            loaded.clear()
            changed = time.monotonic()
            swap(voice_dir, target)
            while library.get().version != target:
                if time.monotonic() - changed > 60:
                    print(f"reload {n} did not happen: {events[-1:]}")
                    return 1
                time.sleep(0.001)
            to_serving.append(time.monotonic() - changed)
            validate.append(float(events[-1]["load_s"]))
            library.get().synthesize("Reload check.").__next__()
            if n in (1, 10, 50) or n == args.reloads:
                rss_at[n] = rss_mib()
        watcher.stop()
        rejected = [e for e in events if e["event"] == "model_rejected"]
        print(f"reloads: {args.reloads} (debounce {args.debounce} s), rejected: {len(rejected)}")
        print(f"file change -> new model serving: median {statistics.median(to_serving):.3f} s, "
              f"p95 {sorted(to_serving)[int(0.95 * (len(to_serving) - 1))]:.3f} s")
        print(f"  of which validation (verify sha256 + load + warm-up): median "
              f"{statistics.median(validate):.3f} s; debounce + settle: {args.debounce:.2f} s "
              f"+ up to {args.debounce:.2f} s")
        print(f"RSS: before load {rss_before:.0f} MiB, one voice loaded {rss_loaded:.0f} MiB")
        for n, value in sorted(rss_at.items()):
            print(f"RSS after {n:>3} reloads: {value:.0f} MiB "
                  f"({value - rss_loaded:+.0f} MiB vs one voice loaded)")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
