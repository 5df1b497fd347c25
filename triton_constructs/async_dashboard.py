"""The graphs of an asynchronous endpoint's queue: backlog, the oldest request, time in the queue and in the
model, failures, instances (``Invocations`` is not published for it, so the real-time traffic graphs would be
empty; developer guide, "Monitoring asynchronous endpoints")."""
from __future__ import annotations

from typing import Callable

from aws_cdk import aws_cloudwatch as cloudwatch

from deployment_spec.sections.asynchronous import Asynchronous
from triton_constructs.async_alarms import FAILURE_METRICS
from triton_constructs.metrics import EndpointMetrics

Graph = Callable[..., cloudwatch.GraphWidget]


def queue_widgets(graph: Graph, metrics: EndpointMetrics, settings: Asynchronous) -> list[cloudwatch.IWidget]:
    """``graph(title, metrics, annotation)``: the dashboard's own graph maker."""
    queue, metric = metrics.queue, metrics.invocation
    return [
        graph("Queue: requests waiting", [
            queue("ApproximateBacklogSize", "Average", "backlog"),
            queue("ApproximateBacklogSizePerInstance", "Average", "per instance"),
            queue("HasBacklogWithoutCapacity", "Maximum", "backlog and no instance (1)")],
            (settings.backlog_target, "scaling target per instance")),
        graph("Queue: age of the oldest request (s)", [
            queue("ApproximateAgeOfOldestRequest", "Maximum", "oldest request")],
            (settings.oldest_request_age_s, "latency SLA")),
        graph("Time in the queue and in processing", [
            metric("TimeInBacklog", "Average", "in the queue"),
            metric("TotalProcessingTime", "Average", "received to answered"),
            metric("ModelLatency", "Average", "model (microseconds)")]),
        graph("Failures per minute", [metric(name, "Sum", name) for name in FAILURE_METRICS]),
        # The troubleshooting guide counts instances as CPUUtilization's sample count over one minute.
        graph("Instances (0 when scaled in)", [metrics.instance("CPUUtilization", "SampleCount", "instances")]),
    ]
