"""The comparison as text (markdown tables, as the bench reports print) and as JSON (the numbers, for CI)."""
from __future__ import annotations

import json
import pathlib
from typing import Any, Optional

# Kept for the plot, left out of the JSON: every latency, the CloudWatch minutes.
SERIES_KEYS = ("values_ms", "minutes")


def to_json(result: dict[str, Any]) -> str:
    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in SERIES_KEYS}
        return value
    return json.dumps(strip(result), indent=2) + "\n"


def write_json(result: dict[str, Any], path: pathlib.Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(to_json(result))


def text(result: dict[str, Any]) -> str:
    inc, cand = result["incumbent"], result["candidate"]
    pairing, records = result["pairing"], result["records"]
    by_id, by_input = pairing["by_event_id"], pairing["by_input"]
    lines = [f"Endpoint {result['endpoint']}, captures {result['captures']}, {result['window']}",
             f"incumbent {inc}, candidate {cand} ({result['roles_from']})",
             f"records: {inc} {records[inc]}, {cand} {records[cand]}; paired {by_id + by_input} ({by_id} by eventId, "
             f"{by_input} by identical request within {pairing['tolerance_s']:g} s); unpaired: {inc} "
             f"{pairing['unpaired'][inc]}, {cand} {pairing['unpaired'][cand]}", ""]
    lines += _agreement(result["agreement"]) + [""] + _latency(result, inc, cand) + [""] + _errors(result, inc, cand)
    return "\n".join(lines) + "\n"


def _agreement(agreement: dict[str, Any]) -> list[str]:
    head = (f"Agreement: {agreement['compared']} paired answers compared ({agreement['with_error']} pairs with an "
            f"error left out, {agreement['without_answer']} without a captured answer)")
    if not agreement["outputs"]:
        return [head, "no output compared: no pair of answers (a weighted A/B test sends each request to one "
                      "variant; a shadow variant sees the same requests)"]
    lines = [head, "", "| output | kind | compared | same top label | max abs diff | mean cosine | equal | "
                       "shape or presence differs |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for name, o in agreement["outputs"].items():
        lines.append(f"| {name} | {o['kind'] or '-'} | {o['compared']} | {_percent(o['same_top_label_share'])} | "
                     f"{_number(o['max_abs_diff'])} | {_number(o['mean_cosine'])} | {_percent(o['equal_share'])} | "
                     f"{o['shape_or_presence_differs']} |")
    return lines


def _latency(result: dict[str, Any], inc: str, cand: str) -> list[str]:
    latency = result["latency"]
    if latency["source"] is None:
        return ["Latency: none in these captures (SageMaker's records carry no latency); add --cloudwatch for the "
                "variants' ModelLatency"]
    cloudwatch = latency["source"].startswith("CloudWatch")
    head = ["| variant | role | count | p50 ms | p99 ms | 4XX | 5XX |", "|---|---|---:|---:|---:|---:|---:|"] \
        if cloudwatch else ["| variant | role | count | p50 ms | p90 ms | p99 ms | max ms |",
                            "|---|---|---:|---:|---:|---:|---:|"]
    lines = [f"Latency ({latency['source']})", ""] + head
    for variant, role in ((inc, "incumbent"), (cand, "candidate")):
        s = latency["variants"].get(variant)
        if s is None:
            lines.append(f"| {variant} | {role} | 0 | - | - | - | - |")
        elif cloudwatch:
            lines.append(f"| {variant} | {role} | {s['count']} | {_number(s['p50_ms'])} | {_number(s['p99_ms'])} | "
                         f"{s['4xx']} | {s['5xx']} |")
        else:
            lines.append(f"| {variant} | {role} | {s['count']} | {_number(s['p50_ms'])} | {_number(s['p90_ms'])} | "
                         f"{_number(s['p99_ms'])} | {_number(s['max_ms'])} |")
    return lines


def _errors(result: dict[str, Any], inc: str, cand: str) -> list[str]:
    lines = ["Errors in the captures", "", "| variant | records | errors | share | first errors |",
             "|---|---:|---:|---:|---|"]
    for variant in (inc, cand):
        e = result["errors"][variant]
        lines.append(f"| {variant} | {e['records']} | {e['errors']} | {_percent(e['share'])} | "
                     f"{'; '.join(e['examples']) or '-'} |")
    return lines


def _percent(share: Optional[float]) -> str:
    return "-" if share is None else f"{100 * share:.1f} %"


def _number(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.4g}"
