"""An asynchronous endpoint's scaling on its queue: a backlog target, and the way back from zero instances.

Target tracking on ``ApproximateBacklogSizePerInstance`` keeps the queue per instance near the target, down to the
scalable target's minimum, which may be 0. At zero instances that metric has no instance to divide by, so nothing
would scale out again: SageMaker publishes ``HasBacklogWithoutCapacity`` (1 while requests wait and no instance
runs), and a one-step policy on an alarm on it adds the first instance (developer guide, "Autoscale an
asynchronous endpoint"). CDK's ``StepScalingPolicy`` refuses fewer than two intervals, so the policy is the L1.
"""
from __future__ import annotations

import hashlib
from typing import Sequence

import aws_cdk as cdk
import jsii
from aws_cdk import aws_applicationautoscaling as autoscaling, aws_cloudwatch as cloudwatch
from constructs import Construct

from triton_constructs.metrics import EndpointMetrics


@jsii.implements(cloudwatch.IAlarmAction)
class _PolicyAction:
    """An alarm action that runs an Application Auto Scaling policy, named by its ARN (the L1's ``Ref``)."""

    def __init__(self, policy_arn: str) -> None:
        self._arn = policy_arn

    def bind(self, _scope: Construct, _alarm: cloudwatch.IAlarm) -> cloudwatch.AlarmActionConfig:
        return cloudwatch.AlarmActionConfig(alarm_action_arn=self._arn)


def backlog_metric(metrics: EndpointMetrics) -> cloudwatch.Metric:
    """Queued requests per running instance (Average over a minute)."""
    return metrics.queue("ApproximateBacklogSizePerInstance", "Average")


def scale_out_from_zero(scope: Construct, *, target: autoscaling.ScalableTarget, metrics: EndpointMetrics,
                        cooldown: cdk.Duration, instance_types: Sequence[str]) -> cloudwatch.Alarm:
    """The step policy (+1 instance) and the alarm that runs it: one minute with a backlog and no instance.

    The policy's name carries the instance types: an instance-type change goes through the scaling handover,
    which deregisters the target and with it this policy, so the renamed policy is created anew (a new ARN the
    alarm follows) instead of being left pointing at a deleted one.
    """
    types = hashlib.sha256(",".join(instance_types).encode()).hexdigest()[:8]
    policy = autoscaling.CfnScalingPolicy(
        scope, "ScaleOutFromZero", policy_name=f"{metrics.endpoint_name}-from-zero-{types}",
        policy_type="StepScaling", scaling_target_id=target.scalable_target_id,
        step_scaling_policy_configuration=autoscaling.CfnScalingPolicy.StepScalingPolicyConfigurationProperty(
            adjustment_type="ChangeInCapacity", cooldown=int(cooldown.to_seconds()),
            metric_aggregation_type="Maximum",
            step_adjustments=[autoscaling.CfnScalingPolicy.StepAdjustmentProperty(
                metric_interval_lower_bound=0, scaling_adjustment=1)]))
    alarm = cloudwatch.Alarm(
        scope, "BacklogWithoutCapacity", metric=metrics.queue("HasBacklogWithoutCapacity", "Average"),
        threshold=1, evaluation_periods=1, datapoints_to_alarm=1,
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        alarm_description=f"{metrics.endpoint_name}: requests wait and no instance runs: add the first instance")
    alarm.add_alarm_action(_PolicyAction(policy.ref))
    return alarm
