"""A candidate variant against the incumbent: alarms on the difference, with CloudWatch metric math.

Both variants publish the same invocation metrics under ``AWS/SageMaker`` with their own ``VariantName`` (SageMaker
developer guide, "SageMaker AI endpoint invocation metrics": dimensions EndpointName, VariantName; for a shadow,
"Monitor a shadow test" compares Invocations, ModelLatency, Invocation4XXErrors, Invocation5XXErrors and
InvocationModelErrors of the production and the shadow variant side by side). An alarm on one variant alone cannot
tell a bad candidate from bad traffic; the difference can: traffic both see moves both.
"""
from __future__ import annotations

from typing import Optional, Sequence

from aws_cdk import aws_cloudwatch as cloudwatch, aws_sns as sns
from constructs import Construct

from deployment_spec.sections.variants import Comparison
from triton_constructs.alarms import notify_topic
from triton_constructs.metrics import ONE_MINUTE, EndpointMetrics

# What counts as a failed invocation: the caller's error, SageMaker's, the model container's.
ERROR_METRICS = {"e4": "Invocation4XXErrors", "e5": "Invocation5XXErrors", "em": "InvocationModelErrors"}


def error_rate(metrics: EndpointMetrics, prefix: str = "", label: Optional[str] = None) -> cloudwatch.MathExpression:
    """Failed invocations per 100 invocations of one variant, per minute. Missing counts are 0 (SageMaker publishes
    an error metric only when it has data); a minute without invocations is 0 %, not a division by zero.
    ``prefix`` (lowercase) keeps the metric IDs apart where two rates meet in one expression."""
    using: dict[str, cloudwatch.IMetric] = {f"{prefix}{key}": metrics.invocation(name, "Sum")
                                            for key, name in ERROR_METRICS.items()}
    using[f"{prefix}inv"] = metrics.invocation("Invocations", "Sum")
    failed = " + ".join(f"FILL({prefix}{key}, 0)" for key in ERROR_METRICS)
    invocations = f"FILL({prefix}inv, 0)"
    return cloudwatch.MathExpression(
        expression=f"100 * ({failed}) / IF({invocations} > 0, {invocations}, 1)", using_metrics=using,
        label=label or f"{metrics.variant_name} error rate (%)", period=ONE_MINUTE)


class ComparisonAlarms(Construct):
    """Per candidate: its error rate above the incumbent's by ``error_rate_margin_percent`` points, and its p99
    ``ModelLatency`` above the incumbent's by ``latency_margin_percent``, for ``periods`` one-minute periods.

    The latency alarm compares only minutes where both variants have a p99 (metric math keeps the timestamps the
    two share); a minute without data is not breaching, so an idle candidate stays OK.

    Args:
        scope: Parent construct.
        id_: Construct ID.
        incumbent: The incumbent's metrics (the first production variant).
        candidates: Each candidate's metrics (the later production variants, or the shadow).
        comparison: The margins and the periods.
        topic: Notify this topic on alarm and on OK. Defaults to none.

    Attributes:
        error_rate, latency: The alarms, by candidate variant name.
        all: Every alarm.
    """

    def __init__(self, scope: Construct, id_: str, *, incumbent: EndpointMetrics,
                 candidates: Sequence[EndpointMetrics], comparison: Comparison,
                 topic: Optional[sns.ITopic] = None) -> None:
        super().__init__(scope, id_)
        self.error_rate: dict[str, cloudwatch.Alarm] = {}
        self.latency: dict[str, cloudwatch.Alarm] = {}
        c = comparison
        subject = f"{incumbent.endpoint_name}: candidate {{}} against {incumbent.variant_name}"
        for candidate in candidates:
            name = candidate.variant_name
            self.error_rate[name] = self._alarm(
                f"ErrorRate-{name}", cloudwatch.MathExpression(
                    expression="candidate - incumbent", period=ONE_MINUTE,
                    label=f"{name} error rate minus {incumbent.variant_name}'s (points)",
                    using_metrics={"candidate": error_rate(candidate, "c"), "incumbent": error_rate(incumbent, "i")}),
                c.error_rate_margin_percent, c.periods,
                f"{subject.format(name)}: its share of failed invocations (4XX + 5XX + model errors) more than "
                f"{c.error_rate_margin_percent:g} percentage point(s) above the incumbent's for {c.periods} minute(s)")
            factor = 1 + c.latency_margin_percent / 100
            self.latency[name] = self._alarm(
                f"Latency-{name}", cloudwatch.MathExpression(
                    expression=f"candidate - incumbent * {factor:g}", period=ONE_MINUTE,
                    label=f"{name} p99 ModelLatency above {incumbent.variant_name}'s x {factor:g} (microseconds)",
                    using_metrics={"candidate": candidate.invocation("ModelLatency", "p99"),
                                   "incumbent": incumbent.invocation("ModelLatency", "p99")}),
                0, c.periods,
                f"{subject.format(name)}: its p99 model latency more than {c.latency_margin_percent:g} % above the "
                f"incumbent's for {c.periods} minute(s)")
        self.all: list[cloudwatch.AlarmBase] = [*self.error_rate.values(), *self.latency.values()]
        if topic is not None:
            notify_topic(self.all, topic)

    def _alarm(self, id_: str, metric: cloudwatch.IMetric, threshold: float, periods: int,
               description: str) -> cloudwatch.Alarm:
        return cloudwatch.Alarm(self, id_, metric=metric, threshold=threshold, evaluation_periods=periods,
                                datapoints_to_alarm=periods, alarm_description=description,
                                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING)

