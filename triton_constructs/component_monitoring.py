"""Alarms and a dashboard for one inference component, on its own (per-copy) metrics.

Metric names, namespaces and dimensions: https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html
(invocation metrics in ``AWS/SageMaker`` with dimension ``InferenceComponentName``: ``Invocations``,
``InvocationsPerCopy``, ``ConcurrentRequestsPerCopy``, ``ModelLatency``, ``Invocation4XXErrors``,
``Invocation5XXErrors``; utilization of each copy in ``/aws/sagemaker/InferenceComponents``, 0-100 % of the
copy's reservation: ``CPUUtilizationNormalized``, ``GPUUtilizationNormalized``,
``GPUMemoryUtilizationNormalized``, ``MemoryUtilizationNormalized``; the instances' reservations in
``/aws/sagemaker/Endpoints`` with ``EndpointName``, ``VariantName``: ``CPUReservation``, ``GPUReservation``,
``MemoryReservation``) and DG endpoint-auto-scaling-zero-instances (``NoCapacityInvocationFailures``).
"""
from __future__ import annotations

from typing import Optional

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch, aws_sns as sns
from constructs import Construct

from deployment_spec.sections.endpoint import Alarms
from triton_constructs.component_scaling import NO_CAPACITY_METRIC
from triton_constructs import generation_promql, triton_promql
from triton_constructs.dashboard import graph, triton_widgets
from triton_constructs.alarms import notify_topic, queue_alarm, time_to_first_token_alarm
from triton_constructs.metrics import INSTANCE_NAMESPACE, INVOCATION_NAMESPACE, ONE_MINUTE
from triton_constructs.promql_graphs import PromQLGraphs

COMPONENT_NAMESPACE = "/aws/sagemaker/InferenceComponents"


def component_metric(component_name: str, metric_name: str, statistic: str, *, namespace: str = INVOCATION_NAMESPACE,
                     label: Optional[str] = None) -> cloudwatch.Metric:
    """One metric of one component, per minute."""
    return cloudwatch.Metric(namespace=namespace, metric_name=metric_name, statistic=statistic, label=label,
                             dimensions_map={"InferenceComponentName": component_name}, period=ONE_MINUTE)


class ComponentAlarms(Construct):
    """Latency and 5XX alarms (which also roll a guarded update back) and, with a GPU, a GPU memory alarm.

    ``ModelLatency`` is in microseconds: the spec's millisecond SLA is multiplied by 1000. The normalized
    GPU memory metric is already per copy and 0-100 %, so its threshold is the spec's per-GPU percent as is.
    Missing data (no traffic, or no copy) is not breaching.

    Args:
        scope: Parent construct.
        id_: Construct ID.
        component_name: The component's ``InferenceComponentName``.
        thresholds: From the spec.
        gpus: GPUs one copy reserves (0: no GPU memory alarm).
        endpoint_name: With Triton's metrics published: the endpoint, for the PromQL queue alarm
            (``alarms.queue_alarm``). Defaults to none (no queue alarm).
        generating: The component's container runs the generate route (its model generates text): with
            ``endpoint_name`` and ``thresholds.time_to_first_token_ms``, the PromQL alarm on its time to first token.
            Defaults to False.
        topic: Every alarm notifies it on ALARM and OK (``Alarms.topic``). Defaults to none: no action.

    Attributes:
        latency, errors: The alarms that roll a guarded (rolling) update back.
        triton_queue: The PromQL queue alarm, or None.
        time_to_first_token: The PromQL alarm on the time to first token, or None.
        all: Every alarm.
    """

    def __init__(self, scope: Construct, id_: str, *, component_name: str, thresholds: Alarms, gpus: int,
                 endpoint_name: Optional[str] = None, topic: Optional[sns.ITopic] = None,
                 generating: bool = False) -> None:
        super().__init__(scope, id_)

        def alarm(id_: str, metric: cloudwatch.Metric, threshold: float, description: str,
                  periods: int) -> cloudwatch.Alarm:
            return cloudwatch.Alarm(
                self, id_, metric=metric, threshold=threshold, evaluation_periods=periods,
                datapoints_to_alarm=periods, alarm_description=f"{component_name}: {description}",
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING)

        t = thresholds
        self.latency = alarm("ModelLatency", component_metric(component_name, "ModelLatency", "Average"),
                             t.latency_sla_ms * 1000, f"average model latency at or above the {t.latency_sla_ms:g} ms "
                             "SLA (ModelLatency is in microseconds)", periods=2)
        self.errors = alarm("Errors5xx", component_metric(component_name, "Invocation5XXErrors", "Sum"),
                            t.error_5xx_threshold, f"{t.error_5xx_threshold:g} or more 5XX errors per minute", periods=1)
        self.all: list[cloudwatch.AlarmBase] = [self.latency, self.errors]
        if gpus:
            self.all.append(alarm(
                "GpuMemory", component_metric(component_name, "GPUMemoryUtilizationNormalized", "Average",
                                              namespace=COMPONENT_NAMESPACE),
                t.gpu_memory_percent, f"GPU memory of a copy at or above {t.gpu_memory_percent:g} % of its "
                                      f"{gpus} reserved GPU(s)", periods=3))
        self.triton_queue: Optional[cloudwatch.PromQLAlarm] = None
        if endpoint_name is not None:
            self.triton_queue = queue_alarm(self, endpoint_name, t, component_name)
            self.all.append(self.triton_queue)
        self.time_to_first_token: Optional[cloudwatch.PromQLAlarm] = None
        if endpoint_name is not None and generating and t.time_to_first_token_ms is not None:
            self.time_to_first_token = time_to_first_token_alarm(self, endpoint_name, t.time_to_first_token_ms,
                                                                 component_name)
            self.all.append(self.time_to_first_token)
        if topic is not None:
            notify_topic(self.all, topic)


