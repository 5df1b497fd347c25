"""Alarms of an asynchronous endpoint's queue: failures, expired requests, the oldest request against the SLA.

Metrics (developer guide, "Monitoring asynchronous endpoints"): ``InvocationFailures``, ``ExpiredRequests``,
``RequestDownloadFailures``, ``ResponseUploadFailures``, ``NotificationFailures`` per endpoint and variant, counts;
``ApproximateAgeOfOldestRequest`` per endpoint, seconds. The common endpoint metrics (``ModelLatency``,
``Invocation5XXErrors``) are published as for real-time endpoints, so their alarms stay; ``Invocations``,
``InvocationsPerInstance`` and ``OverheadLatency`` are not.
"""
from __future__ import annotations

from typing import Callable

from aws_cdk import aws_cloudwatch as cloudwatch

from deployment_spec.sections.asynchronous import Asynchronous
from triton_constructs.metrics import EndpointMetrics

# Each is a request that ended in the failure location, or whose result was not delivered: one is worth a look.
FAILURE_METRICS = {
    "InvocationFailures": "the model failed a request (see the failure location)",
    "ExpiredRequests": "a request outlived its RequestTTLSeconds in the queue",
    "RequestDownloadFailures": "SageMaker could not read a request's input location",
    "ResponseUploadFailures": "SageMaker could not write an answer to the output location",
    "NotificationFailures": "SageMaker could not publish to a success or error topic",
}

AlarmFactory = Callable[..., cloudwatch.Alarm]


def queue_alarms(alarm: AlarmFactory, metrics: EndpointMetrics, settings: Asynchronous) -> list[cloudwatch.Alarm]:
    """One alarm per failure count (1 or more in a minute) and one on the oldest request's age.

    ``alarm(id_, metric, threshold, description, periods=)``: ``EndpointAlarms``' own factory (missing data is
    not breaching: an idle queue publishes nothing).
    """
    out = [alarm(name, metrics.invocation(name, "Sum"), 1, f"1 or more per minute: {meaning}", periods=1)
           for name, meaning in FAILURE_METRICS.items()]
    out.append(alarm("OldestRequestAge", metrics.queue("ApproximateAgeOfOldestRequest", "Maximum"),
                     settings.oldest_request_age_s, f"the oldest queued request is {settings.oldest_request_age_s} s "
                     "old or older (the latency SLA): too few instances, or a scale-out that did not come", periods=2))
    return out
