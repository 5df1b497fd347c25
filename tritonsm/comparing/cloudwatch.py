"""A deployed variant's latency and failed invocations over the window, from CloudWatch.

SageMaker publishes per variant in the ``AWS/SageMaker`` namespace, dimensions ``EndpointName`` and ``VariantName``
(developer guide, "Amazon SageMaker AI metrics in Amazon CloudWatch"): ``ModelLatency`` in microseconds,
``Invocation4XXErrors`` and ``Invocation5XXErrors`` per period. ``GetMetricData`` (CloudWatch API reference) answers
one series per query, at most 500 queries a call, following ``NextToken``. With one-minute periods the window's
figures are: p50, the median of the minutes' p50; p99, the highest minute's p99 (a window-wide percentile is not
the mean of the minutes').
"""
from __future__ import annotations

import datetime as dt
import statistics
from typing import Any

from deployment_spec.parsing.errors import UserError

from tritonsm.comparing.window import Window

NAMESPACE = "AWS/SageMaker"
PERIOD_S = 60
# (query id suffix, metric, statistic)
SERIES = (("p50", "ModelLatency", "p50"), ("p99", "ModelLatency", "p99"), ("n", "ModelLatency", "SampleCount"),
          ("e4", "Invocation4XXErrors", "Sum"), ("e5", "Invocation5XXErrors", "Sum"))
SOURCE = ("CloudWatch AWS/SageMaker ModelLatency, 1-minute periods: p50 is the median of the minutes' p50, p99 the "
          "highest minute's p99; count is its SampleCount")


def queries(endpoint: str, variants: list[str]) -> list[dict[str, Any]]:
    return [{"Id": f"v{i}_{suffix}", "Label": f"{variant} {metric} {stat}", "ReturnData": True,
             "MetricStat": {"Metric": {"Namespace": NAMESPACE, "MetricName": metric,
                                       "Dimensions": [{"Name": "EndpointName", "Value": endpoint},
                                                      {"Name": "VariantName", "Value": variant}]},
                            "Period": PERIOD_S, "Stat": stat}}
            for i, variant in enumerate(variants) for suffix, metric, stat in SERIES]


def read(endpoint: str, variants: list[str], window: Window, client: Any) -> dict[str, dict[str, Any]]:
    """Per variant: count, p50_ms, p99_ms, 4xx, 5xx and the minutes' series (``minutes``: time, p50 ms, p99 ms)."""
    from botocore.exceptions import BotoCoreError, ClientError

    series: dict[str, dict[dt.datetime, float]] = {}
    options: dict[str, Any] = {"MetricDataQueries": queries(endpoint, variants), "StartTime": window.since,
                               "EndTime": window.until, "ScanBy": "TimestampAscending"}
    try:
        while True:
            answer = client.get_metric_data(**options)
            for result in answer.get("MetricDataResults", []):
                series.setdefault(result["Id"], {}).update(zip(result["Timestamps"], result["Values"]))
            if not answer.get("NextToken"):
                break
            options["NextToken"] = answer["NextToken"]
    except (BotoCoreError, ClientError) as error:
        raise UserError(f"--cloudwatch: cannot read {NAMESPACE} ModelLatency of endpoint {endpoint} ({error}); "
                        "check --region (the endpoint's) and that your credentials allow cloudwatch:GetMetricData"
                        ) from None
    return {variant: _summary(lambda s, i=i: series.get(f"v{i}_{s}", {})) for i, variant in enumerate(variants)}


def _summary(get: Any) -> dict[str, Any]:
    p50, p99 = get("p50"), get("p99")
    nan = float("nan")
    minutes = [(t, p50.get(t, nan) / 1000, p99.get(t, nan) / 1000) for t in sorted(set(p50) | set(p99))]
    return {"count": int(sum(get("n").values())),
            "p50_ms": statistics.median(p50.values()) / 1000 if p50 else None,
            "p99_ms": max(p99.values()) / 1000 if p99 else None,
            "4xx": int(sum(get("e4").values())), "5xx": int(sum(get("e5").values())),
            "minutes": minutes}
