"""Prometheus metrics of a generating model (issue #59), through the Python backend's custom metrics API.

Triton serves them on its metrics port (``/metrics``) beside its own ``nv_*`` series, labelled by model and version as
those are; SageMaker's detailed observability publishes them to CloudWatch, where the endpoint's dashboard and its
time-to-first-token alarm query them with PromQL (triton_constructs/generation_promql.py names the same series).

- ``tritonsm_generation_time_to_first_token_seconds``: request arrival (the model's execute) to its first generated
  token, waiting for a place in the running batch and the prompt's prefill included (histogram).
- ``tritonsm_generation_inter_token_latency_seconds``: between one generated token of a request and the next
  (histogram).
- ``tritonsm_generation_output_tokens_total``, ``tritonsm_generation_prompt_tokens_total`` (counters).
- ``tritonsm_generation_requests_total{finish_reason}``: stop, length, cancelled, error (the engine failed) or
  refused (a client mistake, answered 400) (counter).

``pb_utils.MetricFamily`` exists from python_backend r23.05; its HISTOGRAM kind from r24.09 (src/pb_stub.cc). Before
r24.09 each histogram is two counters, ``<name>_sum`` and ``<name>_count``: the series a histogram also has, so an
average over them reads the same either way. Without MetricFamily there are no metrics and nothing fails.

A metric call is an IPC round trip to the Triton process, and ``Metric`` keeps the value it sends in the object itself
(src/metric.cc: ``operation_value_``), so two threads must not use one at once: the scheduler thread only notes times
and queues each finished request; one thread of its own here makes every metric call.
"""
from __future__ import annotations

import queue
import threading
import time
from typing import Any, Callable, Optional

PREFIX = "tritonsm_generation_"
TIME_TO_FIRST_TOKEN = PREFIX + "time_to_first_token_seconds"
INTER_TOKEN_LATENCY = PREFIX + "inter_token_latency_seconds"
OUTPUT_TOKENS = PREFIX + "output_tokens_total"
PROMPT_TOKENS = PREFIX + "prompt_tokens_total"
REQUESTS = PREFIX + "requests_total"
# Seconds; from a small model's prefill on a GPU to a long prompt queued behind a full batch.
TTFT_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0]
ITL_BUCKETS = [0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56]
FINISH_REASONS = ("stop", "length", "cancelled", "error", "refused")
ERROR, REFUSED = "error", "refused"


class _Timings:
    """One request's clock: arrival, first token, the gaps between tokens (noted on the scheduler thread)."""

    def __init__(self) -> None:
        self.arrival = time.monotonic()
        self.first: Optional[float] = None
        self.last = 0.0
        self.gaps: list[float] = []

    def token(self, _token: int) -> None:
        now = time.monotonic()
        if self.first is None:
            self.first = now
        else:
            self.gaps.append(now - self.last)
        self.last = now


class _Timed:
    """A histogram, or its two counters where the release has no HISTOGRAM kind."""

    def __init__(self, pb_utils: Any, name: str, description: str, buckets: list[float],
                 labels: dict[str, str]) -> None:
        family = pb_utils.MetricFamily
        self.histogram: Any = None
        self.sum: Any = None
        self.count: Any = None
        # Each family is kept for as long as its metrics: the backend refuses a metric whose family was collected
        # ("Invalid metric operation as the corresponding 'MetricFamily' has been deleted", seen on Triton 24.10).
        if hasattr(family, "HISTOGRAM"):
            self.families = [family(name=name, description=description, kind=family.HISTOGRAM)]
            self.histogram = self.families[0].Metric(labels=labels, buckets=buckets)
        else:
            self.families = [family(name=name + "_sum", description=description + " (sum)", kind=family.COUNTER),
                             family(name=name + "_count", description=description + " (count)", kind=family.COUNTER)]
            self.sum, self.count = (f.Metric(labels=labels) for f in self.families)

    def observe(self, seconds: float) -> None:
        if self.histogram is not None:
            self.histogram.observe(seconds)
        else:
            self.sum.increment(seconds)
            self.count.increment(1)


