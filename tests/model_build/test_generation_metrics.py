"""The generating model's Prometheus metrics (model_build/python_models/generation_metrics.py) against a stand-in of
the Python backend's custom metrics API: what a request records, the counters a release without histograms gets,
and no metrics (and no failure) where the API is missing or Triton refuses it."""
from __future__ import annotations

import pathlib
import sys
import types
from typing import Any, Optional

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "model_build" / "python_models"))
import generation_metrics as gm  # noqa: E402

LABELS = {"model": "writer", "version": "1"}


class _Metric:
    def __init__(self, family: "_Family", labels: dict[str, str], buckets: Optional[list[float]]) -> None:
        self.family, self.labels, self.buckets = family, labels, buckets
        self.observed: list[float] = []
        self.total = 0.0

    def increment(self, value: float) -> None:
        self.total += value

    def observe(self, value: float) -> None:
        self.observed.append(value)


class _Family:
    COUNTER, GAUGE = "counter", "gauge"
    made: dict[str, "_Family"] = {}

    def __init__(self, name: str, description: str, kind: str) -> None:
        self.name, self.kind = name, kind
        self.metrics: list[_Metric] = []
        type(self).made[name] = self

    def Metric(self, labels: Optional[dict[str, str]] = None,  # noqa: N802 - pb_utils' own name
               buckets: Optional[list[float]] = None) -> _Metric:
        metric = _Metric(self, labels or {}, buckets)
        self.metrics.append(metric)
        return metric


class _HistogramFamily(_Family):
    HISTOGRAM = "histogram"


def _backend(family: Any) -> Any:
    family.made = {}
    return types.SimpleNamespace(MetricFamily=family)


def _request(metrics: gm.GenerationMetrics, tokens: int, reason: Optional[str] = "length") -> None:
    timings = metrics.timings()
    for token in range(tokens):
        timings.token(token)
    metrics.finished(reason, {"prompt_tokens": 5, "completion_tokens": tokens}, timings)


def test_each_request_records_its_first_token_its_gaps_tokens_and_finish_reason():
    backend = _backend(_HistogramFamily)
    metrics = gm.GenerationMetrics.create(backend, LABELS, print)
    assert metrics is not None
    _request(metrics, 4)
    _request(metrics, 3, "stop")
    _request(metrics, 0, None)  # the engine failed before a first token: counted, no time to a first token
    metrics.refused()
    metrics.close()
    made = _HistogramFamily.made
    [ttft] = made[gm.TIME_TO_FIRST_TOKEN].metrics
    assert made[gm.TIME_TO_FIRST_TOKEN].kind == "histogram" and ttft.labels == LABELS
    assert len(ttft.observed) == 2 and ttft.buckets == gm.TTFT_BUCKETS
    assert len(made[gm.INTER_TOKEN_LATENCY].metrics[0].observed) == 3 + 2
    assert made[gm.OUTPUT_TOKENS].metrics[0].total == 7 and made[gm.PROMPT_TOKENS].metrics[0].total == 15
    finished = {m.labels["finish_reason"]: m.total for m in made[gm.REQUESTS].metrics}
    assert finished == {"stop": 1, "length": 1, "cancelled": 0, "error": 1, "refused": 1}
    assert all(m.labels["model"] == "writer" for m in made[gm.REQUESTS].metrics)


def test_a_release_without_histograms_gets_their_sum_and_count_as_counters():
    metrics = gm.GenerationMetrics.create(_backend(_Family), LABELS, print)
    assert metrics is not None
    _request(metrics, 3)
    metrics.close()
    made = _Family.made
    assert gm.TIME_TO_FIRST_TOKEN not in made
    assert made[gm.TIME_TO_FIRST_TOKEN + "_count"].metrics[0].total == 1
    assert made[gm.INTER_TOKEN_LATENCY + "_count"].metrics[0].total == 2
    assert made[gm.INTER_TOKEN_LATENCY + "_sum"].metrics[0].total >= 0


def test_no_metrics_api_or_metrics_refused_means_no_metrics_and_no_failure():
    assert gm.GenerationMetrics.create(None, LABELS, print) is None
    assert gm.GenerationMetrics.create(types.SimpleNamespace(), LABELS, print) is None
    logged: list[str] = []

    class Refusing(_HistogramFamily):
        def __init__(self, name: str, description: str, kind: str) -> None:
            raise RuntimeError("metrics are disabled")

    assert gm.GenerationMetrics.create(_backend(Refusing), LABELS, logged.append) is None
    assert logged == ["generation metrics off: RuntimeError: metrics are disabled"]


def test_a_failing_metric_call_is_logged_once_and_the_thread_goes_on():
    logged: list[str] = []
    metrics = gm.GenerationMetrics.create(_backend(_HistogramFamily), LABELS, logged.append)
    assert metrics is not None

    def broken(value: float) -> None:
        raise RuntimeError("stub gone")

    metrics.output.increment = broken  # type: ignore[method-assign]
    _request(metrics, 2)
    _request(metrics, 2)
    metrics.close()
    assert logged == ["a generation metric call failed (reported once): RuntimeError: stub gone"]
    assert metrics.requests["length"].total == 2 and not metrics.thread.is_alive()  # both reached, then it stopped


@pytest.mark.parametrize("reason", ["stop", "length", "cancelled"])
def test_the_engines_finish_reasons_each_have_their_series(reason):
    metrics = gm.GenerationMetrics.create(_backend(_HistogramFamily), LABELS, print)
    assert metrics is not None
    _request(metrics, 1, reason)
    metrics.close()
    assert metrics.requests[reason].total == 1
