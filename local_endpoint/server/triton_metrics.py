"""Triton's Prometheus metrics, read and summarised per model: what the queue, the compute and dynamic
batching did between two readings.

Names and meanings: Triton's docs/user_guide/metrics.md (r25.09): counters ``nv_inference_request_success``,
``nv_inference_count`` (inferences, a batch of 4 counts 4), ``nv_inference_exec_count`` (executions, a batch
counts 1), cumulative microseconds ``nv_inference_request_duration_us``, ``nv_inference_queue_duration_us``,
``nv_inference_compute_infer_duration_us``; gauge ``nv_inference_pending_request_count``. Each carries
``model`` and ``version`` labels; versions are summed here.
"""
from __future__ import annotations

import dataclasses
import re
import urllib.request
from typing import Mapping

_SAMPLE = re.compile(r'^(?P<name>nv_inference_[a-z_]+)\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)$')
_MODEL = re.compile(r'model="(?P<model>[^"]+)"')
_FIELDS = {
    "nv_inference_request_success": "requests",
    "nv_inference_count": "inferences",
    "nv_inference_exec_count": "executions",
    "nv_inference_request_duration_us": "request_us",
    "nv_inference_queue_duration_us": "queue_us",
    "nv_inference_compute_infer_duration_us": "compute_us",
    "nv_inference_pending_request_count": "pending",
}
_SCRAPE_TIMEOUT_S = 10


@dataclasses.dataclass(frozen=True)
class ModelCounters:
    """One model's counters at one reading (or the difference of two)."""

    requests: float = 0.0
    inferences: float = 0.0
    executions: float = 0.0
    request_us: float = 0.0
    queue_us: float = 0.0
    compute_us: float = 0.0
    pending: float = 0.0

    def minus(self, before: "ModelCounters") -> "ModelCounters":
        """What happened since ``before`` (the pending gauge is the later reading's)."""
        return ModelCounters(*(getattr(self, f.name) - getattr(before, f.name) for f in dataclasses.fields(self)
                               if f.name != "pending"), pending=self.pending)

    @property
    def average_batch(self) -> float:
        """Inferences per execution: 1.0 when dynamic batching formed no batches."""
        return self.inferences / self.executions if self.executions else 0.0

    @property
    def queue_share(self) -> float:
        """The share of the server's request time spent waiting in the queue (0..1)."""
        return self.queue_us / self.request_us if self.request_us else 0.0

    def per_request_ms(self, micros: float) -> float:
        return micros / self.requests / 1000 if self.requests else 0.0


def parse(text: str) -> dict[str, ModelCounters]:
    """The per-model counters of a ``/metrics`` page."""
    values: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        sample = _SAMPLE.match(line.strip())
        field = _FIELDS.get(sample.group("name")) if sample else None
        model = _MODEL.search(sample.group("labels")) if sample and field else None
        if sample is None or field is None or model is None:
            continue
        per_model = values.setdefault(model.group("model"), {})
        per_model[field] = per_model.get(field, 0.0) + float(sample.group("value"))
    return {model: ModelCounters(**fields) for model, fields in sorted(values.items())}


def scrape(url: str) -> dict[str, ModelCounters]:
    """Reads ``url`` (``http://127.0.0.1:<metrics port>/metrics``)."""
    with urllib.request.urlopen(url, timeout=_SCRAPE_TIMEOUT_S) as answer:  # noqa: S310 (a local server)
        return parse(answer.read().decode("utf-8"))


def since(after: dict[str, ModelCounters], before: dict[str, ModelCounters]) -> dict[str, ModelCounters]:
    """Each model's counters between two readings (models with no request in between left out)."""
    out = {model: counters.minus(before.get(model, ModelCounters())) for model, counters in after.items()}
    return {model: counters for model, counters in out.items() if counters.requests}


def figures(counters: ModelCounters) -> dict[str, float]:
    """What a person tuning dynamic batching reads: average batch, queue share, queue and compute ms per request."""
    return {"average_batch": round(counters.average_batch, 2), "queue_share": round(counters.queue_share, 3),
            "queue_ms": round(counters.per_request_ms(counters.queue_us), 2),
            "compute_ms": round(counters.per_request_ms(counters.compute_us), 2)}


def meaning(figures: Mapping[str, float]) -> str:
    """The figures in words a person tuning dynamic batching and instance counts can act on."""
    batch = figures["average_batch"]
    batching = (f"dynamic batching formed batches of {batch:.1f} on average" if batch > 1.05
                else "no batches formed (one request per execution)")
    return (f"{batching}; {figures['queue_share']:.0%} of the server's request time was queue "
            f"({figures['queue_ms']:.1f} ms per request), compute {figures['compute_ms']:.1f} ms per request")


def explain(model: str, counters: ModelCounters) -> str:
    """One sentence on one model between two readings."""
    return f"{model}: {int(counters.requests)} requests, {meaning(figures(counters))}"
