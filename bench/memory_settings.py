"""onnxruntime memory settings for the voice, measured: peak RSS and speed per setting.

Each setting runs in a fresh process (so peaks do not mix): load the model with the agent's own
session builder, synthesize a few sentences' worth of ids, report the RSS after load, the peak
RSS (VmHWM) and the median run time. Compare rows within one run; the machine's load moves the
absolute numbers.

    .venv/bin/python bench/memory_settings.py [--runs 5] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

from results import Figures, add_json_option, write_result
from workload import BUNDLE, ROOT, status_kib

sys.path.insert(0, str(ROOT))

SETTINGS = {
    "default (arena + memory patterns on)": {},
    "arena and memory patterns off": {"enable_cpu_mem_arena": False, "enable_mem_pattern": False},
    "prepacking off": {"config_entries": [["session.disable_prepacking", "1"]]},
}


def status_mib(field: str) -> float:
    return status_kib(field) / 1024


def child(variant: str, setting: str, runs: int) -> None:
    import numpy as np

    from agent.hardware.runtime import RuntimeOptions
    from agent.logs import configure_logging
    from agent.voice.bundle import verify_bundle
    from agent.voice.onnx_session import create_session

    configure_logging("error")
    extra = dict(SETTINGS[setting])
    entries = tuple(tuple(e) for e in extra.pop("config_entries", []))
    bundle = verify_bundle(BUNDLE, variant)
    session, _ = create_session(bundle.model_path(variant),
                                RuntimeOptions(config_entries=entries, **extra))  # type: ignore[arg-type]
    loaded = status_mib("VmRSS")
    ids = np.array([[1, 0, *([20, 0, 59, 0, 120, 0, 74, 0] * 40), 2]], dtype=np.int64)
    feeds = {"input": ids, "input_lengths": np.array([ids.shape[1]], dtype=np.int64),
             "scales": np.array([0.667, 1.0, 0.8], dtype=np.float32)}
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        session.run(None, feeds)
        times.append(time.perf_counter() - started)
    print(json.dumps({"loaded_mib": loaded, "peak_mib": status_mib("VmHWM"),
                      "run_s": statistics.median(times)}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    add_json_option(parser, "memory_settings")
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args.runs)
        return 0
    print(f"{'variant':<8} {'setting':<38} {'RSS loaded':>10} {'peak RSS':>9} {'run (median)':>13}")
    figures = Figures()
    table: list[list[str | None]] = []
    for variant in ("fp32", "int8"):
        base = None
        for n, setting in enumerate(SETTINGS):
            out = subprocess.run([sys.executable, __file__, "--runs", str(args.runs), "--child",
                                  variant, setting], capture_output=True, text=True, check=True)
            row = json.loads(out.stdout.strip().splitlines()[-1])
            base = base or row
            print(f"{variant:<8} {setting:<38} {row['loaded_mib']:>7.0f} MiB "
                  f"{row['peak_mib']:>5.0f} MiB {row['run_s'] * 1000:>7.0f} ms "
                  f"({row['run_s'] / base['run_s']:.2f}x)")
            table.append(record(figures, f"{variant}.{n}", f"{variant}, {setting}", row, base))
    figures.table("Per setting, each in a fresh process",
                  ["variant, setting", "RSS loaded", "peak RSS", "run (median)", "vs default"],
                  table)
    write_result("memory_settings", figures, args)
    return 0


def record(figures: Figures, key: str, label: str, row: dict[str, float],
           base: dict[str, float]) -> list[str | None]:
    """One setting's figures; the table row that shows them."""
    return [label,
            figures.add(f"{key}.loaded", row["loaded_mib"], "MiB", f"{label}: RSS after load"),
            figures.add(f"{key}.peak", row["peak_mib"], "MiB", f"{label}: peak RSS (VmHWM)"),
            figures.add(f"{key}.run", row["run_s"] * 1000, "ms",
                        f"{label}: one run of the model, median"),
            figures.add(f"{key}.run_vs_default", row["run_s"] / base["run_s"], "x",
                        f"{label}: run time / the default setting's")]


if __name__ == "__main__":
    sys.exit(main())
