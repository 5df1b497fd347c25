"""What callers get from any Triton endpoint, one this app deploys or one imported by name: the right to
invoke it, and its CloudWatch metrics (with ``cloudwatch.MetricOptions``, as CDK's own resources)."""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Optional, TypeVar

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch, aws_iam as iam
from constructs import Construct

from deployment_spec.parsing.errors import Problem
from deployment_spec.parsing.type_checks import hints_of, type_problems
from triton_constructs import triton_promql
from triton_constructs.metrics import INSTANCE_NAMESPACE, INVOCATION_NAMESPACE, EndpointMetrics
from triton_constructs.props import unknown_arguments


def with_options(metric: cloudwatch.Metric, props: Optional[cloudwatch.MetricOptions]) -> cloudwatch.Metric:
    """``metric`` with what ``props`` sets (period, statistic, label, unit, color, account, region)."""
    if props is None:
        return metric
    return metric.with_(account=props.account, color=props.color, dimensions_map=props.dimensions_map,
                        label=props.label, period=props.period, region=props.region, statistic=props.statistic,
                        unit=props.unit)


Method = TypeVar("Method", bound=Callable[..., cloudwatch.Metric])
# What cloudwatch.MetricOptions takes: a keyword among them given to a metric method belongs in ``props``.
_OPTION_FIELDS = tuple(inspect.signature(cloudwatch.MetricOptions).parameters)


def checked_metric(former: str = "") -> Callable[[Method], Method]:
    """Decorates a ``metric*`` method: a call in a form it does not take raises ``TypeError`` naming the
    argument, the value, what is allowed and the fix, before the value reaches CDK's ``Metric.with_`` (where a
    string in ``props`` ended in ``AttributeError: 'str' object has no attribute 'account'``).

    ``former``: the parameter 0.1.0 took where ``props`` is now (``"statistic"``: 0.1.0's
    ``metric_model_latency("p99")``); the fix then says it moved into ``cloudwatch.MetricOptions``.
    """
    def decorate(method: Method) -> Method:
        signature = inspect.signature(method)

        @functools.wraps(method)
        def checked(self: Any, *args: Any, **kwargs: Any) -> cloudwatch.Metric:
            problems = _unknown_keywords(kwargs, signature)
            if not problems:
                bound = signature.bind(self, *args, **kwargs)
                problems = _argument_problems(method, bound.arguments, former)
            if problems:
                call = f"{type(self).__name__}.{method.__name__}({_arguments_text(args, kwargs)})"
                raise TypeError(f"{call}: " + "; and ".join(map(str, problems)))
            return method(self, *args, **kwargs)

        return checked  # type: ignore[return-value]

    return decorate


def _unknown_keywords(kwargs: dict[str, Any], signature: inspect.Signature) -> list[Problem]:
    """Keywords the method lacks; those of ``cloudwatch.MetricOptions`` (0.1.0's ``metric(name, statistic=...,
    period=...)``) are told to go into ``props``, together."""
    names = [name for name in signature.parameters if name != "self"]
    unknown = [name for name in kwargs if name not in signature.parameters]
    options = [name for name in unknown if name in _OPTION_FIELDS] if "props" in signature.parameters else []
    problems = unknown_arguments([name for name in unknown if name not in options], names, "argument")
    if options:
        fields = ", ".join(f"{name}={_literal(kwargs[name])}" for name in options)
        problems.append(Problem(", ".join(options), "cloudwatch.MetricOptions fields as arguments", ", ".join(names),
                                f"pass props=cloudwatch.MetricOptions({fields})"))
    return problems


def _argument_problems(method: Callable[..., Any], arguments: dict[str, Any], former: str) -> list[Problem]:
    """Each argument against the method's type hints; a string as ``props`` is told how to pass it."""
    hints = hints_of(method)
    problems = [p for name, value in arguments.items() if name != "self" and name in hints
                for p in type_problems(name, value, hints[name])]
    props = arguments.get("props")
    if not isinstance(props, str):
        return problems
    moved = f"the {former} is no longer positional; " if former else ""
    fix = f"{moved}pass props=cloudwatch.MetricOptions({former or 'statistic'}={_literal(props)})"
    return [Problem(p.path, p.got, p.allowed, fix) if p.path == "props" else p for p in problems]


def _arguments_text(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    return ", ".join([_literal(a) for a in args] + [f"{k}={_literal(v)}" for k, v in kwargs.items()])


def _literal(value: Any) -> str:
    """A value as a call shows it: a literal as written, anything else by its type (``Duration(...)``)."""
    return repr(value) if isinstance(value, (str, int, float, bool, type(None))) else f"{type(value).__name__}(...)"


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

    @checked_metric()
    def metric(self, metric_name: str, props: Optional[cloudwatch.MetricOptions] = None, *,
               per_instance: bool = False) -> cloudwatch.Metric:
        """Any metric of the variant, per minute, Average unless ``props`` says otherwise: ``AWS/SageMaker``, or
        ``/aws/sagemaker/Endpoints`` with ``per_instance``."""
        return with_options(self.metrics.metric(
            metric_name, statistic="Average", namespace=INSTANCE_NAMESPACE if per_instance else INVOCATION_NAMESPACE),
            props)

    @checked_metric()
    def metric_invocations(self, props: Optional[cloudwatch.MetricOptions] = None) -> cloudwatch.Metric:
        """Requests per minute (``Invocations``, Sum)."""
        return with_options(self.metrics.invocation("Invocations", "Sum"), props)

    @checked_metric(former="statistic")
    def metric_model_latency(self, props: Optional[cloudwatch.MetricOptions] = None) -> cloudwatch.Metric:
        """Time the container took, in microseconds (``ModelLatency``, Average; e.g. ``statistic="p99"``)."""
        return with_options(self.metrics.invocation("ModelLatency", "Average"), props)

    @checked_metric()
    def metric_errors(self, kind: str = "5XX", props: Optional[cloudwatch.MetricOptions] = None) -> cloudwatch.Metric:
        """``Invocation5XXErrors`` (or ``kind="4XX"``) per minute, Sum."""
        return with_options(self.metrics.invocation(f"Invocation{kind}Errors", "Sum"), props)

    @checked_metric()
    def metric_gpu_utilization(self, props: Optional[cloudwatch.MetricOptions] = None) -> cloudwatch.Metric:
        """GPU utilization in percent, summed over the instance's GPUs (0-100 x GPUs), Average."""
        return with_options(self.metrics.instance("GPUUtilization", unit=cloudwatch.Unit.PERCENT), props)

    @checked_metric()
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
