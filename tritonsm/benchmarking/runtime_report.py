"""The runtime comparison as a markdown table (like the reference articles' tables) and a PNG."""
from __future__ import annotations

import pathlib


def markdown(result: dict) -> str:
    m, s = result["machine"], result["settings"]
    serving = result.get("serving", {})
    ort = (f"onnxruntime {serving['onnxruntime']} (Triton {serving['triton_version']}'s release; "
           f"-build-ort: this machine's {m['onnxruntime']})" if serving else f"onnxruntime {m['onnxruntime']}")
    lines = [
        f"CPU: {m['cpu']} ({m['logical_cores']} logical cores); torch {m['torch']}, {ort}; "
        f"{s['threads']} threads for every engine (torch intra-op {s['threads']}, inter-op 1; ONNX Runtime "
        f"intra-op {s['threads']}, inter-op 1, sequential, all graph optimizations); median of {s['repeats']} "
        f"interleaved repeats after {s['warmup']} warm-up calls; load average {m.get('load_average_start')} "
        f"at start, {m.get('load_average_end')} at end.",
        "",
        "| model | engine | batch | median ms | p50 ms | p99 ms | samples/s | speedup vs eager | paired speedup "
        "| quieter-half speedup | load (1 min) | peak RSS MiB |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for model in result["models"]:
        for c in model["cells"]:
            lines.append(f"| {c['model']} ({c['recipe']}) | {c['engine']} | {c['batch']} | {c['median_ms']:.1f} | "
                         f"{c['p50_ms']:.1f} | {c['p99_ms']:.1f} | {c['throughput_per_s']:.1f} | "
                         f"{c['speedup']:.2f}x | {c['paired_speedup']:.2f}x | {_x(c.get('quieter_half_speedup'))} | "
                         f"{_span(c.get('block_loads'))} | {c['peak_rss_mib']:.0f} |")
    lines.append("")
    for model in result["models"]:
        opt = model["optimize"]
        fused = ", ".join(f"{k} {v}" for k, v in opt["fused_ops"].items()) or "none"
        rejected = "".join(f"; {label} rejected: {why}" for label, why in model.get("rejected", {}).items())
        lines.append(f"- {model['name']}: ships the {model.get('shipped_graph', 'optimized graph')}{rejected}; fusions "
                     f"tried: fuser {opt['fuser']}, fused ops: {fused}; nodes {opt['nodes_before']} -> "
                     f"{opt['nodes_after']}; fp32 vs PyTorch max abs error "
                     f"{model['parity_fp32_vs_pytorch']['max_abs_error']:.1e}.")
        for label, agree in model["agreement"].items():
            lines.append(f"  - {label} vs eager over {agree['rows']} rows: top-1 agreement "
                         f"{agree['top1_agreement']:.1%}, max abs error {agree['max_abs_error']:.3g}, "
                         f"min cosine similarity {agree['min_cosine_similarity']:.4f}.")
    if result.get("targets"):
        lines += ["", "| target (batch 1) | wanted | ratio of medians | paired | quieter half | met (both) |",
                  "|---|---:|---:|---:|---:|---|"]
        for t in result["targets"]:
            lines.append(f"| {t['recipe']} {t['engine']} | >= {t['target']}x | {t['speedup']:.2f}x | "
                         f"{t['paired_speedup']:.2f}x | {_x(t.get('quieter_half_speedup'))} | "
                         f"{'yes' if t['met'] else 'NO'} |")
    return "\n".join(lines) + "\n"


def _x(value) -> str:
    """A ratio, or '-' where the run predates it (or it is nan)."""
    return "-" if value is None or value != value else f"{value:.2f}x"


def _span(loads) -> str:
    """The lowest-highest 1-minute load average recorded with a cell's blocks."""
    known = [x for x in loads or () if x == x]
    return f"{min(known):.2f}-{max(known):.2f}" if known else "-"


def plot(result: dict, target: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # no display on build machines
    import matplotlib.pyplot as plt

    models = result["models"]
    fig, axes = plt.subplots(1, len(models), figsize=(5.5 * len(models), 4.8), squeeze=False)
    for ax, model in zip(axes[0], models):
        engines = list(dict.fromkeys(c["engine"] for c in model["cells"]))
        batches = sorted({c["batch"] for c in model["cells"]})
        width = 0.8 / len(engines)
        for i, engine in enumerate(engines):
            values = [next(c["throughput_per_s"] for c in model["cells"] if c["engine"] == engine and c["batch"] == b)
                      for b in batches]
            bars = ax.bar([x + i * width for x in range(len(batches))], values, width, label=engine)
            for bar, b in zip(bars, batches):
                speed = next(c["speedup"] for c in model["cells"] if c["engine"] == engine and c["batch"] == b)
                ax.annotate(f"{speed:.1f}x", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                            ha="center", va="bottom", fontsize=7)
        ax.set_xticks([x + width * (len(engines) - 1) / 2 for x in range(len(batches))],
                      [f"batch {b}" for b in batches])
        ax.set_ylabel("samples / s (higher is better)")
        ax.set_title(f"{model['name']} ({model['recipe']})")
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2, frameon=False)
    m = result["machine"]
    fig.suptitle(f"Throughput on {m['cpu']}, {result['settings']['threads']} threads; labels: speedup vs eager PyTorch",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(target, dpi=110)
    plt.close(fig)
