"""The Lambda function behind this app's CloudFormation custom resources: one recipe for all of them.

Each handler lives in ``handlers/`` (one asset for all: they share ``cfn_response.py``); the
function runs as its own role, logs to its own encrypted log group, and is limited in concurrency.
"""
from __future__ import annotations

import pathlib
from typing import Optional

import aws_cdk as cdk
from aws_cdk import aws_iam as iam, aws_kms as kms, aws_lambda as lambda_, aws_logs as logs
from constructs import Construct

from triton_constructs import checkov, control_tower
from triton_constructs.escape_hatch import default_child, find
from triton_constructs.nag import acknowledge
from triton_constructs.network import FunctionPlacement

HANDLER_DIR = pathlib.Path(__file__).parent / "handlers"


def custom_resource_function(scope: Construct, *, id_prefix: str, handler: str, description: str,
                             role_description: str, memory_size: int, timeout: cdk.Duration,
                             reserved_concurrency: int, log_key: Optional[kms.IKey],
                             placement: Optional[FunctionPlacement] = None,
                             role_path: Optional[str] = None) -> tuple[lambda_.Function, iam.Role]:
    """Creates ``<id_prefix>Logs``, ``<id_prefix>Role`` (may write only those logs) and ``<id_prefix>Function``.

    The caller adds the function's other permissions to the returned role. The function depends on
    the role's policy, not only the role: CloudFormation must not invoke it before its permissions exist.
    With ``placement`` it runs in that VPC (``NetworkProps.functions_in_vpc``). ``role_path`` (``/a/b/``) puts
    the role under that IAM path, which a resource policy elsewhere can name by ``aws:PrincipalArn`` (e.g.
    ``model_store.MODEL_WRITERS_PATH``); defaults to ``/``.
    """
    # One year: the shortest retention AWS Control Tower's CT.CLOUDWATCH.PR.2 accepts.
    log_group = logs.LogGroup(scope, f"{id_prefix}Logs", retention=logs.RetentionDays.ONE_YEAR,
                              encryption_key=log_key, removal_policy=cdk.RemovalPolicy.DESTROY)
    if log_key is not None:
        control_tower.acknowledge_imported_key(log_group, log_key)
    role = iam.Role(scope, f"{id_prefix}Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                    description=role_description, path=role_path)
    role.add_to_policy(iam.PolicyStatement(actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                                           resources=[log_group.log_group_arn]))
    function = lambda_.Function(
        scope, f"{id_prefix}Function", runtime=lambda_.Runtime.PYTHON_3_14, architecture=lambda_.Architecture.ARM_64,
        handler=handler, role=role, log_group=log_group, memory_size=memory_size,
        reserved_concurrent_executions=reserved_concurrency, timeout=timeout,
        code=lambda_.Code.from_asset(str(HANDLER_DIR), exclude=["__pycache__", "*.pyc"]), description=description,
        vpc=placement.vpc if placement else None, vpc_subnets=placement.subnets if placement else None,
        security_groups=list(placement.security_groups) if placement else None)
    checkov.skip_custom_resource_function(function)
    if placement is None:
        control_tower.acknowledge(function, control_tower.LAMBDA_IN_VPC, control_tower.NO_VPC_GIVEN)
    if placement is not None:
        _allow_network_interfaces(role)
        # Subnets of a VPC in another stack arrive as imports, which the static rule cannot judge.
        vpc_config = default_child(function, lambda_.CfnFunction).vpc_config
        control_tower.acknowledge_if_imported(function, vpc_config, control_tower.LAMBDA_IN_VPC, (
            "runs in the VPC's subnets, whose IDs this template imports (Fn::ImportValue); the rule's static form "
            "accepts only literal IDs or subnets of the same template, the hook checks the resolved IDs"))
    # Escape hatch: Function depends on its role and the role's policy; the role is already ordered by the
    # Role reference, so keep only the policy (cfn-lint W3005 flags the redundant one).
    policy = find(role, "DefaultPolicy/Resource", iam.CfnPolicy)
    default_child(function, lambda_.CfnFunction).add_override("DependsOn", [cdk.Stack.of(scope).get_logical_id(policy)])
    return function, role


# What a function in a VPC needs to attach its network interfaces: the AWSLambdaVPCAccessExecutionRole
# managed policy's actions (https://docs.aws.amazon.com/lambda/latest/dg/configuration-vpc.html), written
# inline so no AWS managed policy (cdk-nag IAM4) is attached.
_ENI_ACTIONS = ["ec2:CreateNetworkInterface", "ec2:DescribeNetworkInterfaces", "ec2:DescribeSubnets",
                "ec2:DeleteNetworkInterface", "ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses"]


def _allow_network_interfaces(role: iam.Role) -> None:
    role.add_to_policy(iam.PolicyStatement(actions=_ENI_ACTIONS, resources=["*"]))
    reason = ("Lambda attaches the function to its VPC through network interfaces it creates when the function "
              "starts; their IDs do not exist before, and DescribeNetworkInterfaces has no resource-level permission.")
    acknowledge(role, "AwsSolutions-IAM5[Resource::*]", reason)
    policy = find(role, "DefaultPolicy", iam.Policy)
    checkov.skip(policy, "CKV_AWS_111", reason)
