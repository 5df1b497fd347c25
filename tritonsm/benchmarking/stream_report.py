"""`tritonsm bench stream`'s report: the result as JSON, the table, and the plot of TTFT and output tokens/s."""
from __future__ import annotations

import dataclasses
import json
import math
import pathlib
from typing import Any

from tritonsm.benchmarking.stream_load import Level


def result(what: dict[str, Any], levels: list[Level]) -> dict[str, Any]:
    """``what`` was measured (endpoint, prompts, parameters, command) and its levels, ready for JSON: a figure no
    request gave (every request of a level failed) is null, not NaN, which JSON does not have."""
    return {**what, "levels": [_no_nan(dataclasses.asdict(level)) for level in levels]}


def _no_nan(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _no_nan(item) for key, item in value.items()}
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def write_json(data: dict[str, Any], target: pathlib.Path) -> None:
    target.write_text(json.dumps(data, indent=2, allow_nan=False) + "\n")


def markdown(data: dict[str, Any]) -> str:
    lines = [f"Endpoint {data['endpoint']} ({data['target']}): {data['prompts']} prompt(s), max_new_tokens "
             f"{data['max_new_tokens']}", "",
             "| concurrency | requests | errors | req/s | output tok/s | tokens/request | TTFT p50 / p90 / p99 ms | "
             "ITL p50 / p90 / p99 ms | TPOT p50 ms | E2EL p50 / p99 ms |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for level in data["levels"]:
        done = level["requests"] - level["errors"]
        per_request = level["output_tokens"] / done if done else None
        lines.append(
            f"| {level['concurrency']} | {level['requests']} | {level['errors']} | {level['requests_per_s']:.2f} | "
            f"{level['output_tokens_per_s']:.1f} | {_figure(per_request)} | {_three(level['ttft_ms'])} | "
            f"{_three(level['itl_ms'])} | {_figure(level['tpot_ms']['p50'])} | "
            f"{_figure(level['e2el_ms']['p50'])} / {_figure(level['e2el_ms']['p99'])} |")
    errors = [f"- concurrency {level['concurrency']}: {level['first_error']}" for level in data["levels"]
              if level["first_error"]]
    if errors:
        lines += ["", "First error of each level with errors:", *errors]
    return "\n".join(lines) + "\n"


def _three(figures: dict[str, Any]) -> str:
    return " / ".join(_figure(figures[key]) for key in ("p50", "p90", "p99"))


def _figure(value: Any) -> str:
    return "-" if value is None else f"{value:.1f}"


def plot(data: dict[str, Any], target: pathlib.Path) -> None:
    """Writes ``target`` (PNG): left, TTFT p50 and p99 by concurrency; right, output tokens/s (all streams)."""
    import matplotlib

    matplotlib.use("Agg")  # no display on build machines
    import matplotlib.pyplot as plt

    levels = data["levels"]
    x = [level["concurrency"] for level in levels]
    fig, (ttft, tokens) = plt.subplots(1, 2, figsize=(11, 4.2))
    for key, style in (("p50", "-"), ("p99", "--")):
        ttft.plot(x, [level["ttft_ms"][key] for level in levels], marker="o", linestyle=style, label=f"TTFT {key}")
    ttft.set(xlabel="concurrency", ylabel="ms", title="Time to first token")
    ttft.legend(loc="upper left", fontsize=8)
    tokens.plot(x, [level["output_tokens_per_s"] for level in levels], marker="o")
    tokens.set(xlabel="concurrency", ylabel="output tokens/s", title="Output tokens per second (all streams)")
    for axis in (ttft, tokens):
        axis.set_xscale("log")
        axis.set_xticks(x)
        axis.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
    fig.suptitle(f"{data['endpoint']}: max_new_tokens {data['max_new_tokens']}")
    fig.tight_layout()
    fig.savefig(target, dpi=110)
    plt.close(fig)
