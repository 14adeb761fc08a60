"""The agent's Wyoming server against wyoming-piper, measured by wyoming-bench (a tool neither of
us wrote): first audio and total time, non-streaming and streaming, one client and several.

    .venv/bin/python bench/wyoming_peers.py [--quick] [--repeats 3] [--rounds 2] [--clients 1 2]

Both servers run on free loopback ports with the same voice files (``models/<voice>``: the
agent its own bundle, wyoming-piper its ``--data-dir`` with ``--local-files-only``, so neither
downloads), the agent with its phrase cache off (``cache.max_mb = 0``; the tool appends a nonce
to every text anyway). Bench-only packages live in venvs under ``.cache/bench-venvs/``
(``wyoming-bench`` 2026.10.0, ``wyoming-piper`` 2.5.2), created from PyPI when missing.

One client: each repeat is one ``wyoming-bench tts --mode both -v`` against both servers, the
order swapped every repeat (the tool measures one server after the other). Several clients:
that many tool processes at once against one server, then against the other, order swapped
every repeat. Medians over every measurement the tool printed (its ``-v`` lines); its whole
reports are kept in the results' ``raw``. Ratios are ours over wyoming-piper's (lower is
better); the machine's load is recorded before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from results import Figures, add_json_option, write_result
from workload import HELDOUT, PARAGRAPH, ROOT, VOICE, read_lines

VENVS = ROOT / ".cache" / "bench-venvs"
PEERS = {"wyoming-bench": "wyoming-bench==2026.10.0", "wyoming-piper": "wyoming-piper==2.5.2"}
SERVERS = ("tts-agent", "wyoming-piper")
MODES = ("non_streaming", "streaming")
TARGETS = {"ttft": 0.25, "total": 0.5}
"""#26 item 3: ours over wyoming-piper's, medians, every mode and client count."""
SHORT = "Doors closing. Please stand clear of the doors."
_HEADER = re.compile(r"^=== \S+:(\d+) ")
_LINE = re.compile(r"^\[(non_streaming|streaming)\] r\d+ sent=\d+ ttft=(\d+)ms total=(\d+)ms "
                   r"audio=([\d.]+)s")


def texts() -> list[str]:
    """Three announcements: a short one, the paragraph, two held-out sentences."""
    held = read_lines(HELDOUT)  # type: ignore[arg-type]
    return [SHORT, PARAGRAPH, " ".join(held[:2])]


def venv(name: str) -> Path:
    """The bench venv ``name`` (its ``bin``), created with its package from PyPI if missing."""
    home = VENVS / name
    if not (home / "bin" / name).exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(home)], check=True)
        subprocess.run([str(home / "bin" / "pip"), "install", "-q", PEERS[name]], check=True)
    return home / "bin"


def version_of(bin_dir: Path, package: str) -> str:
    done = subprocess.run([str(bin_dir / "python"), "-c", "import importlib.metadata as m; "
                           f"print(m.version({package!r}))"], capture_output=True, text=True,
                          check=False)
    return done.stdout.strip() or "unknown"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def described(port: int) -> bool:
    """Whether a Wyoming server on ``port`` answers ``describe`` with ``info``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            sock.sendall(b'{"type": "describe"}\n')
            sock.settimeout(5)
            return b'"info"' in sock.makefile("rb").readline()
    except OSError:
        return False


def agent_env(work: Path, port: int, syntheses: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TTS_AGENT_")}
    env.pop("NOTIFY_SOCKET", None)
    env.update({
        "PYTHONPATH": str(ROOT), "TTS_AGENT_DEVICE_ID": "bench",
        "TTS_AGENT_MQTT__HOST": "127.0.0.1", "TTS_AGENT_MQTT__PORT": str(free_port()),
        "TTS_AGENT_MODELS__DIR": str(ROOT / "models"), "TTS_AGENT_MODELS__DEFAULT_VOICE": VOICE,
        "TTS_AGENT_MODELS__WATCH": "false", "TTS_AGENT_CACHE__MAX_MB": "0",
        "TTS_AGENT_CACHE__DIR": str(work / "cache"), "TTS_AGENT_LOG__LEVEL": "warning",
        "TTS_AGENT_AUDIO__DEVICE": f"file:'{work / 'out.raw'}',raw",
        "TTS_AGENT_WYOMING__URI": f"tcp://127.0.0.1:{port}",
        "TTS_AGENT_WYOMING__MAX_SYNTHESES": str(syntheses),
        "TTS_AGENT_WYOMING__MAX_CLIENTS": "16",
    })
    return env


def start_servers(work: Path, piper_bin: Path, syntheses: int
                  ) -> tuple[dict[str, int], list[subprocess.Popen[bytes]]]:
    """Both servers, each in its own process group; their ports once both answer."""
    ports = {name: free_port() for name in SERVERS}
    bundle = ROOT / "models" / VOICE
    commands = {
        "tts-agent": ([sys.executable, "-m", "agent", "run"],
                      agent_env(work, ports["tts-agent"], syntheses)),
        "wyoming-piper": ([str(piper_bin / "python"), "-m", "wyoming_piper", "--voice", VOICE,
                           "--data-dir", str(bundle), "--download-dir", str(work / "dl"),
                           "--local-files-only",
                           "--uri", f"tcp://127.0.0.1:{ports['wyoming-piper']}"],
                          {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}),
    }
    processes = []
    for name, (argv, env) in commands.items():
        with (work / f"{name}.log").open("wb") as log:
            processes.append(subprocess.Popen(argv, env=env, cwd=ROOT, stdout=log,
                                              stderr=subprocess.STDOUT,
                                              start_new_session=True))
    deadline = time.monotonic() + 180
    for name, port in ports.items():
        while not described(port):
            if time.monotonic() > deadline or any(p.poll() is not None for p in processes):
                stop(processes)
                raise SystemExit(f"{name} did not start; see {work / (name + '.log')}")
            time.sleep(0.5)
    return ports, processes


def cpu_s(pid: int) -> float:
    """CPU seconds (user and system, all threads) a process has used: what a request costs,
    whatever the machine's load."""
    fields = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(20)
        except ProcessLookupError:
            continue
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


