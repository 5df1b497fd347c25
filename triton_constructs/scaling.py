"""Auto-scaling of one endpoint variant: invocations per instance and GPU utilization."""
from __future__ import annotations

from typing import Optional

import aws_cdk as cdk
from aws_cdk import (aws_applicationautoscaling as autoscaling, aws_cloudwatch as cloudwatch, aws_iam as iam,
                     aws_kms as kms, aws_lambda as lambda_)
from constructs import Construct

from deployment_spec.facts import instances
from deployment_spec.sections.asynchronous import Asynchronous
from deployment_spec.sections.scaling import DEFAULT_GPU_TARGET, Scaling
from triton_constructs.async_scaling import backlog_metric, scale_out_from_zero
from triton_constructs.endpoint import TritonEndpoint
from triton_constructs.network import FunctionPlacement
from triton_constructs.scaling_handover import ScalingHandover

SERVICE_LINKED_ROLE = ("aws-service-role/sagemaker.application-autoscaling.amazonaws.com/"
                       "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint")


class VariantScaling(Construct):
    """One scalable target for an endpoint variant, with every target-tracking policy on it.

    Policies: ``SageMakerVariantInvocationsPerInstance`` (target from the spec:
    max RPS per instance x 60 x safety factor) or
    ``SageMakerVariantConcurrentRequestsPerModelHighResolution``, ``GPUUtilization`` on GPU types
    (per-GPU target x GPUs, because the metric sums over GPUs), and
    ``CPUUtilization`` when the spec sets a CPU target (per-vCPU target x vCPUs). Scheduled actions
    change the bounds (``Scaling.schedules``).
    The target depends on the endpoint: the variant must exist before it can
    be registered.

    Args:
        scope: Parent construct.
        id_: Construct ID.
        endpoint: The endpoint whose variant scales.
        scaling: Bounds, targets and cooldowns (``sagemaker_rules.endpoint_problems`` has checked them
            against the instance type and the initial count).
        log_key: Encrypts the scaling handover function's log group. Defaults to Logs' own encryption.
        asynchronous: The endpoint serves asynchronously: the load policy tracks the queue per instance
            (``backlog_per_instance``), a step policy scales out from zero (``async_scaling``), and GPU utilization
            is tracked only where ``gpu_utilization_target`` is set (at zero instances it has no data). Defaults
            to none.
        variant: The variant of ``endpoint`` that scales (a weighted variant, or the shadow: SageMaker's shadow-test
            guide advises autoscaling the shadow like production before promoting it). Defaults to the first
            production variant.
        handover_function: The scaling handover function of another variant of this endpoint, to share. Defaults to
            a function of its own.

    Attributes:
        target: The ``ScalableTarget``.
        gpu_target: The GPUUtilization target value, or None on CPU instance types.
        from_zero: The alarm that adds the first instance to an asynchronous endpoint at zero, or None.
    """

    def __init__(self, scope: Construct, id_: str, *, endpoint: TritonEndpoint, scaling: Scaling,
                 log_key: Optional[kms.IKey] = None, placement: Optional[FunctionPlacement] = None,
                 asynchronous: Optional[Asynchronous] = None, variant: Optional[str] = None,
                 handover_function: Optional[lambda_.IFunction] = None) -> None:
        super().__init__(scope, id_)
        served = endpoint.variants[variant or endpoint.variant_name]
        itype = served.instance
        if itype is None:
            raise ValueError(f"unknown instance type {served.instance_type!r}: check it with sagemaker_rules first")
        # The service-linked role Application Auto Scaling creates on first use holds exactly the SageMaker
        # permissions it needs; without it the L2 would create an empty role of its own.
        service_linked_role = iam.Role.from_role_arn(self, "ServiceLinkedRole", cdk.Stack.of(self).format_arn(
            service="iam", region="", resource="role", resource_name=SERVICE_LINKED_ROLE), mutable=False)
        self.target = autoscaling.ScalableTarget(
            self, "Target", service_namespace=autoscaling.ServiceNamespace.SAGEMAKER, role=service_linked_role,
            resource_id=f"endpoint/{served.endpoint_name}/variant/{served.variant_name}",
            scalable_dimension="sagemaker:variant:DesiredInstanceCount",
            min_capacity=scaling.min_instances, max_capacity=scaling.max_instances)
        # Ordered after the endpoint through the handover's After resource (below).
        scale_in = cdk.Duration.seconds(scaling.scale_in_cooldown_s)
        scale_out = cdk.Duration.seconds(scaling.scale_out_cooldown_s)

        def track(id_: str, target_value: float, *, predefined: Optional[autoscaling.PredefinedMetric] = None,
                  metric_name: Optional[str] = None,
                  custom: Optional[cloudwatch.Metric] = None) -> autoscaling.TargetTrackingScalingPolicy:
            if metric_name:
                custom = served.metrics.instance(metric_name, unit=cloudwatch.Unit.PERCENT)
            return self.target.scale_to_track_metric(id_, target_value=target_value, predefined_metric=predefined,
                                                     custom_metric=custom, scale_in_cooldown=scale_in,
                                                     scale_out_cooldown=scale_out)

        invocations = scaling.invocations_per_instance_target()
        policies = []
        if invocations is not None:
            policies.append(track("Invocations", invocations,
                                  predefined=autoscaling.PredefinedMetric.SAGEMAKER_VARIANT_INVOCATIONS_PER_INSTANCE))
        if asynchronous is not None:
            policies.append(track("Backlog", asynchronous.backlog_target, custom=backlog_metric(served.metrics)))
        self.gpu_target: Optional[float] = None
        if itype.is_gpu and (asynchronous is None or scaling.gpu_utilization_target is not None):
            self.gpu_target = (scaling.gpu_utilization_target or DEFAULT_GPU_TARGET) * itype.gpu_count
            policies.append(track("GpuUtilization", self.gpu_target, metric_name="GPUUtilization"))
        if scaling.concurrent_requests_per_model is not None:
            policies.append(track(
                "Concurrency", scaling.concurrent_requests_per_model,
                predefined=autoscaling.PredefinedMetric.SAGEMAKER_VARIANT_CONCURRENT_REQUESTS_PER_MODEL_HIGH_RESOLUTION))
        for schedule in scaling.schedules:
            self.target.scale_on_schedule(
                f"Schedule-{schedule.name}", schedule=autoscaling.Schedule.expression(schedule.schedule),
                time_zone=cdk.TimeZone.of(schedule.time_zone), min_capacity=schedule.min_instances,
                max_capacity=schedule.max_instances)
        if scaling.cpu_utilization_target is not None:
            policies.append(track("CpuUtilization", scaling.cpu_utilization_target * itype.vcpus,
                                  metric_name="CPUUtilization"))
        self.from_zero = scale_out_from_zero(
            self, target=self.target, metrics=served.metrics, cooldown=scale_out,
            instance_types=served.instance_types) if asynchronous is not None and _reaches_zero(scaling) else None
        # An instance-type change of this variant needs it deregistered around the endpoint update.
        self.handover = ScalingHandover(self, "Handover", endpoint=endpoint, target=self.target,
                                        min_capacity=scaling.min_instances, max_capacity=scaling.max_instances,
                                        policies=policies, log_key=log_key, placement=placement,
                                        variant=served.variant_name, function=handover_function)


def _reaches_zero(scaling: Scaling) -> bool:
    """The bounds let the variant reach zero instances (its minimum, or a schedule's)."""
    return scaling.min_instances == 0 or any(s.min_instances == 0 for s in scaling.schedules)
