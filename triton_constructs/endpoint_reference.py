"""What callers get from any Triton endpoint, one this app deploys or one imported by name: the right to
invoke it, and its CloudWatch metrics (with ``cloudwatch.MetricOptions``, as CDK's own resources)."""
from __future__ import annotations

from typing import Optional

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch, aws_iam as iam
from constructs import Construct

from triton_constructs import triton_promql
from triton_constructs.metrics import INSTANCE_NAMESPACE, INVOCATION_NAMESPACE, EndpointMetrics


def with_options(metric: cloudwatch.Metric, props: Optional[cloudwatch.MetricOptions]) -> cloudwatch.Metric:
    """``metric`` with what ``props`` sets (period, statistic, label, unit, color, account, region)."""
    if props is None:
        return metric
    return metric.with_(account=props.account, color=props.color, dimensions_map=props.dimensions_map,
                        label=props.label, period=props.period, region=props.region, statistic=props.statistic,
                        unit=props.unit)


def endpoint_arn(scope: Construct, endpoint_name: str) -> str:
    """The endpoint's ARN written out, not a resource's ``Ref``: a grant to a role in another stack then adds
    no reference back to this one (no dependency cycle). SageMaker ARNs carry the name in lower case."""
    return cdk.Stack.of(scope).format_arn(service="sagemaker", resource="endpoint", resource_name=endpoint_name.lower())


class EndpointReference:
    """Grant and metrics of one endpoint variant; the class sets ``endpoint_name``, ``endpoint_arn``,
    ``variant_name`` and ``metrics``."""

    endpoint_name: str
    endpoint_arn: str
    variant_name: str
    metrics: EndpointMetrics

    def grant_invoke(self, grantee: iam.IGrantable) -> iam.Grant:
        """Lets ``grantee`` call this endpoint (``sagemaker:InvokeEndpoint`` on its ARN only)."""
        return iam.Grant.add_to_principal(grantee=grantee, actions=["sagemaker:InvokeEndpoint"],
                                          resource_arns=[self.endpoint_arn])

    def metric(self, metric_name: str, props: Optional[cloudwatch.MetricOptions] = None, *,
               per_instance: bool = False) -> cloudwatch.Metric:
        """Any metric of the variant, per minute, Average unless ``props`` says otherwise: ``AWS/SageMaker``, or
        ``/aws/sagemaker/Endpoints`` with ``per_instance``."""
        return with_options(self.metrics.metric(
            metric_name, statistic="Average", namespace=INSTANCE_NAMESPACE if per_instance else INVOCATION_NAMESPACE),
            props)

    def metric_invocations(self, props: Optional[cloudwatch.MetricOptions] = None) -> cloudwatch.Metric:
        """Requests per minute (``Invocations``, Sum)."""
        return with_options(self.metrics.invocation("Invocations", "Sum"), props)

    def metric_model_latency(self, props: Optional[cloudwatch.MetricOptions] = None) -> cloudwatch.Metric:
        """Time the container took, in microseconds (``ModelLatency``, Average; e.g. ``statistic="p99"``)."""
        return with_options(self.metrics.invocation("ModelLatency", "Average"), props)

    def metric_errors(self, kind: str = "5XX", props: Optional[cloudwatch.MetricOptions] = None) -> cloudwatch.Metric:
        """``Invocation5XXErrors`` (or ``kind="4XX"``) per minute, Sum."""
        return with_options(self.metrics.invocation(f"Invocation{kind}Errors", "Sum"), props)

    def metric_gpu_utilization(self, props: Optional[cloudwatch.MetricOptions] = None) -> cloudwatch.Metric:
        """GPU utilization in percent, summed over the instance's GPUs (0-100 x GPUs), Average."""
        return with_options(self.metrics.instance("GPUUtilization", unit=cloudwatch.Unit.PERCENT), props)

    def metric_gpu_memory_utilization(self, props: Optional[cloudwatch.MetricOptions] = None) -> cloudwatch.Metric:
        """GPU memory in percent, summed over the instance's GPUs (0-100 x GPUs), Average."""
        return with_options(self.metrics.instance("GPUMemoryUtilization", unit=cloudwatch.Unit.PERCENT), props)

    def promql_queue_ms(self) -> str:
        """PromQL (CloudWatch Query Studio, ``cloudwatch.PromQLAlarm``): ms a request waits in Triton's queue,
        per model, from Triton's own metrics (``triton_promql``)."""
        return triton_promql.queue_ms(self.endpoint_name)

    def promql_compute_ms(self) -> str:
        """PromQL: ms Triton computes per request, per model."""
        return triton_promql.compute_ms(self.endpoint_name)

    def promql_average_batch(self) -> str:
        """PromQL: the batch size dynamic batching formed (inferences per execution), per model."""
        return triton_promql.average_batch(self.endpoint_name)

    def promql_pending_requests(self) -> str:
        """PromQL: requests Triton holds and has not started computing, per model."""
        return triton_promql.pending_requests(self.endpoint_name)


class ImportedTritonEndpoint(Construct, EndpointReference):
    """An endpoint deployed elsewhere (another app, another team), by name: ``grant_invoke`` and the metrics.

    Build one with ``TritonSageMakerEndpoint.from_endpoint_name``.
    """

    def __init__(self, scope: Construct, id_: str, *, endpoint_name: str, variant_name: str = "AllTraffic") -> None:
        super().__init__(scope, id_)
        self.endpoint_name = endpoint_name
        self.variant_name = variant_name
        self.endpoint_arn = endpoint_arn(self, endpoint_name)
        self.metrics = EndpointMetrics(endpoint_name, variant_name)
