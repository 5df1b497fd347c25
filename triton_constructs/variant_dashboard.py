"""A CloudWatch dashboard comparing an endpoint's variants: the incumbent and each candidate on the same graphs."""
from __future__ import annotations

from typing import Mapping, Sequence

from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from triton_constructs.dashboard import graph
from triton_constructs.metrics import EndpointMetrics
from triton_constructs.variant_comparison import error_rate


class VariantDashboard(Construct):
    """One line per variant on each graph: invocations, ModelLatency p50 and p99, the error rate, 4XX, 5XX and
    model errors, GPU utilization; the comparison alarms' states; the traffic split as written.

    The graphs are those SageMaker's own shadow-test dashboard draws per variant (developer guide, "Monitor a shadow
    test"), with GPU utilization from ``/aws/sagemaker/Endpoints`` added for GPU instance types. The endpoint's own
    dashboard (``EndpointDashboard``) keeps the incumbent's detail and Triton's metrics.

    Args:
        scope: Parent construct.
        id_: Construct ID.
        variants: Each variant's metrics, the incumbent first (names the dashboard ``<endpoint>-variants``).
        gpu_counts: GPUs per instance of each variant, by name (0 or absent: no GPU line for it).
        split: How the traffic is split, e.g. ``incumbent 90 %, candidate 10 %`` (or the shadow's sampling).
        alarms: The comparison alarms. Defaults to none.

    Attributes:
        dashboard: The ``cloudwatch.Dashboard``.
    """

    def __init__(self, scope: Construct, id_: str, *, variants: Sequence[EndpointMetrics],
                 gpu_counts: Mapping[str, int], split: str,
                 alarms: Sequence[cloudwatch.IAlarm] = ()) -> None:
        super().__init__(scope, id_)
        incumbent = variants[0]

        def each(metric_name: str, statistic: str) -> list[cloudwatch.IMetric]:
            return [v.invocation(metric_name, statistic, f"{v.variant_name} ({statistic})") for v in variants]

        widgets: list[cloudwatch.IWidget] = [
            cloudwatch.TextWidget(width=24, height=2, markdown=(
                f"### {incumbent.endpoint_name}: {incumbent.variant_name} (incumbent) against "
                f"{', '.join(v.variant_name for v in variants[1:])}\nTraffic: {split}")),
            graph("Invocations per minute", each("Invocations", "Sum")),
            graph("ModelLatency p50 (microseconds)", each("ModelLatency", "p50")),
            graph("ModelLatency p99 (microseconds)", each("ModelLatency", "p99")),
            graph("Failed invocations (% of invocations)",
                  [error_rate(v, f"v{i}", f"{v.variant_name} (%)") for i, v in enumerate(variants)]),
            graph("Invocation4XXErrors per minute", each("Invocation4XXErrors", "Sum")),
            graph("Invocation5XXErrors per minute", each("Invocation5XXErrors", "Sum")),
            graph("InvocationModelErrors per minute", each("InvocationModelErrors", "Sum")),
        ]
        gpu = [v.instance("GPUUtilization", "Average", f"{v.variant_name} ({gpu_counts[v.variant_name]} GPU)")
               for v in variants if gpu_counts.get(v.variant_name)]
        if gpu:
            widgets.append(graph("GPU utilization (% summed over each instance's GPUs)", list(gpu)))
        if alarms:
            widgets.append(cloudwatch.AlarmStatusWidget(alarms=list(alarms), title="Candidate against incumbent",
                                                        width=8, height=6))
        rows = [widgets[:1]] + [widgets[i:i + 3] for i in range(1, len(widgets), 3)]
        self.dashboard = cloudwatch.Dashboard(self, "Resource", dashboard_name=f"{incumbent.endpoint_name}-variants",
                                              widgets=rows)
