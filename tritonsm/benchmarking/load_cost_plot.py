"""load.png's cost panel: cost per million inferences against p99, one point per configuration and region priced.

A stand-in point is drawn hollow and its label says so; a configuration without a figure (unknown price, nothing
within the threshold) gets no point: the panel prints why instead, so no value is ever drawn for it.
"""
from __future__ import annotations

import textwrap
from typing import Any

from tritonsm.benchmarking.load_cost import assumes, stand_in_label

TITLE = "Cost per million inferences against p99"


def point_label(point: dict[str, Any]) -> str:
    stand_in = stand_in_label(point)
    return f"{point['config']}, {point['region']}" + (f" ({stand_in})" if stand_in else "")


def notes(cost: dict[str, Any]) -> list[str]:
    """What the panel prints under its points: the prices the figures assume, then why each missing figure is
    missing (the points that miss it for one reason named together, so a long reason is printed once)."""
    priced = [p for p in cost["points"] if p["usd_per_million"] is not None]
    lines = list(dict.fromkeys(f"assumes {assumes(p)}" for p in priced))
    missing: dict[str, list[str]] = {}
    for p in cost["points"]:
        if p["usd_per_million"] is None:
            missing.setdefault(p["unknown"], []).append(f"{p['config']} in {p['region']}")
    lines += [f"no figure for {', '.join(where)}: {reason}" for reason, where in missing.items()]
    return lines + ([cost["note"]] if cost["note"] else [])


def draw(axis: Any, cost: dict[str, Any]) -> None:
    """Draws the panel on a matplotlib axis."""
    priced = [p for p in cost["points"] if p["usd_per_million"] is not None]
    # One colour per configuration, in the order the other panels give them theirs (C0, C1, ...).
    colours = {name: f"C{i}" for i, name in enumerate(dict.fromkeys(p["config"] for p in cost["points"]))}
    for point in priced:
        x, y = point["p99_ms"], point["usd_per_million"]
        dot, = axis.plot([x], [y], marker="o", linestyle="none", color=colours[point["config"]])
        if point["stand_in"]:
            dot.set_markerfacecolor("none")  # hollow: not the endpoint's own cost
        axis.annotate(point_label(point), (x, y), textcoords="offset points", xytext=(5, 5), fontsize=7)
    stand_ins = any(p["stand_in"] for p in priced)
    axis.set(xlabel="p99 ms at the highest req/s within the threshold", ylabel="$ per million inferences",
             title=TITLE + ("\n(hollow: stand-in, not the endpoint's cost)" if stand_ins else ""))
    if priced:
        # From zero: the distance between two configurations' costs is what the panel is read for.
        axis.set_xlim(left=0, right=max(p["p99_ms"] for p in priced) * 1.3)
        axis.set_ylim(bottom=0, top=max(p["usd_per_million"] for p in priced) * 1.3)
    else:
        axis.set(xticks=[], yticks=[])
    text = "\n".join(textwrap.fill(line, 90) for line in notes(cost))
    if text:  # under the axis, where it cannot hide a point
        axis.text(0, -0.18, text, transform=axis.transAxes, fontsize=6.5, va="top", ha="left")
