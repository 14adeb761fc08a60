"""What the benches run on, in one place: the voice, its bundle, the sentence files, the
3-sentence paragraph, and the process figures they read from ``/proc``.

Every bench that compares first audio or peak RSS with another says the same paragraph, so the
figures of ``compare_piper.py``, ``daemon_startup.py`` and ``streaming_memory.py`` line up.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VOICE = "en_US-joe-medium"
BUNDLE = ROOT / "models" / VOICE
CORPUS = ROOT / "bench" / "corpus"
"""The bench-only sentence files (``parity.txt``, ``intelligibility.txt``)."""
HELDOUT = files("agent.quantize").joinpath("corpus", "heldout.txt")
"""The quality gate's held-out sentences as the package ships them (never used for
calibration); ``read_lines`` and ``read_sentences`` read it like a path."""
PARAGRAPH = ("Good afternoon and welcome to the central library. The reading rooms on the "
             "first floor are open until eight. Please return borrowed books at the front desk.")


def read_lines(path: Path) -> list[str]:
    """The non-empty lines of a sentence file, ``#`` comment lines left out."""
    return [s.strip() for s in path.read_text(encoding="utf-8").splitlines()
            if s.strip() and not s.startswith("#")]


def status_kib(field: str, pid: int | str = "self") -> int:
    """A ``/proc/<pid>/status`` figure in KiB (``VmRSS``, ``VmHWM``, ...).

    ``VmHWM`` is the peak RSS; ``getrusage``'s ``ru_maxrss`` is not used because it survives
    fork+exec on Linux, so a child would report its parent's peak when the parent was bigger.
    """
    for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/{pid}/status has no {field}")


def descendants(pid: int) -> list[int]:
    """Every living process below ``pid`` (children of each of its threads, recursively)."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = (task / "children").read_text(encoding="ascii").split()
        except OSError:
            continue
        for child in map(int, children):
            out += [child, *descendants(child)]
    return out


def tree_hwm_kib(pid: int) -> dict[str, int]:
    """Peak RSS (``VmHWM``, KiB) of ``pid`` and, summed, of its living descendants (the PCM
    helper of a daemon): an upper bound of the tree's peak, as each peaked on its own."""
    helpers = 0
    for child in descendants(pid):
        try:
            helpers += status_kib("VmHWM", child)
        except (OSError, RuntimeError):  # gone meanwhile, or a zombie
            continue
    return {"main": status_kib("VmHWM", pid), "helpers": helpers}
