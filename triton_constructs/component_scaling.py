"""Auto-scaling of one inference component's copy count, and the way back from zero copies."""
from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import (aws_applicationautoscaling as autoscaling, aws_cloudwatch as cloudwatch,
                     aws_cloudwatch_actions as actions, aws_iam as iam, aws_sagemaker as sagemaker)
from constructs import Construct

from deployment_spec.sections.components import WAKE_COOLDOWN_S, CopyScaling
from triton_constructs.metrics import INVOCATION_NAMESPACE, ONE_MINUTE
from triton_constructs.scaling import SERVICE_LINKED_ROLE

# https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-auto-scaling-zero-instances.html
COPY_DIMENSION = "sagemaker:inference-component:DesiredCopyCount"
NO_CAPACITY_METRIC = "NoCapacityInvocationFailures"
# The predefined metric of each per-copy CloudWatch metric (Application Auto Scaling MetricType).
PER_COPY_METRICS = {
    "InvocationsPerCopy": autoscaling.PredefinedMetric.SAGEMAKER_INFERENCE_COMPONENT_INVOCATIONS_PER_COPY,
    "ConcurrentRequestsPerCopy":
        autoscaling.PredefinedMetric.SAGEMAKER_INFERENCE_COMPONENT_CONCURRENT_REQUESTS_PER_COPY_HIGH_RESOLUTION,
}


def no_capacity_metric(component_name: str) -> cloudwatch.Metric:
    """Requests that found no copy to serve them (AWS/SageMaker, dimension InferenceComponentName, per minute)."""
    return cloudwatch.Metric(namespace=INVOCATION_NAMESPACE, metric_name=NO_CAPACITY_METRIC, statistic="Sum",
                             dimensions_map={"InferenceComponentName": component_name}, period=ONE_MINUTE)


class ComponentScaling(Construct):
    """One scalable target per inference component, a target-tracking policy on it and, at zero, a wake-up.

    The target is ``inference-component/<name>`` on ``sagemaker:inference-component:DesiredCopyCount``
    (Application Auto Scaling ``RegisterScalableTarget``: the minimum may be 0 for SageMaker inference
    components). The policy tracks one predefined per-copy metric (``MetricType``
    ``SageMakerInferenceComponentInvocationsPerCopy`` or
    ``SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution``). Target tracking cannot leave
    zero copies (no copy, no per-copy metric), so with ``min_copies`` 0 the documented pattern is added
    (DG endpoint-auto-scaling-zero-instances): a step scaling policy (``ChangeInCapacity`` +1 at a metric
    interval lower bound of 0, ``Maximum`` aggregation, 60 s cooldown) run by an alarm on
    ``NoCapacityInvocationFailures`` (AWS/SageMaker, ``InferenceComponentName``, Sum over 60 s, one
    period). The page's example compares with ``GreaterThanThreshold`` 1, which needs two refused requests
    in a minute; this alarm uses ``GreaterThanOrEqualToThreshold`` 1, so the first refused request wakes it.

    Args:
        scope: Parent construct.
        id_: Construct ID.
        component: The ``CfnInferenceComponent`` (the target is registered after it exists).
        component_name: Its ``InferenceComponentName``.
        scaling: Bounds, target and cooldowns.

    Attributes:
        target: The ``ScalableTarget``.
        wake_up: The step scaling action that adds a copy from zero, or None when ``min_copies`` > 0.
        no_capacity_alarm: The alarm that runs it, or None.
    """

    def __init__(self, scope: Construct, id_: str, *, component: sagemaker.CfnInferenceComponent,
                 component_name: str, scaling: CopyScaling) -> None:
        super().__init__(scope, id_)
        # The service-linked role's managed policy (AWSApplicationAutoscalingSageMakerEndpointPolicy) allows
        # sagemaker:DescribeInferenceComponent and sagemaker:UpdateInferenceComponentRuntimeConfig
        # (https://docs.aws.amazon.com/aws-managed-policy/latest/reference/AWSApplicationAutoscalingSageMakerEndpointPolicy.html).
        service_linked_role = iam.Role.from_role_arn(self, "ServiceLinkedRole", cdk.Stack.of(self).format_arn(
            service="iam", region="", resource="role", resource_name=SERVICE_LINKED_ROLE), mutable=False)
        self.target = autoscaling.ScalableTarget(
            self, "Target", service_namespace=autoscaling.ServiceNamespace.SAGEMAKER, role=service_linked_role,
            resource_id=f"inference-component/{component_name}", scalable_dimension=COPY_DIMENSION,
            min_capacity=scaling.min_copies, max_capacity=scaling.max_copies)
        self.target.node.add_dependency(component)
        name, value = scaling.per_copy_target
        metric = PER_COPY_METRICS[name]
        self.target.scale_to_track_metric(
            "PerCopy", target_value=value, predefined_metric=metric,
            scale_in_cooldown=cdk.Duration.seconds(scaling.scale_in_cooldown_s),
            scale_out_cooldown=cdk.Duration.seconds(scaling.scale_out_cooldown_s))
        for schedule in scaling.schedules:
            self.target.scale_on_schedule(
                f"Schedule-{schedule.name}", schedule=autoscaling.Schedule.expression(schedule.schedule),
                time_zone=cdk.TimeZone.of(schedule.time_zone), min_capacity=schedule.min_copies,
                max_capacity=schedule.max_copies)
        self.wake_up = None
        self.no_capacity_alarm = None
        if scaling.scales_to_zero:
            self.wake_up = autoscaling.StepScalingAction(
                self, "WakeUp", scaling_target=self.target,
                adjustment_type=autoscaling.AdjustmentType.CHANGE_IN_CAPACITY,
                metric_aggregation_type=autoscaling.MetricAggregationType.MAXIMUM,
                cooldown=cdk.Duration.seconds(WAKE_COOLDOWN_S))
            self.wake_up.add_adjustment(adjustment=1, lower_bound=0)
            self.no_capacity_alarm = cloudwatch.Alarm(
                self, "NoCapacity", metric=no_capacity_metric(component_name), threshold=1, evaluation_periods=1,
                datapoints_to_alarm=1, comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                alarm_description=f"{component_name}: a request found no copy; add one (scale out from zero)")
            self.no_capacity_alarm.add_alarm_action(actions.ApplicationScalingAction(self.wake_up))