class GenerationMetrics:
    """The model's metric families, and the thread that records finished requests into them.

    Args:
        pb_utils: ``triton_python_backend_utils``.
        labels: ``{"model": ..., "version": ...}`` (as Triton labels its own series).
        log: Where a failing metric call is reported (once); metrics never fail a request.
    """

    def __init__(self, pb_utils: Any, labels: dict[str, str], log: Callable[[str], None]) -> None:
        family = pb_utils.MetricFamily
        self.ttft = _Timed(pb_utils, TIME_TO_FIRST_TOKEN, "Request arrival to its first generated token, seconds",
                           TTFT_BUCKETS, labels)
        self.itl = _Timed(pb_utils, INTER_TOKEN_LATENCY, "Between two generated tokens of a request, seconds",
                          ITL_BUCKETS, labels)
        self.families = [family(name=OUTPUT_TOKENS, description="Tokens generated", kind=family.COUNTER),
                         family(name=PROMPT_TOKENS, description="Prompt tokens read", kind=family.COUNTER),
                         family(name=REQUESTS, description="Generation requests finished, by finish reason",
                                kind=family.COUNTER)]  # kept beside their metrics, as in _Timed
        self.output, self.prompt = (f.Metric(labels=labels) for f in self.families[:2])
        self.requests = {r: self.families[2].Metric(labels={**labels, "finish_reason": r}) for r in FINISH_REASONS}
        self.log = log
        self.failed = False
        self.pending: queue.SimpleQueue[Optional[tuple[str, dict[str, Any], Optional[_Timings]]]] = \
            queue.SimpleQueue()
        self.thread = threading.Thread(target=self._record_all, name="generation-metrics", daemon=True)
        self.thread.start()

    @classmethod
    def create(cls, pb_utils: Any, labels: dict[str, str],
               log: Callable[[str], None]) -> Optional["GenerationMetrics"]:
        """The metrics, or None where the backend has no custom metrics API (python_backend before r23.05) or Triton
        refuses them (metrics off: ``--allow-metrics=false``)."""
        if pb_utils is None or not hasattr(pb_utils, "MetricFamily"):
            return None
        try:
            return cls(pb_utils, labels, log)
        except Exception as exc:  # noqa: BLE001 - without metrics the model still serves
            log(f"generation metrics off: {type(exc).__name__}: {exc}")
            return None

    @staticmethod
    def timings() -> _Timings:
        """A new request's clock; pass its ``token`` as the engine's on_token."""
        return _Timings()

    def finished(self, reason: Optional[str], usage: dict[str, Any], timings: _Timings) -> None:
        """The engine's on_done for ``timings``' request (reason None: the engine failed on it)."""
        self.pending.put((reason or ERROR, usage, timings))

    def refused(self) -> None:
        """A request answered 400 before it reached the engine."""
        self.pending.put((REFUSED, {}, None))

    def close(self) -> None:
        """Record what is queued, then stop the thread."""
        self.pending.put(None)
        self.thread.join(timeout=5)

    def _record_all(self) -> None:
        while (item := self.pending.get()) is not None:
            try:
                self._record(*item)
            except Exception as exc:  # noqa: BLE001 - a metric call that fails loses a data point, not a request
                if not self.failed:
                    self.failed = True
                    self.log(f"a generation metric call failed (reported once): {type(exc).__name__}: {exc}")

    def _record(self, reason: str, usage: dict[str, Any], timings: Optional[_Timings]) -> None:
        self.requests.get(reason, self.requests[ERROR]).increment(1)
        if usage.get("prompt_tokens"):
            self.prompt.increment(usage["prompt_tokens"])
        if usage.get("completion_tokens"):
            self.output.increment(usage["completion_tokens"])
        if timings is None or timings.first is None:
            return  # refused, or ended before its first token: no time to a first token to report
        self.ttft.observe(timings.first - timings.arrival)
        for gap in timings.gaps:
            self.itl.observe(gap)
