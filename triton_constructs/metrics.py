"""CloudWatch metrics of one endpoint variant: the one place their namespaces and dimensions are built.

Namespaces and units (https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html):
``AWS/SageMaker`` holds the invocation metrics (latencies in microseconds, counts per minute) and the
multi-model loading metrics; ``/aws/sagemaker/Endpoints`` holds the per-instance utilization metrics
(percent, summed over GPUs or vCPUs). Both are keyed by ``EndpointName`` and ``VariantName``.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch

INVOCATION_NAMESPACE = "AWS/SageMaker"
INSTANCE_NAMESPACE = "/aws/sagemaker/Endpoints"
ONE_MINUTE = cdk.Duration.minutes(1)


@dataclasses.dataclass(frozen=True)
class EndpointMetrics:
    """Builds the metrics of one variant; alarms, dashboard, scaling and the construct's ``metric_*`` use it.

    Attributes:
        endpoint_name: The endpoint.
        variant_name: The variant.
    """

    endpoint_name: str
    variant_name: str

    @property
    def dimensions(self) -> dict[str, str]:
        return {"EndpointName": self.endpoint_name, "VariantName": self.variant_name}

    def metric(self, metric_name: str, *, statistic: str, namespace: str = INVOCATION_NAMESPACE,
               label: Optional[str] = None, unit: Optional[cloudwatch.Unit] = None,
               period: cdk.Duration = ONE_MINUTE) -> cloudwatch.Metric:
        """Any metric of the variant, e.g. ``metric("ModelSetupTime", statistic="Average")``."""
        return cloudwatch.Metric(namespace=namespace, metric_name=metric_name, statistic=statistic, label=label,
                                 unit=unit, dimensions_map=self.dimensions, period=period)

    def invocation(self, metric_name: str, statistic: str, label: Optional[str] = None) -> cloudwatch.Metric:
        """A metric of ``AWS/SageMaker`` (Invocations, ModelLatency, Invocation5XXErrors, ModelCacheHit, ...)."""
        return self.metric(metric_name, statistic=statistic, label=label)

    def instance(self, metric_name: str, statistic: str = "Average", label: Optional[str] = None,
                 unit: Optional[cloudwatch.Unit] = None) -> cloudwatch.Metric:
        """A per-instance metric of ``/aws/sagemaker/Endpoints`` (GPUUtilization, DiskUtilization, ...)."""
        return self.metric(metric_name, statistic=statistic, namespace=INSTANCE_NAMESPACE, label=label, unit=unit)

    def queue(self, metric_name: str, statistic: str = "Average", label: Optional[str] = None) -> cloudwatch.Metric:
        """An asynchronous endpoint's queue metric of ``AWS/SageMaker``, keyed by ``EndpointName`` only
        (``ApproximateBacklogSize``, ``ApproximateBacklogSizePerInstance``, ``ApproximateAgeOfOldestRequest``,
        ``HasBacklogWithoutCapacity``; developer guide, "Monitoring asynchronous endpoints")."""
        return cloudwatch.Metric(namespace=INVOCATION_NAMESPACE, metric_name=metric_name, statistic=statistic,
                                 label=label, dimensions_map={"EndpointName": self.endpoint_name}, period=ONE_MINUTE)