class ComponentDashboard(Construct):
    """Latency, traffic and refusals, per-copy load against the scaling target, utilization of the reservation.

    Args:
        scope: Parent construct.
        id_: Construct ID.
        component_name: The component (also the dashboard's name).
        endpoint_name: The endpoint (for the instances' reservation graph).
        variant_name: Its variant.
        latency_sla_ms: Drawn on the latency graph.
        per_copy_target: (metric name, target) of the scaling policy, drawn on the per-copy graph. Defaults to
            none (fixed copies).
        triton_alarm: The component's PromQL queue alarm: with it, Triton's queries and the alarm's state are
            shown too. Defaults to none.
        triton_graphs: Draws those queries (else listed as text). Defaults to none.
        generating: The component's model generates text: with ``triton_alarm``, its time to first token,
            inter-token latency and tokens per second are drawn too (``generation_promql``). Defaults to False.

    Attributes:
        dashboard: The ``cloudwatch.Dashboard``.
    """

    def __init__(self, scope: Construct, id_: str, *, component_name: str, endpoint_name: str, variant_name: str,
                 latency_sla_ms: float, per_copy_target: Optional[tuple[str, float]] = None,
                 triton_alarm: Optional[cloudwatch.IAlarm] = None,
                 triton_graphs: Optional[PromQLGraphs] = None, generating: bool = False) -> None:
        super().__init__(scope, id_)

        def metric(name: str, statistic: str, label: str, namespace: str = INVOCATION_NAMESPACE) -> cloudwatch.Metric:
            return component_metric(component_name, name, statistic, namespace=namespace, label=label)

        target_line = (per_copy_target[1], f"scaling target ({per_copy_target[0]})") if per_copy_target else None
        endpoint = {"EndpointName": endpoint_name, "VariantName": variant_name}
        widgets: list[cloudwatch.IWidget] = [
            graph("Latency (microseconds)", [
                metric("ModelLatency", "Average", "model (avg)"), metric("ModelLatency", "p99", "model (p99)"),
                metric("OverheadLatency", "Average", "SageMaker overhead (avg)")],
                (latency_sla_ms * 1000, f"SLA {latency_sla_ms:g} ms")),
            graph("Invocations, errors and refusals per minute", [
                metric("Invocations", "Sum", "invocations"), metric("Invocation4XXErrors", "Sum", "4XX"),
                metric("Invocation5XXErrors", "Sum", "5XX"),
                metric(NO_CAPACITY_METRIC, "Sum", "no copy to serve (scaled to zero)")]),
            graph("Load per copy", [
                metric("InvocationsPerCopy", "Sum", "invocations per copy per minute"),
                metric("ConcurrentRequestsPerCopy", "Maximum", "concurrent requests per copy (max)")], target_line),
            graph("Utilization of each copy's reservation (%)", [
                metric(name, "Average", label, COMPONENT_NAMESPACE) for name, label in (
                    ("CPUUtilizationNormalized", "CPU"), ("MemoryUtilizationNormalized", "memory"),
                    ("GPUUtilizationNormalized", "GPU"), ("GPUMemoryUtilizationNormalized", "GPU memory"))]),
            graph("Instances' capacity reserved by all components (%)", [
                cloudwatch.Metric(namespace=INSTANCE_NAMESPACE, metric_name=name, statistic="Average", label=label,
                                  dimensions_map=endpoint, period=cdk.Duration.minutes(1))
                for name, label in (("CPUReservation", "CPU"), ("MemoryReservation", "memory"),
                                    ("GPUReservation", "GPU"))]),
        ]
        # Triton's own metrics where they are published (the queue alarm exists exactly then).
        queries = {**triton_promql.dashboard_queries(endpoint_name, component_name),
                   **(generation_promql.dashboard_queries(endpoint_name, component_name) if generating else {})}
        widgets += triton_widgets(queries if triton_alarm is not None else None, triton_alarm, triton_graphs)
        self.dashboard = cloudwatch.Dashboard(self, "Resource", dashboard_name=component_name,
                                              widgets=[widgets[i:i + 3] for i in range(0, len(widgets), 3)])
