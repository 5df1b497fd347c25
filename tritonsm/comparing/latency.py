"""Each variant's latency and errors over the window.

From the captures where they carry it (the local server's ``tritonsmLatencyMs``); SageMaker's records carry no
latency, so for a deployed endpoint ``--cloudwatch`` reads ``ModelLatency`` instead (cloudwatch.py).
"""
from __future__ import annotations

from typing import Any, Optional

from tritonsm.benchmarking.stats import percentile
from tritonsm.comparing.records import Record

QUANTILES = (50, 90, 99)
MAX_EXAMPLES = 3


def captured_latency(records: list[Record]) -> Optional[dict[str, Any]]:
    """count, p50/p90/p99/max in ms of the records that carry a latency; None when none does."""
    values = [r.latency_ms for r in records if r.latency_ms is not None]
    if not values:
        return None
    out: dict[str, Any] = {"count": len(values)}
    out.update({f"p{q}_ms": percentile(values, q) for q in QUANTILES})
    out["max_ms"] = max(values)
    out["values_ms"] = values  # for the plot; report.py leaves it out of the JSON
    return out


def errors(records: list[Record]) -> dict[str, Any]:
    failures = [f for f in (r.failure() for r in records) if f is not None]
    return {"records": len(records), "errors": len(failures),
            "share": len(failures) / len(records) if records else None,
            "examples": list(dict.fromkeys(failures))[:MAX_EXAMPLES]}
