"""The load test as a picture: throughput and p99 by concurrency, what Triton did (batch sizes, queue), and with a
cost section what each configuration costs per million inferences against its p99 (load_cost_plot)."""
from __future__ import annotations

import pathlib


def plot(result: dict, target: pathlib.Path) -> None:
    """Writes ``target`` (PNG): left, req/s (solid) and p99 ms (dashed, right axis) by concurrency per
    configuration; middle, the average batch Triton formed (solid) and the queue share (dashed, right axis); right,
    when the result has a ``cost`` section (load_cost), cost per million inferences against p99."""
    import matplotlib

    matplotlib.use("Agg")  # no display on build machines
    import matplotlib.pyplot as plt

    cost = result.get("cost")
    fig, axes = plt.subplots(1, 3 if cost else 2, figsize=(18, 6.5) if cost else (12, 4.5))
    load, triton = axes[0], axes[1]
    latency, queue = load.twinx(), triton.twinx()
    for name, config in result["configs"].items():
        phases = config["phases"]
        x = [p["concurrency"] for p in phases]
        line, = load.plot(x, [p["rps"] for p in phases], marker="o", label=name)
        latency.plot(x, [p["p99_ms"] for p in phases], linestyle="--", color=line.get_color())
        with_triton = [p for p in phases if p.get("triton")]
        if with_triton:
            tx = [p["concurrency"] for p in with_triton]
            triton.plot(tx, [p["triton"]["average_batch"] for p in with_triton], marker="o", color=line.get_color(),
                        label=name)
            queue.plot(tx, [100 * p["triton"]["queue_share"] for p in with_triton], linestyle="--",
                       color=line.get_color())
    load.set(xscale="log", xlabel="concurrency (users)", ylabel="req/s (solid)",
             title="Throughput and p99 latency (dashed)")
    latency.set_ylabel("p99 ms (dashed)")
    triton.set(xscale="log", xlabel="concurrency (users)", ylabel="average batch formed (solid)",
               title="Triton: dynamic batching and queue share (dashed)")
    queue.set_ylabel("queue, % of request time (dashed)")
    for axis in (load, triton):
        axis.set_xticks(sorted({p["concurrency"] for c in result["configs"].values() for p in c["phases"]}))
        axis.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
        axis.legend(loc="upper left", fontsize=8)
    if cost:
        from tritonsm.benchmarking import load_cost_plot

        load_cost_plot.draw(axes[2], cost)
    fig.tight_layout()
    fig.savefig(target, dpi=110)
    plt.close(fig)
