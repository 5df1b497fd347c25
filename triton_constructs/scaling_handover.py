"""Lets a scaled variant change its instance type in one `cdk deploy` (handlers/scaling_handover.py)."""
from __future__ import annotations

import json
from typing import Any, Sequence

import aws_cdk as cdk
from aws_cdk import aws_applicationautoscaling as autoscaling, aws_iam as iam, aws_kms as kms, aws_lambda as lambda_
from constructs import Construct

from triton_constructs import checkov
from triton_constructs import endpoint_reference
from triton_constructs.custom_resource import custom_resource_function
from triton_constructs.network import FunctionPlacement
from triton_constructs.escape_hatch import default_child
from triton_constructs.endpoint import TritonEndpoint
from triton_constructs.nag import acknowledge, acknowledge_wildcard

RESOURCE_TYPE = "Custom::TritonScalingHandover"
AAS_SERVICE = "sagemaker.application-autoscaling.amazonaws.com"


class ScalingHandover(Construct):
    """Deregisters the variant before an instance-type change and registers it again after.

    SageMaker refuses to change the instance type of a variant that Application Auto Scaling
    manages (https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-scaling-update.html). Two
    custom resources carry the desired instance type and the scaling definition: ``Before`` (the
    endpoint depends on it) and ``After`` (after the endpoint; the scalable target depends on it).
    Their properties change only with the instance type, the scaling definition or the endpoint's variant
    names, so other updates never call them; a rollback calls them in reverse and restores the old registration.
    SageMaker refuses as well to remove a variant that is a scaling target (the same page: deregister before
    "removing a production variant that has auto scaling configured"), and CloudFormation deletes a removed
    variant's scalable target only after the endpoint update: so ``Before`` also deregisters the endpoint's
    targets whose variant the new configuration lacks (``Variants``), e.g. a shadow or an A/B candidate removed.

    Args:
        scope: Parent construct.
        id_: Construct ID.
        endpoint: The endpoint whose variant scales.
        target: The variant's ``ScalableTarget`` (ordered after ``After``).
        min_capacity: The target's minimum.
        max_capacity: The target's maximum.
        policies: The target-tracking policies on the target (re-put under the same names).
        log_key: Encrypts the handler's log group. Defaults to CloudWatch Logs' own encryption.
        variant: The variant that scales. Defaults to the endpoint's first production variant.
        function: The handover function of another variant of this endpoint, to share (its role covers the
            whole endpoint). Defaults to a function of its own.

    Attributes:
        function: The handler's Lambda function.
    """

    def __init__(self, scope: Construct, id_: str, *, endpoint: TritonEndpoint, target: autoscaling.ScalableTarget,
                 min_capacity: int, max_capacity: int,
                 policies: Sequence[autoscaling.TargetTrackingScalingPolicy],
                 log_key: kms.IKey | None = None, placement: FunctionPlacement | None = None,
                 variant: str | None = None, function: lambda_.IFunction | None = None) -> None:
        super().__init__(scope, id_)
        stack = cdk.Stack.of(self)
        name = endpoint.endpoint_name
        served = endpoint.variants[variant or endpoint.variant_name]
        resource_id = f"endpoint/{name}/variant/{served.variant_name}"
        self.function: lambda_.IFunction = function or self._function(stack, name, log_key, placement)
        cfn = [default_child(p, autoscaling.CfnScalingPolicy) for p in policies]
        definition = [{"PolicyName": c.policy_name,
                       "Configuration": _pascal(stack.resolve(c.target_tracking_scaling_policy_configuration))}
                      for c in cfn]
        # Deregistering the target deletes its scheduled actions too; the handover puts them back with it.
        scheduled = _pascal(stack.resolve(default_child(target, autoscaling.CfnScalableTarget).scheduled_actions)) or []
        props = {"ResourceId": resource_id, "EndpointName": name, "VariantName": served.variant_name,
                 "InstanceType": ",".join(served.instance_types), "MinCapacity": str(min_capacity),
                 "MaxCapacity": str(max_capacity), "Policies": json.dumps(definition, sort_keys=True),
                 "ScheduledActions": json.dumps(scheduled, sort_keys=True),
                 "Variants": ",".join(endpoint.variants)}
        self.before = cdk.CustomResource(self, "Before", service_token=self.function.function_arn,
                                         resource_type=RESOURCE_TYPE, properties={**props, "Phase": "before"},
                                         service_timeout=cdk.Duration.minutes(3))
        self.after = cdk.CustomResource(self, "After", service_token=self.function.function_arn,
                                        resource_type=RESOURCE_TYPE, properties={**props, "Phase": "after"},
                                        service_timeout=cdk.Duration.minutes(3))
        endpoint.resource.node.add_dependency(self.before)
        self.after.node.add_dependency(endpoint.resource)
        target.node.add_dependency(self.after)

    def _function(self, stack: cdk.Stack, endpoint_name: str, log_key: kms.IKey | None,
                  placement: FunctionPlacement | None) -> lambda_.Function:
        function, role = custom_resource_function(
            self, id_prefix="", handler="scaling_handover.handler", memory_size=128,
            role_description=f"Hands {endpoint_name}'s auto-scaling over around instance-type changes",
            description="Deregisters / registers a SageMaker variant's auto-scaling around an instance-type change",
            reserved_concurrency=2,  # Before and After; CloudFormation runs them one after the other
            timeout=cdk.Duration.minutes(2), log_key=log_key, placement=placement)
        endpoint_arn = endpoint_reference.endpoint_arn(self, endpoint_name)
        # RegisterScalableTarget checks the variant with the caller's DescribeEndpoint and
        # UpdateEndpointWeightsAndCapacities (Application Auto Scaling, "Permissions for SageMaker AI").
        role.add_to_policy(iam.PolicyStatement(
            actions=["sagemaker:DescribeEndpoint", "sagemaker:UpdateEndpointWeightsAndCapacities"],
            resources=[endpoint_arn]))
        configs = stack.format_arn(service="sagemaker", resource="endpoint-config", resource_name="*")
        role.add_to_policy(iam.PolicyStatement(actions=["sagemaker:DescribeEndpointConfig"], resources=[configs]))
        acknowledge_wildcard(role, self, configs,
                    "Reads the endpoint's current configuration, whose name CloudFormation generates; "
                    "DescribeEndpointConfig only reads.")
        alarms = stack.format_arn(service="cloudwatch", resource="alarm", arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
                                  resource_name=f"TargetTracking-endpoint/{endpoint_name}/*")
        # Target-tracking policies create and delete their alarms with the caller's permissions.
        role.add_to_policy(iam.PolicyStatement(
            actions=["cloudwatch:DescribeAlarms", "cloudwatch:PutMetricAlarm", "cloudwatch:DeleteAlarms"],
            resources=[alarms]))
        acknowledge_wildcard(role, self, alarms,
                    "Only the alarms Application Auto Scaling names for this endpoint's target-tracking policies.")
        role.add_to_policy(iam.PolicyStatement(
            actions=["application-autoscaling:DescribeScalableTargets", "application-autoscaling:RegisterScalableTarget",
                     "application-autoscaling:DeregisterScalableTarget", "application-autoscaling:PutScalingPolicy",
                     "application-autoscaling:PutScheduledAction"],
            resources=["*"]))
        unscoped = ("Application Auto Scaling scalable targets get their ARNs only when registered, so these calls "
                    "cannot name the variant's target in advance; the handler passes only this variant's ResourceId.")
        acknowledge(role, "AwsSolutions-IAM5[Resource::*]", unscoped)
        checkov.skip(role.node.find_child("DefaultPolicy"), "CKV_AWS_111", unscoped)
        return function


def _pascal(value: Any) -> Any:
    """The resolved L1 struct (camelCase keys) in the template's and the API's PascalCase."""
    if isinstance(value, dict):
        return {key[:1].upper() + key[1:]: _pascal(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_pascal(item) for item in value]
    return value
