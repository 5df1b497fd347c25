"""Small statistics shared by the runtime and load benchmarks (no numpy needed)."""
from __future__ import annotations

import math
import os
import statistics
from typing import Optional, Sequence


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile, q in [0, 100] (numpy's default method)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else math.nan


def speedups(baseline_blocks: Sequence[float], blocks: Sequence[float]) -> tuple[float, float]:
    """(ratio of the medians, median of the per-repeat ratios) of two interleaved series of block means.

    The paired figure compares each repeat's blocks, which ran back to back, so load that lasts
    longer than a repeat cancels out.
    """
    return (ratio(median(baseline_blocks), median(blocks)),
            median([ratio(b, x) for b, x in zip(baseline_blocks, blocks)]))


def quieter_half(loads: Sequence[float]) -> list[int]:
    """Indices (in run order) of the half of the repeats with the lowest recorded load.

    ceil(n / 2) of them, so one repeat is its own quieter half; equal loads go to the earlier
    repeat. A repeat's load is the 1-minute load average recorded with its timings.
    """
    keep = (len(loads) + 1) // 2
    # An unknown load (nan: no getloadavg) counts as the loudest.
    return sorted(sorted(range(len(loads)), key=lambda i: (loads[i] if loads[i] == loads[i] else math.inf, i))[:keep])


def paired_and_quieter(ratios: Sequence[float], loads: Sequence[float]) -> tuple[float, float]:
    """(median of the per-repeat ratios, their median over the quieter half of the repeats).

    ``ratios[i]`` compares two configurations measured back to back in repeat ``i``, ``loads[i]``
    is that repeat's load. The paired median cancels load lasting longer than a repeat; the
    quieter half drops the repeats that shared the machine most. Two figures that agree say the
    load did not decide the result.
    """
    if len(ratios) != len(loads):
        raise ValueError(f"{len(ratios)} ratios but {len(loads)} loads")
    return median(ratios), median([ratios[i] for i in quieter_half(loads)])


def load_average() -> Optional[list[float]]:
    """The machine's 1/5/15-minute load averages, recorded next to every timing (None where unavailable).

    Linux's figures: runnable or uninterruptible tasks, exponentially averaged, updated every 5 s
    (proc_loadavg(5), https://man7.org/linux/man-pages/man5/proc_loadavg.5.html). They include
    the benchmark's own threads, so they rank repeats by the load around them, not measure it alone.
    """
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def loudest(loads: Sequence[float]) -> float:
    """A repeat's load: the highest of the loads recorded with its timings (nan ones skipped)."""
    return max((x for x in loads if x == x), default=math.nan)


def load_1min() -> float:
    """The 1-minute load average now (nan where unavailable): the figure recorded with each timing."""
    loads = load_average()
    return loads[0] if loads else math.nan


def ratio(baseline: float, value: float) -> float:
    """How many times faster ``value`` is than ``baseline`` (both durations)."""
    return baseline / value if value > 0 else math.nan
