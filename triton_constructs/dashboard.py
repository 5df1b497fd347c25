"""A CloudWatch dashboard for one endpoint variant."""
from __future__ import annotations

from typing import Optional

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from triton_constructs.alarms import INVOCATION_NAMESPACE
from triton_constructs.execution_role import METRIC_NAMESPACE


class EndpointDashboard(Construct):
    """Latency split (model vs overhead), traffic and errors, instance count, utilization; MME model cache.

    Args:
        scope: Parent construct.
        id_: Construct ID.
        endpoint_name: The endpoint (also the dashboard's name).
        variant_name: The variant shown.
        latency_sla_ms: Drawn as a line on the latency graph.
        gpu_count: GPUs per instance; 0 hides the GPU graph.
        gpu_target: The GPUUtilization scaling target, drawn on the GPU graph. Defaults to none.
        multi_model: Add loaded-model count, cache hit ratio and loading wait. Defaults to False.

    Attributes:
        dashboard: The ``cloudwatch.Dashboard``.
    """

    def __init__(self, scope: Construct, id_: str, *, endpoint_name: str, variant_name: str, latency_sla_ms: float,
                 gpu_count: int, gpu_target: Optional[float] = None, multi_model: bool = False) -> None:
        super().__init__(scope, id_)
        dims = {"EndpointName": endpoint_name, "VariantName": variant_name}

        def metric(namespace: str, name: str, statistic: str, label: Optional[str] = None) -> cloudwatch.Metric:
            return cloudwatch.Metric(namespace=namespace, metric_name=name, statistic=statistic, label=label,
                                     dimensions_map=dims, period=cdk.Duration.minutes(1))

        def graph(title: str, left: list, annotation: Optional[tuple[float, str]] = None) -> cloudwatch.GraphWidget:
            lines = [cloudwatch.HorizontalAnnotation(value=annotation[0], label=annotation[1])] if annotation else None
            return cloudwatch.GraphWidget(title=title, left=left, left_annotations=lines, width=8, height=6)

        sm = INVOCATION_NAMESPACE
        widgets = [
            graph("Latency (microseconds): model vs overhead", [
                metric(sm, "ModelLatency", "Average", "model (avg)"), metric(sm, "ModelLatency", "p99", "model (p99)"),
                metric(sm, "OverheadLatency", "Average", "SageMaker overhead (avg)")],
                (latency_sla_ms * 1000, f"SLA {latency_sla_ms:g} ms")),
            graph("Invocations and errors per minute", [
                metric(sm, "Invocations", "Sum", "invocations"), metric(sm, "Invocation4XXErrors", "Sum", "4XX"),
                metric(sm, "Invocation5XXErrors", "Sum", "5XX")]),
            # No metric counts instances directly: invocations / invocations per instance does (under traffic).
            graph("Instances", [cloudwatch.MathExpression(
                expression="invocations / perInstance", label="instances (invocations / per instance)",
                using_metrics={"invocations": metric(sm, "Invocations", "Sum"),
                               "perInstance": metric(sm, "InvocationsPerInstance", "Sum")},
                period=cdk.Duration.minutes(1))]),
        ]
        if gpu_count:
            widgets.append(graph(f"GPU utilization (% summed over {gpu_count} GPU)", [
                metric(METRIC_NAMESPACE, "GPUUtilization", "Average", "GPU"),
                metric(METRIC_NAMESPACE, "GPUMemoryUtilization", "Average", "GPU memory")],
                (gpu_target, "scaling target") if gpu_target else None))
        widgets.append(graph("CPU, memory and disk (%)", [
            metric(METRIC_NAMESPACE, "CPUUtilization", "Average", "CPU (summed over vCPUs)"),
            metric(METRIC_NAMESPACE, "MemoryUtilization", "Average", "memory"),
            metric(METRIC_NAMESPACE, "DiskUtilization", "Average", "disk")]))
        if multi_model:
            widgets += [
                graph("Loaded models", [metric(METRIC_NAMESPACE, "LoadedModelCount", "Average", "per instance"),
                                        metric(METRIC_NAMESPACE, "LoadedModelCount", "Sum", "total")]),
                graph("Model cache hit ratio", [metric(sm, "ModelCacheHit", "Average", "hit ratio")]),
                graph("Model loading (microseconds)", [
                    metric(sm, "ModelLoadingWaitTime", "Average", "wait"), metric(sm, "ModelLoadingTime", "Average", "load"),
                    metric(sm, "ModelDownloadingTime", "Average", "download")]),
            ]
        self.dashboard = cloudwatch.Dashboard(self, "Resource", dashboard_name=endpoint_name,
                                              widgets=[widgets[i:i + 3] for i in range(0, len(widgets), 3)])
