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


def load_average() -> Optional[list[float]]:
    """The machine's 1/5/15-minute load averages, recorded next to every timing (None where unavailable)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def ratio(baseline: float, value: float) -> float:
    """How many times faster ``value`` is than ``baseline`` (both durations)."""
    return baseline / value if value > 0 else math.nan