def bench_command(bench_bin: Path, text_file: Path, rounds: int, ports: list[int]) -> list[str]:
    return [str(bench_bin / "wyoming-bench"), "tts", "--mode", "both", "--rounds", str(rounds),
            "--warmup", "1", "-v", "--timeout", "300", "--config",
            json.dumps({"voice": VOICE}), "--texts-file", str(text_file),
            *(f"127.0.0.1:{port}" for port in ports)]


def parse(report: str, names: dict[int, str]) -> dict[str, dict[str, list[list[float]]]]:
    """Each server's measurements by mode from the tool's ``-v`` lines: [ttft s, total s,
    audio s] each; a failed one is left out (the tool prints FAIL and counts it)."""
    out: dict[str, dict[str, list[list[float]]]] = {}
    server = None
    for line in report.splitlines():
        header = _HEADER.match(line)
        if header:
            server = names[int(header.group(1))]
            continue
        got = _LINE.match(line)
        if got and server is not None:
            out.setdefault(server, {}).setdefault(got.group(1), []).append(
                [int(got.group(2)) / 1000, int(got.group(3)) / 1000, float(got.group(4))])
    return out


def run_tool(argvs: list[list[str]]) -> list[str]:
    """The tool's processes, all at once; their whole reports."""
    processes = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True) for argv in argvs]
    reports = [process.communicate()[0] for process in processes]
    for argv, process in zip(argvs, processes, strict=True):
        if process.returncode:
            raise SystemExit(f"wyoming-bench failed ({process.returncode}): {' '.join(argv)}")
    return reports


def measure(args: argparse.Namespace, bench_bin: Path, ports: dict[str, int], work: Path
            ) -> dict[str, Any]:
    text_file = work / "texts.txt"
    text_file.write_text("\n".join(texts()[:1] if args.quick else texts()) + "\n",
                         encoding="utf-8")
    names = {port: name for name, port in ports.items()}
    samples: dict[str, Any] = {}
    raw: list[dict[str, Any]] = []
    for clients in args.clients:
        per = samples.setdefault(str(clients), {})
        for repeat in range(args.repeats):
            order = list(SERVERS) if repeat % 2 == 0 else list(reversed(SERVERS))
            if clients == 1:
                groups = [[bench_command(bench_bin, text_file, args.rounds,
                                         [ports[name] for name in order])]]
            else:
                groups = [[bench_command(bench_bin, text_file, args.rounds, [ports[name]])]
                          * clients for name in order]
            for argvs in groups:
                for report in run_tool(argvs):
                    raw.append({"clients": clients, "repeat": repeat, "report": report})
                    for server, modes in parse(report, names).items():
                        for mode, rows in modes.items():
                            per.setdefault(mode, {}).setdefault(server, []).extend(rows)
            print(f"clients {clients}, repeat {repeat + 1}/{args.repeats} done", flush=True)
    return {"samples": samples, "reports": raw}


def summarize(samples: dict[str, Any]) -> dict[str, Any]:
    """Medians per client count, mode and server, and ours over wyoming-piper's."""
    out: dict[str, Any] = {}
    for clients, modes in samples.items():
        for mode, servers in modes.items():
            entry: dict[str, Any] = {}
            for server, rows in servers.items():
                entry[server] = {"n": len(rows),
                                 "ttft_s": statistics.median(r[0] for r in rows),
                                 "total_s": statistics.median(r[1] for r in rows),
                                 "audio_s": statistics.median(r[2] for r in rows)}
            if all(name in entry for name in SERVERS):
                ours, theirs = entry["tts-agent"], entry["wyoming-piper"]
                for what in TARGETS:
                    entry[f"{what}_ratio"] = ours[f"{what}_s"] / theirs[f"{what}_s"]
            out.setdefault(clients, {})[mode] = entry
    return out


