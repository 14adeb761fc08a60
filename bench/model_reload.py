"""Model hot-reload figures with the real voice: time from a file change to the new model serving,
and resident memory across repeated reloads (onnxruntime sessions are known to leak when created
and destroyed repeatedly).

It stages two versions of the installed voice that differ only in an ONNX doc string (so their
sha256 differ and each switch is a real reload), then swaps the ``current`` symlink back and forth
while the model watcher runs, exactly as an OTA updater would.

    .venv/bin/python bench/model_reload.py [--reloads 50] [--debounce 0.25] [--json PATH]
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

from results import Figures, add_json_option, write_result  # noqa: E402

from agent.library.voices import VoiceLibrary  # noqa: E402
from agent.library.watch import ModelWatcher  # noqa: E402
from agent.logs import configure_logging  # noqa: E402
from agent.outcomes import VoiceEvent  # noqa: E402
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
    add_json_option(parser, "model_reload")
    args = parser.parse_args()
    configure_logging("warning", "console")
    work = Path(tempfile.mkdtemp(prefix="reload-bench-"))
    try:
        voice_dir = work / VOICE
        stage_versions(args.models / VOICE, voice_dir)
        result = reloads(args, work, voice_dir)
        if result is None:
            return 1
        report(args, result)
        write_result("model_reload", record(args, result), args)
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


def reloads(args: argparse.Namespace, work: Path, voice_dir: Path) -> dict[str, Any] | None:
    """Swap the voice ``args.reloads`` times under the watcher; None when a reload never came."""
    loaded = threading.Event()
    events: list[VoiceEvent] = []

    def on_event(event: VoiceEvent) -> None:
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
                return None
            time.sleep(0.001)
        to_serving.append(time.monotonic() - changed)
        validate.append(float(events[-1].load_s or 0.0))
        library.get().synthesize("Reload check.").__next__()
        if n in (1, 10, 50) or n == args.reloads:
            rss_at[n] = rss_mib()
    watcher.stop()
    return {"rejected": sum(1 for e in events if e["event"] == "model_rejected"),
            "to_serving": to_serving, "validate": validate, "rss_before": rss_before,
            "rss_loaded": rss_loaded, "rss_at": rss_at}


def _p95(values: list[float]) -> float:
    return sorted(values)[int(0.95 * (len(values) - 1))]


def report(args: argparse.Namespace, result: dict[str, Any]) -> None:
    to_serving, rss_loaded = result["to_serving"], result["rss_loaded"]
    print(f"reloads: {args.reloads} (debounce {args.debounce} s), rejected: {result['rejected']}")
    print(f"file change -> new model serving: median {statistics.median(to_serving):.3f} s, "
          f"p95 {_p95(to_serving):.3f} s")
    print(f"  of which validation (verify sha256 + load + warm-up): median "
          f"{statistics.median(result['validate']):.3f} s; debounce + settle: "
          f"{args.debounce:.2f} s + up to {args.debounce:.2f} s")
    print(f"RSS: before load {result['rss_before']:.0f} MiB, one voice loaded {rss_loaded:.0f} MiB")
    for n, value in sorted(result["rss_at"].items()):
        print(f"RSS after {n:>3} reloads: {value:.0f} MiB "
              f"({value - rss_loaded:+.0f} MiB vs one voice loaded)")


def record(args: argparse.Namespace, result: dict[str, Any]) -> Figures:
    figures = Figures()
    to_serving = result["to_serving"]
    figures.add("rejected", result["rejected"], "", f"reloads rejected of {args.reloads}")
    figures.table("File change to the new model serving", ["", "median", "p95"], [
        ["file change -> new model serving",
         figures.add("to_serving", statistics.median(to_serving) * 1000, "ms",
                     "from the symlink swap to the new version serving, median"),
         figures.add("to_serving_p95", _p95(to_serving) * 1000, "ms", "the same, 95th percentile")],
        ["of which validation (verify sha256 + load + warm-up)",
         figures.add("validate", statistics.median(result["validate"]) * 1000, "ms",
                     "the library's load_s of each reload, median"), None]])
    rows: list[list[str | None]] = [
        ["before load", figures.add("rss_before", result["rss_before"], "MiB",
                                    "RSS before the first voice loads"), None],
        ["one voice loaded", figures.add("rss_loaded", result["rss_loaded"], "MiB",
                                         "RSS with one voice loaded"), None]]
    for n, value in sorted(result["rss_at"].items()):
        rows.append([f"after {n} reloads",
                     figures.add(f"rss_after_{n}", value, "MiB", f"RSS after {n} reloads"),
                     figures.add(f"rss_growth_{n}", value - result["rss_loaded"], "MiB",
                                 f"RSS after {n} reloads - RSS with one voice loaded",
                                 signed=True)])
    figures.table("Resident memory across reloads", ["", "RSS", "vs one voice loaded"], rows)
    return figures


if __name__ == "__main__":
    sys.exit(main())
