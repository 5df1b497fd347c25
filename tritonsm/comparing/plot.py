"""The comparison as a picture (PNG), in the bench reports' style (tritonsm/benchmarking/load_plot.py): left, the
variants' latency (each request's, as a cumulative distribution, or CloudWatch's minutes); right, the agreement."""
from __future__ import annotations

import pathlib
from typing import Any


def plot(result: dict[str, Any], target: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # no display on build machines
    import matplotlib.pyplot as plt

    fig, (latency, agreement) = plt.subplots(1, 2, figsize=(12, 4.5), gridspec_kw={"width_ratios": [3, 2]})
    roles = ((result["incumbent"], "incumbent"), (result["candidate"], "candidate"))
    source = result["latency"]["source"]
    if source is None:
        latency.text(0.5, 0.5, "no latency in these captures\n(add --cloudwatch)", ha="center", va="center")
        latency.set_axis_off()
    elif source.startswith("CloudWatch"):
        _minutes(latency, result, roles)
    else:
        _distribution(latency, result, roles)
    _agreement(agreement, result)
    fig.suptitle(f"{result['endpoint']}: {result['incumbent']} (incumbent) vs {result['candidate']} (candidate), "
                 f"{result['window']}", fontsize=10)
    fig.tight_layout()
    target.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(target, dpi=110)
    plt.close(fig)


def _distribution(axis: Any, result: dict[str, Any], roles: tuple[tuple[str, str], ...]) -> None:
    for variant, role in roles:
        summary = result["latency"]["variants"].get(variant)
        if not summary:
            continue
        values = sorted(summary["values_ms"])
        shares = [(i + 1) / len(values) for i in range(len(values))]
        line, = axis.step(values, shares, where="post", label=f"{variant} ({role}), n={len(values)}")
        axis.axvline(summary["p99_ms"], linestyle=":", color=line.get_color())
    axis.set(xscale="log", xlabel="latency ms (dotted: p99)", ylabel="share of requests at or below",
             title="Latency per request (cumulative)")
    axis.grid(True, alpha=0.3)
    axis.legend(loc="lower right", fontsize=8)


def _minutes(axis: Any, result: dict[str, Any], roles: tuple[tuple[str, str], ...]) -> None:
    for variant, role in roles:
        minutes = result["latency"]["variants"][variant]["minutes"]
        if not minutes:
            continue
        times = [m[0] for m in minutes]
        line, = axis.plot(times, [m[1] for m in minutes], marker=".", label=f"{variant} ({role}) p50")
        axis.plot(times, [m[2] for m in minutes], linestyle="--", color=line.get_color(), label=f"{variant} p99")
    axis.set(xlabel="minute (UTC)", ylabel="ModelLatency ms",
             title="CloudWatch ModelLatency: p50 (solid), p99 (dashed)")
    axis.grid(True, alpha=0.3)
    axis.tick_params(axis="x", labelrotation=30, labelsize=7)
    if axis.get_legend_handles_labels()[0]:
        axis.legend(loc="upper left", fontsize=8)


def _agreement(axis: Any, result: dict[str, Any]) -> None:
    outputs = result["agreement"]["outputs"]
    # Numeric outputs: same top label and cosine (exactly equal floats say little); text outputs: equal answers.
    bars = [(f"{name}\n{label}", 100 * value) for name, o in outputs.items()
            for label, value in ((("equal", o["equal_share"]),) if o["kind"].startswith("BYTES") else
                                 (("same top", o["same_top_label_share"]), ("cosine", o["mean_cosine"])))
            if value is not None]
    if not bars:
        axis.text(0.5, 0.5, "no paired answers to compare", ha="center", va="center")
        axis.set_axis_off()
        return
    drawn = axis.barh([b[0] for b in bars], [b[1] for b in bars], color="tab:green")
    axis.bar_label(drawn, fmt="%.1f", fontsize=8)
    axis.set(xlim=(0, 112), xlabel="% (cosine: mean x 100)",
             title=f"Agreement on {result['agreement']['compared']} paired requests")
    axis.invert_yaxis()
    axis.tick_params(axis="y", labelsize=8)