def record(result: dict[str, Any]) -> Figures:
    figures = Figures()
    rows = []
    for clients, modes in result["summary"].items():
        for mode, entry in modes.items():
            key = f"c{clients}.{mode}"
            label = f"{mode.replace('_', '-')}, {clients} client{'s' if clients != '1' else ''}"
            cells: list[str | None] = []
            for server in SERVERS:
                got = entry.get(server)
                cells.append(None if got is None else figures.add(
                    f"{key}.{server}.ttft_ms", got["ttft_s"] * 1000, "ms",
                    f"{label}: {server} first audio"))
            for server in SERVERS:
                got = entry.get(server)
                cells.append(None if got is None else figures.add(
                    f"{key}.{server}.total_ms", got["total_s"] * 1000, "ms",
                    f"{label}: {server} total time"))
            for what, target in TARGETS.items():
                ratio = entry.get(f"{what}_ratio")
                cells.append(None if ratio is None else figures.add(
                    f"{key}.{what}_ratio", ratio, "x",
                    f"{label}: ours over wyoming-piper's {what} (target <= {target})"))
            rows.append([label, *cells])
    figures.table("wyoming-bench: the agent against wyoming-piper (medians)",
                  ["mode, clients", "first audio, ours", "first audio, wyoming-piper",
                   "total, ours", "total, wyoming-piper", "first audio ratio", "total ratio"],
                  rows,
                  f"wyoming-bench {result['versions']['wyoming-bench']} (its -v measurements), "
                  f"wyoming-piper {result['versions']['wyoming-piper']}, the same voice files; "
                  "the agent's phrase cache off, wyoming.max_syntheses "
                  f"{result['max_syntheses']}; ratios ours over theirs, targets <= "
                  f"{TARGETS['ttft']} (first audio) and <= {TARGETS['total']} (total). Load "
                  f"average {result['load_before']:.1f} before, {result['load_after']:.1f} "
                  "after: on a loaded machine the absolute times are not the engines'.")
    if "cpu_s" in result:
        cpu = result["cpu_s"]
        figures.table("CPU time each server used for all its requests", ["server", "CPU"],
                      [[name, figures.add(f"cpu.{name}", cpu[name], "s",
                                          f"{name}: CPU seconds, every request of the run")]
                       for name in SERVERS]
                      + [["ours over wyoming-piper's", figures.add(
                          "cpu_ratio", cpu["tts-agent"] / cpu["wyoming-piper"], "x",
                          "the agent's CPU seconds over wyoming-piper's")]],
                      "User and system time of each server process, all threads: the work "
                      "the requests cost, which the machine's load does not change much.")
    figures.add("load_before", result["load_before"], "", "1-minute load average before")
    figures.add("load_after", result["load_after"], "", "1-minute load average after")
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="one text, one repeat, one round: checks it works")
    parser.add_argument("--repeats", type=int, default=4, help="tool runs per client count")
    parser.add_argument("--rounds", type=int, default=2, help="the tool's --rounds")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--max-syntheses", type=int, default=2,
                        help="the agent's wyoming.max_syntheses (default: one per core here)")
    add_json_option(parser, "wyoming_peers")
    args = parser.parse_args()
    if args.quick:
        args.repeats, args.rounds = 1, 1
    bench_bin, piper_bin = venv("wyoming-bench"), venv("wyoming-piper")
    with tempfile.TemporaryDirectory(prefix="wyoming-peers-") as tmp:
        work = Path(tmp)
        ports, processes = start_servers(work, piper_bin, args.max_syntheses)
        try:
            load_before = os.getloadavg()[0]
            cpu_before = [cpu_s(p.pid) for p in processes]
            measured = measure(args, bench_bin, ports, work)
            cpu = {name: cpu_s(p.pid) - before
                   for name, p, before in zip(SERVERS, processes, cpu_before, strict=True)}
            load_after = os.getloadavg()[0]
        finally:
            stop(processes)
    result = {"summary": summarize(measured["samples"]), "max_syntheses": args.max_syntheses,
              "load_before": load_before, "load_after": load_after, "cpu_s": cpu,
              "versions": {"wyoming-bench": version_of(bench_bin, "wyoming-bench"),
                           "wyoming-piper": version_of(piper_bin, "wyoming-piper")}}
    print(json.dumps(result["summary"], indent=1))
    write_result("wyoming_peers", record(result), args, raw={**result, **measured})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
