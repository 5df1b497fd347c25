"""What one `tritonsm build` costs: wall time and peak resident memory of its whole process tree.

The measuring half of `benchmarks/build_cost.py`: a sampler that sums the resident set sizes of a
process and all its descendants every ``interval`` seconds (the build starts side processes: the
TorchScript trace, ONNX Runtime graph rewrites, the serving-runtime check), remembers the peak and
the build's step line printed last before it, and the arithmetic and tables over the results.

RSS summed over processes counts pages they share (libraries mapped by several Python processes)
once per process, so the sum errs high; a child that lives shorter than one interval can be
missed, which is why the script also records ``/usr/bin/time -v``'s maximum RSS of the largest
single process as a cross-check (the sum can never be below it).
"""
from __future__ import annotations

import dataclasses
import re
import threading
import time
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from model_build.memory_budget import NEED_BASE, NEED_FACTOR

GB = 1e9
TIME_MAXRSS = re.compile(r"Maximum resident set size \(kbytes\):\s*(\d+)")
# "  bert: export ONNX (opset 18) done in 13.8 s (...)", "  bert-large-pt: tracing TorchScript took 21.5 s"
DURATION = re.compile(r"^\s*(.+?)(?: done in| took) (\d+(?:\.\d+)?) s\b")


@dataclasses.dataclass
class Peak:
    """The largest summed RSS seen, when, and during which step of the build."""

    rss_bytes: int = 0
    at_s: float = 0.0
    step: str = ""
    processes: int = 0
    samples: int = 0
    by_step: dict[str, int] = dataclasses.field(default_factory=dict)  # step line -> its peak summed RSS

    def add(self, rss_bytes: int, at_s: float, step: str, processes: int) -> None:
        self.samples += 1
        self.by_step[step] = max(self.by_step.get(step, 0), rss_bytes)
        if rss_bytes > self.rss_bytes:
            self.rss_bytes, self.at_s, self.step, self.processes = rss_bytes, at_s, step, processes


def tree_rss(pid: int) -> tuple[int, int]:
    """(summed RSS in bytes, number of processes) of ``pid`` and every descendant alive now."""
    import psutil

    try:
        root = psutil.Process(pid)
        members = [root] + root.children(recursive=True)
    except psutil.NoSuchProcess:
        return 0, 0
    total = count = 0
    for proc in members:
        try:
            total += proc.memory_info().rss
            count += 1
        except (psutil.NoSuchProcess, psutil.AccessDenied):  # exited between the listing and the read
            continue
    return total, count


class TreeSampler:
    """Samples ``tree_rss(pid)`` on a thread until ``stop()``; ``step()`` names what the build does now."""

    def __init__(self, pid: int, interval: float = 0.2, measure: Callable[[int], tuple[int, int]] = tree_rss) -> None:
        self.pid, self.interval, self.measure = pid, interval, measure
        self.peak = Peak()
        self.current = 0
        self._step = "start-up"
        self._start = time.monotonic()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "TreeSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._done.set()
        self._thread.join()

    def step(self, line: str) -> None:
        self._step = line

    def _run(self) -> None:
        while not self._done.is_set():
            rss, count = self.measure(self.pid)
            if count:
                self.current = rss
                self.peak.add(rss, time.monotonic() - self._start, self._step, count)
            self._done.wait(self.interval)


def time_maxrss_bytes(text: str) -> Optional[int]:
    """``/usr/bin/time -v``'s "Maximum resident set size (kbytes)" in bytes, or None if absent."""
    found = TIME_MAXRSS.search(text)
    return int(found.group(1)) * 1024 if found else None


def is_step_line(line: str) -> bool:
    """Build log lines that start a step: ``[2/4] bert: building``, ``  bert: export ONNX ... ``, ``  $ cmd``."""
    text = line.strip()
    return bool(text) and (text.startswith("[") or text.endswith("...") or text.startswith("$ "))


def durations(lines: Iterable[str]) -> dict[str, float]:
    """Seconds of every timed step in a build log ("X done in N s", "X took N s"), by step."""
    out: dict[str, float] = {}
    for line in lines:
        found = DURATION.match(line)
        if found:
            out[found.group(1).strip()] = float(found.group(2))
    return out


def verdict(peak_bytes: int, budget: Optional[int], half_machine: int) -> str:
    """"yes" when the peak is within the budget and half the machine; "no (...)" names what it exceeds."""
    over = []
    if budget is not None and peak_bytes > budget:
        over.append(f"> {budget / GB:.2f} GB budget")
    if peak_bytes > half_machine:
        over.append(f"> half the machine, {half_machine / GB:.1f} GB")
    if not over:
        return "yes" if budget is not None else "yes (half the machine; no weights to bound by)"
    return "no (" + ", ".join(over) + ")"


def _gb(value: Optional[float]) -> str:
    return "-" if value is None else f"{value / GB:.2f}"


def table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The markdown table of a run: one row per spec, from the raw records the script writes."""
    head = ("| spec | exit | wall s | load 1 min (start-end) | peak RSS, tree (GB) | /usr/bin/time max RSS, "
            f"one process (GB) | largest model: fp32 weights (GB) | budget {NEED_FACTOR} × w + {NEED_BASE / GB:g} (GB) | "
            "met | peak during | "
            "cache | notes |\n|---|---:|---:|---|---:|---:|---|---:|---|---|---|---|")
    lines = [head]
    for r in rows:
        weights = r.get("weights")
        largest = f"{weights['model']} {_gb(weights['bytes'])}" if weights else "-"
        lines.append(
            f"| {r['spec']} | {r['exit_code']} | {r['wall_s']:.1f} | {r['load_start']:.2f}-{r['load_end']:.2f} | "
            f"{_gb(r['peak_tree_rss_bytes'])} | {_gb(r.get('time_maxrss_bytes'))} | {largest} | "
            f"{_gb(r.get('budget_bytes'))} | {r['met']} | {_cell(r['peak_step'])} | {_cell(r['cache'])} | "
            f"{_cell('; '.join(r.get('notes', ())))} |")
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").strip() or "-"


def cache_entries(folders: Iterable[Any]) -> set[str]:
    """Names of the cached side environments and Python environments (what a cold cache must install)."""
    out: set[str] = set()
    for folder in folders:
        if folder.is_dir():
            out |= {f"{folder.name}/{p.name}" for p in folder.iterdir() if p.is_dir() and p.name != "wheels"
                    and not p.name.startswith(".")}
    return out


def cache_note(before: set[str], after: set[str]) -> str:
    """"warm" when the build installed nothing into the cache, else what it added."""
    added = sorted(after - before)
    return "warm" if not added else "cold: installed " + ", ".join(added)


def merge_runs(earlier: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]]) -> list:
    """``earlier`` with the runs of the specs in ``new`` replaced (in place) or appended."""
    fresh = {r["spec"]: r for r in new}
    out = [fresh.pop(r["spec"], r) for r in earlier]
    return out + [r for r in new if r["spec"] in fresh]
