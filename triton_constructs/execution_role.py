"""The IAM role a Triton model runs as: its own objects, its own key, one image repository."""
from __future__ import annotations

from typing import Optional, Sequence

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch, aws_iam as iam, aws_kms as kms, aws_logs as logs, aws_s3 as s3
from constructs import Construct

from triton_constructs import checkov
from triton_constructs.image import TritonImage
from triton_constructs.metrics import INSTANCE_NAMESPACE as METRIC_NAMESPACE
from triton_constructs.nag import acknowledge, acknowledge_wildcard


class TritonExecutionRole(Construct):
    """A least-privilege SageMaker execution role for one endpoint's model.

    It may read only the endpoint's prefix of the model bucket and decrypt with
    the bucket's key (through S3), pull only from the Triton image repository,
    publish metrics only into the endpoint metrics namespace, and (once
    granted) write only its endpoint's log group and read only its rollback
    alarms. No managed policies.

    Args:
        scope: Parent construct.
        id_: Construct ID.
        image: The Triton image the model runs.
        bucket: The model bucket.
        key: The bucket's KMS key.
        model_prefix: The endpoint's key prefix (ending in '/'); every tarball version lives under it.
        capture_prefix: Where data capture writes. Defaults to no write access at all.
        capture_bucket: The bucket data capture writes to. Defaults to ``bucket``.
        vpc: Whether the model runs in a VPC (adds the network-interface permissions SageMaker needs).
            Defaults to False.

    Attributes:
        role: The IAM role (pass it to ``TritonModel``).
    """

    def __init__(self, scope: Construct, id_: str, *, image: TritonImage, bucket: s3.IBucket, key: kms.IKey,
                 model_prefix: str, capture_prefix: Optional[str] = None,
                 capture_bucket: Optional[s3.IBucket] = None, vpc: bool = False) -> None:
        super().__init__(scope, id_)
        self.role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
                             description="Runs one Triton model on SageMaker (least privilege)")
        via_s3 = {"StringEquals": {"kms:ViaService": f"s3.{cdk.Aws.REGION}.{cdk.Aws.URL_SUFFIX}"}}
        models = bucket.arn_for_objects(f"{model_prefix}*")
        self.role.add_to_policy(iam.PolicyStatement(actions=["s3:GetObject"], resources=[models]))
        self.role.add_to_policy(iam.PolicyStatement(actions=["kms:Decrypt"], resources=[key.key_arn],
                                                    conditions=via_s3))
        self.role.add_to_policy(iam.PolicyStatement(
            actions=["ecr:BatchCheckLayerAvailability", "ecr:GetDownloadUrlForLayer", "ecr:BatchGetImage"],
            resources=[image.repository_arn]))
        self.role.add_to_policy(iam.PolicyStatement(actions=["ecr:GetAuthorizationToken"], resources=["*"]))
        self.role.add_to_policy(iam.PolicyStatement(
            actions=["cloudwatch:PutMetricData"], resources=["*"],
            conditions={"StringEquals": {"cloudwatch:namespace": METRIC_NAMESPACE}}))
        wildcard_reasons = [
            "ecr:GetAuthorizationToken has no resource-level permissions (image layers are pulled only from the "
            "Triton repository, by ARN)",
            f"cloudwatch:PutMetricData has no resource-level permissions and is limited to the {METRIC_NAMESPACE} "
            "namespace by condition"]
        acknowledge_wildcard(self.role, self, models, (
            f"The model reads every tarball version under its own prefix {model_prefix} only: multi-model "
            "endpoints load any object there by TargetModel, and an endpoint being updated still needs the "
            "previous version."))
        if capture_prefix is not None:
            captured = (capture_bucket or bucket).arn_for_objects(f"{capture_prefix}*")
            self.role.add_to_policy(iam.PolicyStatement(actions=["s3:PutObject"], resources=[captured]))
            self.role.add_to_policy(iam.PolicyStatement(actions=["kms:GenerateDataKey"],
                                                        resources=[key.key_arn], conditions=via_s3))
            acknowledge_wildcard(self.role, self, captured, (
                f"Data capture writes objects that SageMaker names (by date and hour) under {capture_prefix} only."))
        if vpc:
            self.role.add_to_policy(iam.PolicyStatement(actions=[
                "ec2:CreateNetworkInterface", "ec2:CreateNetworkInterfacePermission", "ec2:DeleteNetworkInterface",
                "ec2:DeleteNetworkInterfacePermission", "ec2:DescribeNetworkInterfaces", "ec2:DescribeVpcs",
                "ec2:DescribeDhcpOptions", "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups"], resources=["*"]))
            wildcard_reasons.append("the EC2 network-interface actions SageMaker uses to attach the model to its VPC "
                                    "name interfaces it creates at deploy time")
            eni = ("The EC2 network-interface actions SageMaker needs to attach the model to its VPC, as the "
                   "SageMaker execution-role documentation lists them: the interfaces get their IDs only at deploy "
                   "time.")
            policy = self.role.node.find_child("DefaultPolicy")
            checkov.skip(policy, "CKV_AWS_111", eni)
            checkov.skip(policy, "CKV_AWS_109", eni + " (CreateNetworkInterfacePermission is the permissions part.)")
        acknowledge(self.role, "AwsSolutions-IAM5[Resource::*]", "; ".join(wildcard_reasons) + ".")

    def grant_logs(self, log_group: logs.ILogGroup) -> None:
        """Lets SageMaker write the endpoint's log group, and only it (streams are named per instance).

        The four actions are the CloudWatch Logs part of the CreateModel execution-role minimum in
        https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-roles.html#sagemaker-roles-createmodel-perms;
        scoped here to the one log group (its ARN ends in ``:*``, which covers its streams).
        """
        self.role.add_to_policy(iam.PolicyStatement(
            actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents"],
            resources=[log_group.log_group_arn]))

    def grant_describe_alarms(self, alarms: Sequence[cloudwatch.IAlarm]) -> None:
        """Lets SageMaker read the auto-rollback alarms of a blue/green deployment (DG deployment guardrails)."""
        self.role.add_to_policy(iam.PolicyStatement(actions=["cloudwatch:DescribeAlarms"],
                                                    resources=[a.alarm_arn for a in alarms]))
