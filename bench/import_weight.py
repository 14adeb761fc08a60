"""Start-up weight: what ``tts-agent synth``, ``say`` and ``run`` import, what it costs, and a
whole-process ``synth`` of a long announcement next to piper-tts's ``python -m piper``.

    .venv/bin/python bench/import_weight.py [--runs 5] [--code LABEL=DIR ...] [--piper PYTHON]

Each command runs in a fresh ``python -X importtime`` process and its import tree is parsed: how
many of the agent's modules it imports, the import time of the whole tree (the cumulative time
of every top-level import, the interpreter's own included), the agent's share (their self time)
and the heaviest imports: the agent's modules by self time and each third-party package where it
is first entered, by cumulative time. ``synth`` and ``say`` run for real (the default voice, a
plain-text announcement; ``say`` plays to an ALSA ``file`` PCM); ``run`` is the daemon's imports
up to where it starts loading the voice, then the daemon's own (``agent.daemon.service``). The
whole-process figure is spawn to exit of ``synth`` without ``-X importtime``. The module count
is exact; the times are not a profile: ``-X importtime`` nests imports of all threads in one
tree, and the voice's text stages are imported on the loader's helper thread while the main
thread imports on, so a module's time can hold the other thread's (and a loaded machine's).

``--code LABEL=DIR`` measures another copy of the code (a ``git archive`` of main: the
directory holding its ``agent/``), rounds interleaved, so before and after run side by side;
by default only this checkout. ``--piper PYTHON``: the interpreter of an environment with
piper-tts (a bench-only dependency) for the whole-process comparison. Medians of ``--runs``.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from results import Figures, add_json_option, write_result
from workload import BUNDLE, HELDOUT, PARAGRAPH, ROOT, VOICE, read_lines

COMMANDS = ("synth", "say", "run")
TOP = 15
RUN_IMPORTS = ("agent.cli", "agent.commands.run", "agent.hardware.effective",
               "agent.library.voices", "agent.mqtt.credentials", "agent.settings",
               "agent.daemon.state")
"""What ``tts-agent run`` imports before it starts loading the voice (its handler's order)."""
RUN_DAEMON = ("agent.daemon.mainloop", "agent.daemon.service", "agent.mqtt.topics")
"""What it imports while the voice loads on its helper thread: the rest of the daemon."""
_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def long_announcement() -> str:
    """The paragraph and the held-out sentences after it, about half a minute of speech."""
    text = PARAGRAPH
    for line in read_lines(HELDOUT):  # type: ignore[arg-type]
        if len(text) >= 450:
            break
        text += " " + line
    return text


def parse(stderr: str) -> list[tuple[int, int, int, str]]:
    """``(self_us, cumulative_us, depth, module)`` of each line of ``-X importtime``."""
    rows = []
    for line in stderr.splitlines():
        match = _LINE.match(line)
        if match:
            rows.append((int(match[1]), int(match[2]), len(match[3]) // 2, match[4]))
    return rows


def is_agent(module: str) -> bool:
    return module == "agent" or module.startswith("agent.")


def summary(rows: list[tuple[int, int, int, str]]) -> dict[str, Any]:
    """One process's figures: agent modules, total and agent ms, the cost of each import."""
    agent = sorted({m for _, _, _, m in rows if is_agent(m)})
    costs: dict[str, float] = {}
    # a package's cost where it is first entered: its outermost line (importtime prints a
    # module after its children, so the parent of a line is the next line less indented)
    parents: list[str | None] = [None] * len(rows)
    stack: list[tuple[int, int]] = []  # (depth, index) of lines waiting for their parent
    for index, (_, _, depth, _) in enumerate(rows):
        while stack and stack[-1][0] > depth:
            parents[stack.pop()[1]] = rows[index][3]
        stack.append((depth, index))
    for (own, cumulative, _, module), parent in zip(rows, parents, strict=True):
        root = module.split(".")[0]
        if is_agent(module):
            costs[module] = own / 1000
        elif parent is None or parent.split(".")[0] != root:
            costs[root] = costs.get(root, 0.0) + cumulative / 1000
    return {"agent_modules": agent, "total_ms": sum(c for _, c, d, _ in rows if d == 0) / 1000,
            "agent_ms": sum(s for s, _, _, m in rows if is_agent(m)) / 1000, "costs": costs}


def _env(code: Path, work: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TTS_AGENT_")}
    env.update({"PYTHONPATH": str(code), "TTS_AGENT_MODELS__DIR": str(BUNDLE.parent),
                "TTS_AGENT_MODELS__DEFAULT_VOICE": VOICE, "TTS_AGENT_CACHE__DIR": str(work),
                "TTS_AGENT_AUDIO__DEVICE": f"file:'{work / 'out.raw'}',raw",
                "TTS_AGENT_LOG__LEVEL": "warning", "PYTHONDONTWRITEBYTECODE": "1"})
    return env


def command_line(command: str, text: str, work: Path) -> list[str]:
    if command == "synth":
        return ["-m", "agent", "synth", "--text", text, "--out", str(work / "out.wav")]
    if command == "say":
        return ["-m", "agent", "say", text]
    code = "".join(f"import {m}\n" for m in RUN_IMPORTS)
    code += ("import inspect\nfrom agent.cli import build_parser\n"  # an older one: no argv
             "build_parser(*[['run']][:len(inspect.signature(build_parser).parameters)])\n")
    return ["-c", code + "".join(f"import {m}\n" for m in RUN_DAEMON)]


def measure(code: Path, command: str, text: str, work: Path, *, importtime: bool) -> Any:
    """One fresh process: its parsed import tree, or (``importtime`` off) its wall seconds."""
    argv = [sys.executable, *(["-X", "importtime"] if importtime else []),
            *command_line(command, text, work)]
    started = time.perf_counter()
    done = subprocess.run(argv, env=_env(code, work), cwd=work, capture_output=True, text=True,
                          timeout=300, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{command} at {code} failed ({done.returncode}): {done.stderr[-2000:]}")
    return summary(parse(done.stderr)) if importtime else seconds


def piper_seconds(python: str, text: str, work: Path) -> float:
    """Spawn to exit of ``python -m piper`` writing the same text to a WAV file."""
    argv = [python, "-m", "piper", "-m", str(BUNDLE / f"{VOICE}.onnx"),
            "-c", str(BUNDLE / f"{VOICE}.onnx.json"), "-f", str(work / "piper.wav")]
    started = time.perf_counter()
    subprocess.run(argv, input=text, capture_output=True, text=True, check=True, timeout=300)
    return time.perf_counter() - started


def piper_version(python: str) -> str:
    done = subprocess.run([python, "-c", "from importlib.metadata import version\n"
                           "print(version('piper-tts'))"], capture_output=True, text=True,
                          check=True, timeout=60)
    return done.stdout.strip()


def audio_seconds(work: Path) -> float:
    import wave

    with wave.open(str(work / "out.wav"), "rb") as wav:
        return wav.getnframes() / wav.getframerate()


def run_all(codes: dict[str, Path], runs: int, piper: str | None) -> dict[str, Any]:
    text = long_announcement()
    trees: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    wall: dict[str, list[float]] = defaultdict(list)
    out: dict[str, Any] = {"text_chars": len(text),
                           "piper_tts": piper_version(piper) if piper else None}
    with tempfile.TemporaryDirectory(prefix="import-weight-") as tmp:
        for label, code in codes.items():
            compileall.compile_dir(str(code / "agent"), quiet=1)
            work = Path(tmp) / label
            work.mkdir()
            measure(code, "synth", text, work, importtime=False)  # the voice's cache built
        for _ in range(runs):
            for label, code in codes.items():
                work = Path(tmp) / label
                for command in COMMANDS:
                    trees[label][command].append(measure(code, command, text, work,
                                                         importtime=True))
                wall[label].append(measure(code, "synth", text, work, importtime=False))
            if piper:
                wall["piper-tts"].append(piper_seconds(piper, text, Path(tmp)))
        out["audio_s"] = audio_seconds(Path(tmp) / next(iter(codes)))
    out["whole_process_s"] = {label: statistics.median(v) for label, v in wall.items()}
    out["imports"] = {label: {command: medians(samples) for command, samples in per.items()}
                      for label, per in trees.items()}
    return out


def medians(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """The medians of one command's runs, and its heaviest imports (median ms each)."""
    costs: dict[str, list[float]] = defaultdict(list)
    for sample in samples:
        for module, ms in sample["costs"].items():
            costs[module].append(ms)
    cost = {m: statistics.median(v) for m, v in costs.items()}
    heavy = sorted(cost.items(), key=lambda item: -item[1])[:TOP]
    return {"agent_modules": len(samples[-1]["agent_modules"]),
            "modules": samples[-1]["agent_modules"],
            "total_ms": statistics.median(s["total_ms"] for s in samples),
            "agent_ms": statistics.median(s["agent_ms"] for s in samples),
            "heaviest": [[module, ms] for module, ms in heavy]}


def record(results: dict[str, Any]) -> Figures:
    figures = Figures()
    labels = list(results["imports"])
    rows = []
    for label in labels:
        for command in COMMANDS:
            got = results["imports"][label][command]
            key = f"{label}.{command}"
            rows.append([f"{command} ({label})" if len(labels) > 1 else command,
                         figures.add(f"{key}.agent_modules", got["agent_modules"], "",
                                     f"{command}, {label}: agent modules imported"),
                         figures.add(f"{key}.import_ms", got["total_ms"], "ms",
                                     f"{command}, {label}: import time, whole tree"),
                         figures.add(f"{key}.agent_ms", got["agent_ms"], "ms",
                                     f"{command}, {label}: the agent's own modules")])
    figures.table("What each command imports (median of the runs)",
                  ["command", "agent modules", "import time", "of which the agent's"], rows,
                  "`run`: up to the voice load, and the daemon's modules it imports meanwhile. "
                  "The count is exact; `-X importtime` times of two threads overlap.")
    first = labels[0]
    for command in COMMANDS:
        heavy = results["imports"][first][command]["heaviest"]
        figures.table(f"Heaviest imports of `{command}` ({first})", ["import", "median"],
                      [[module, figures.add(f"{first}.{command}.heaviest.{module}", ms, "ms",
                                            f"{command}: import of {module}")]
                       for module, ms in heavy],
                      "The agent's modules by their own time; a third-party package where "
                      "it is first entered, with everything it imports.")
    walls = results["whole_process_s"]
    audio = figures.add("audio_s", results["audio_s"], "s", "the long announcement's audio")
    wall_rows = [[label, figures.add(f"{label}.synth_process_s", s, "s",
                                     f"{label}: whole-process synth, spawn to exit"), audio]
                 for label, s in walls.items()]
    for label, s in walls.items():
        if label != "piper-tts" and "piper-tts" in walls:
            wall_rows.append([f"{label} vs piper-tts", figures.add(
                f"{label}.vs_piper", walls["piper-tts"] / s, "x",
                f"{label}: piper-tts's whole-process seconds over ours"), None])
    figures.table("Whole-process synth of the long announcement (median)",
                  ["engine", "spawn to exit", "audio"], wall_rows,
                  "`tts-agent synth --text ... --out` and `python -m piper -f` (text on "
                  f"stdin; piper-tts {results['piper_tts']}), the same voice, default threads; "
                  "the voice's cache built first.")
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--code", action="append", default=[], metavar="LABEL=DIR",
                        help="another copy of the code to measure (default: this checkout)")
    parser.add_argument("--piper", help="python of an environment with piper-tts")
    add_json_option(parser, "import_weight")
    args = parser.parse_args()
    codes = {"this checkout": ROOT}
    for item in args.code:
        label, _, directory = item.partition("=")
        if not directory or not (Path(directory) / "agent").is_dir():
            parser.error(f"--code {item!r}: LABEL=DIR, DIR holding an agent/ package")
        codes[label] = Path(directory).resolve()
    results = run_all(codes, args.runs, args.piper)
    for label, per in results["imports"].items():
        for command, got in per.items():
            print(f"{label:>14} {command:6} {got['agent_modules']:4d} agent modules  "
                  f"{got['total_ms']:7.1f} ms imports ({got['agent_ms']:.1f} ms agent)")
    print(json.dumps(results["whole_process_s"]))
    write_result("import_weight", record(results), args, raw=results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
