"""A CloudWatch dashboard for one endpoint variant."""
from __future__ import annotations

from typing import Mapping, Optional

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from deployment_spec.sections.asynchronous import Asynchronous
from triton_constructs.async_dashboard import queue_widgets
from triton_constructs.metrics import EndpointMetrics
from triton_constructs.promql_graphs import PromQLGraphs


def graph(title: str, left: list[cloudwatch.IMetric], annotation: Optional[tuple[float, str]] = None
          ) -> cloudwatch.GraphWidget:
    """One dashboard graph (a third of the width), with an optional horizontal line (value, label)."""
    lines = [cloudwatch.HorizontalAnnotation(value=annotation[0], label=annotation[1])] if annotation else None
    return cloudwatch.GraphWidget(title=title, left=left, left_annotations=lines, width=8, height=6)

class EndpointDashboard(Construct):
    """Latency split (model vs overhead), traffic and errors, instance count, utilization; MME model cache.

    Args:
        scope: Parent construct.
        id_: Construct ID.
        metrics: The variant's metrics (the endpoint's name is also the dashboard's).
        latency_sla_ms: Drawn as a line on the latency graph.
        gpu_count: GPUs per instance; 0 hides the GPU graph.
        gpu_target: The GPUUtilization scaling target, drawn on the GPU graph. Defaults to none.
        multi_model: Add loaded-model count, cache hit ratio and loading wait. Defaults to False.
        triton_queries: Triton's own metrics as PromQL (title: query): listed for CloudWatch Query Studio,
            or drawn by ``triton_graphs``. Defaults to none.
        triton_alarm: The PromQL alarm on Triton's queue time, shown by its state. Defaults to none.
        triton_graphs: Draws ``triton_queries`` (a custom widget each). Defaults to none: listed as text.
        asynchronous: The queue's graphs instead of the invocation and instance graphs, whose metrics an
            asynchronous endpoint does not publish (``async_dashboard``). Defaults to none.

    Attributes:
        dashboard: The ``cloudwatch.Dashboard``.
    """

    def __init__(self, scope: Construct, id_: str, *, metrics: EndpointMetrics, latency_sla_ms: float,
                 gpu_count: int, gpu_target: Optional[float] = None, multi_model: bool = False,
                 triton_queries: Optional[Mapping[str, str]] = None,
                 triton_alarm: Optional[cloudwatch.IAlarm] = None,
                 triton_graphs: Optional[PromQLGraphs] = None, asynchronous: Optional[Asynchronous] = None) -> None:
        super().__init__(scope, id_)
        metric, per_instance = metrics.invocation, metrics.instance

        widgets: list[cloudwatch.IWidget] = queue_widgets(graph, metrics, asynchronous) if asynchronous else [
            graph("Latency (microseconds): model vs overhead", [
                metric("ModelLatency", "Average", "model (avg)"), metric("ModelLatency", "p99", "model (p99)"),
                metric("OverheadLatency", "Average", "SageMaker overhead (avg)")],
                (latency_sla_ms * 1000, f"SLA {latency_sla_ms:g} ms")),
            graph("Invocations and errors per minute", [
                metric("Invocations", "Sum", "invocations"), metric("Invocation4XXErrors", "Sum", "4XX"),
                metric("Invocation5XXErrors", "Sum", "5XX")]),
            # No metric counts instances directly: invocations / invocations per instance does (under traffic).
            graph("Instances", [cloudwatch.MathExpression(
                expression="invocations / perInstance", label="instances (invocations / per instance)",
                using_metrics={"invocations": metric("Invocations", "Sum"),
                               "perInstance": metric("InvocationsPerInstance", "Sum")},
                period=cdk.Duration.minutes(1))]),
        ]
        if gpu_count:
            widgets.append(graph(f"GPU utilization (% summed over {gpu_count} GPU)", [
                per_instance("GPUUtilization", "Average", "GPU"),
                per_instance("GPUMemoryUtilization", "Average", "GPU memory")],
                (gpu_target, "scaling target") if gpu_target else None))
        widgets.append(graph("CPU, memory and disk (%)", [
            per_instance("CPUUtilization", "Average", "CPU (summed over vCPUs)"),
            per_instance("MemoryUtilization", "Average", "memory"),
            per_instance("DiskUtilization", "Average", "disk")]))
        if multi_model:
            widgets += [
                graph("Loaded models", [per_instance("LoadedModelCount", "Average", "per instance"),
                                        per_instance("LoadedModelCount", "Sum", "total")]),
                graph("Model cache hit ratio", [metric("ModelCacheHit", "Average", "hit ratio")]),
                graph("Model loading (microseconds)", [
                    metric("ModelLoadingWaitTime", "Average", "wait"), metric("ModelLoadingTime", "Average", "load"),
                    metric("ModelDownloadingTime", "Average", "download"),
                    metric("ModelUnloadingTime", "Average", "unload")]),
            ]
        widgets += triton_widgets(triton_queries, triton_alarm, triton_graphs)
        self.dashboard = cloudwatch.Dashboard(self, "Resource", dashboard_name=metrics.endpoint_name,
                                              widgets=[widgets[i:i + 3] for i in range(0, len(widgets), 3)])


def triton_widgets(queries: Optional[Mapping[str, str]], alarm: Optional[cloudwatch.IAlarm],
                   graphs: Optional[PromQLGraphs] = None) -> list[cloudwatch.IWidget]:
    """Triton's own metrics on a dashboard: the PromQL queries drawn by ``graphs``, else as text (for Query
    Studio: no built-in widget draws PromQL), and the queue alarm's state."""
    widgets: list[cloudwatch.IWidget] = []
    if queries and graphs is not None:
        widgets += graphs.widgets({f"Triton: {title}": query for title, query in queries.items()})
    elif queries:
        lines = [f"**{title}**\n```\n{query}\n```" for title, query in queries.items()]
        widgets.append(cloudwatch.TextWidget(width=16, height=6, markdown=(
            "### Triton's own metrics (PromQL, CloudWatch Query Studio)\nPer model, from Triton's Prometheus "
            "counters through SageMaker detailed observability:\n\n" + "\n\n".join(lines))))
    if alarm is not None:
        widgets.append(cloudwatch.AlarmStatusWidget(alarms=[alarm], title="Triton queue time", width=8, height=6))
    return widgets
