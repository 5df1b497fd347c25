#!/usr/bin/env python3
"""A team's own CDK app in three stacks, as platform teams split them, with the Triton constructs in one.

- ``TeamPlatform``: what the platform team owns: the VPC (private subnets only, with the endpoints the
  library's functions need), the KMS key, the access-log and model buckets, the on-call alarm topic.
- ``TeamInference``: three Triton endpoints on those: a single-model endpoint from ``tritonsm build``, a
  multi-model endpoint from tarballs already in S3, and an inference-components endpoint.
- ``TeamCallers``: the application's function, allowed to invoke each, and an alarm on an endpoint that
  another app deployed (imported by name).

Nothing comes from this repository's YAML spec or stacks: only the construct library (``pip install
triton-sagemaker-cdk``; no torch). Synthesize with

    cdk synth -c manifest=PATH/TO/assets/manifest.json -c archive_bucket=BUCKET

``manifest``: what ``tritonsm build`` wrote (default: this repository's assets/manifest.json, made by
``make``); ``archive_bucket``: the bucket holding the tarballs the team uploaded itself.
"""
from __future__ import annotations

import pathlib

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch, aws_cloudwatch_actions as cw_actions, aws_ec2 as ec2
from aws_cdk import aws_iam as iam, aws_kms as kms
from aws_cdk import aws_lambda as lambda_, aws_logs as logs, aws_s3 as s3, aws_sns as sns
from cdk_nag import AwsSolutionsChecks
from constructs import Construct, IConstruct

from triton_constructs import (Alarms, ComponentSpec, CopyScaling, Deployment, ModelArchive, ModelRepositories,
                               NetworkProps, Scaling, ScheduledCopies, ScheduledScaling, TritonComponentsEndpoint,
                               TritonSageMakerEndpoint, control_tower, security_hub)

HERE = pathlib.Path(__file__).resolve().parent
CALLER_CODE = """
import json, os, boto3
runtime = boto3.client("sagemaker-runtime")
def handler(event, context):
    answer = runtime.invoke_endpoint(EndpointName=os.environ["CLASSIFIER"], ContentType="application/json",
                                     Body=json.dumps(event))
    return json.loads(answer["Body"].read())
"""


def cfn(construct: IConstruct) -> cdk.CfnResource:
    """The construct's CloudFormation resource (its default child), typed for the escape hatch."""
    resource = construct.node.default_child
    assert isinstance(resource, cdk.CfnResource), construct.node.path
    return resource


def skip_checkov(construct: IConstruct, *skips: tuple[str, str]) -> None:
    cfn(construct).add_metadata("checkov", {"skip": [{"id": i, "comment": c} for i, c in skips]})


class TeamPlatform(cdk.Stack):
    """The platform team's stack: network, key, buckets, alarm topic."""

    def __init__(self, scope: Construct, id_: str, **kwargs) -> None:
        super().__init__(scope, id_, **kwargs)
        self.key = kms.Key(self, "TeamKey", enable_key_rotation=True, description="The team's data key")
        control_tower.deny_grants_for_non_aws_resources(self.key)  # CT.KMS.PR.3
        self.vpc = ec2.Vpc(self, "Vpc", max_azs=2, nat_gateways=0, subnet_configuration=[
            ec2.SubnetConfiguration(name="private", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)],
            gateway_endpoints={"S3": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.S3)})
        # What the library's functions call from the VPC without a NAT (NetworkProps.functions_in_vpc).
        for name, service in (("SageMakerApi", ec2.InterfaceVpcEndpointAwsService.SAGEMAKER_API),
                              ("AutoScaling", ec2.InterfaceVpcEndpointAwsService.APPLICATION_AUTOSCALING)):
            endpoint = self.vpc.add_interface_endpoint(name, service=service)
            cdk.Validations.of(endpoint).acknowledge(cdk.Acknowledgment(
                id="AwsSolutions-EC23", reason="HTTPS from the VPC's own CIDR block only (CDK's endpoint default)"))
        self.access_logs = s3.Bucket(self, "AccessLogs", encryption=s3.BucketEncryption.S3_MANAGED, enforce_ssl=True,
                                     versioned=True, block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
                                     object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
                                     lifecycle_rules=[s3.LifecycleRule(expiration=cdk.Duration.days(365))])
        cdk.Validations.of(self.access_logs).acknowledge(cdk.Acknowledgment(
            id="AwsSolutions-S1", reason="The access-log bucket itself; logging it would loop."))
        skip_checkov(self.access_logs,
                     ("CKV_AWS_18", "The access-log bucket itself; logging its own access would loop."))
        control_tower.acknowledge(self.access_logs, control_tower.BUCKET_LOGGING, "the access-log bucket itself")
        control_tower.acknowledge(self.access_logs, control_tower.BUCKET_SSE_KMS,
                                  "S3 delivers server access logs only to an SSE-S3 bucket")
        self.vpc.add_flow_log("FlowLogs", destination=ec2.FlowLogDestination.to_s3(self.access_logs, "vpc-flow-logs/"))
        self.models = s3.Bucket(self, "Models", encryption_key=self.key, enforce_ssl=True, versioned=True,
                                block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
                                server_access_logs_bucket=self.access_logs,
                                # Old versions go after 90 days (CT.S3.PR.3 and PR.6: versioning with a lifecycle).
                                lifecycle_rules=[s3.LifecycleRule(noncurrent_version_expiration=cdk.Duration.days(90))])
        for bucket in (self.access_logs, self.models):
            control_tower.bucket_events(bucket, object_lock=False)  # CT.S3.PR.4; CT.S3.PR.9 acknowledged
        self.on_call = sns.Topic(self, "OnCall", master_key=self.key, enforce_ssl=True, display_name="ML on-call")
        # CloudWatch publishes the endpoints' alarms to the encrypted topic with the team's key.
        self.key.add_to_resource_policy(iam.PolicyStatement(
            principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
            actions=["kms:Decrypt", "kms:GenerateDataKey*"], resources=["*"],
            conditions={"StringEquals": {"aws:SourceAccount": cdk.Aws.ACCOUNT_ID}}))


class TeamInference(cdk.Stack):
    """The endpoints, on the platform's network, key and bucket."""

    def __init__(self, scope: Construct, id_: str, *, platform: TeamPlatform, manifest: str, archive_bucket: str,
                 **kwargs) -> None:
        super().__init__(scope, id_, **kwargs)
        network = NetworkProps(vpc=platform.vpc, functions_in_vpc=True)
        alarms = Alarms(topic=platform.on_call)  # every endpoint alarm has an action (CT.CLOUDWATCH.PR.1)
        # 1. A single-model endpoint from `tritonsm build`: the ensemble (tokenizer + BERT), in the VPC.
        self.classifier = TritonSageMakerEndpoint(
            self, "Classifier", models=ModelRepositories.from_manifest(manifest, ["text-classifier"]),
            instance_type="ml.g5.xlarge", bucket=platform.models, encryption_key=platform.key, network=network,
            initial_instances=2, alarms=alarms, deployment=Deployment(),
            # L4 instances when SageMaker finds no A10G (the ONNX models run on both), and a third instance
            # through the working day.
            fallback_instance_types=("ml.g6.xlarge",),
            scaling=Scaling(min_instances=2, max_instances=4, max_rps_per_instance=30, schedules=(
                ScheduledScaling(name="workday", schedule="cron(0 7 ? * MON-FRI *)", time_zone="Europe/Berlin",
                                 min_instances=3),
                ScheduledScaling(name="evening", schedule="cron(0 19 ? * MON-FRI *)", time_zone="Europe/Berlin",
                                 min_instances=2))))
        # 2. A multi-model endpoint from tarballs the team uploaded itself, read where they are.
        self.vision = TritonSageMakerEndpoint(
            self, "Vision", multi_model=True, instance_type="ml.g5.xlarge", encryption_key=platform.key,
            network=network, alarms=alarms, deployment=Deployment(),
            models=ModelRepositories.from_archives([
                ModelArchive.from_s3(f"s3://{archive_bucket}/vision/resnet50-v3.tar.gz", ["resnet50"]),
                ModelArchive.from_s3(f"s3://{archive_bucket}/vision/convnext-v1.tar.gz", ["convnext"])]),
            scaling=Scaling(max_instances=4, max_rps_per_instance=40))
        # 3. Two models sharing one endpoint as inference components, each with its own copies.
        self.shared = TritonComponentsEndpoint(
            self, "Shared", instance_type="ml.g5.12xlarge", bucket=platform.models, encryption_key=platform.key,
            network=network, storage_name="shared",
            models=ModelRepositories.from_manifest(manifest, ["resnet50", "text-classifier"]),
            components={"resnet50": ComponentSpec(copies=2, scaling=CopyScaling(
                min_copies=1, max_copies=3, concurrent_requests_per_copy=4,
                schedules=(ScheduledCopies(name="nights", schedule="cron(0 22 ? * * *)", max_copies=1),)))},
            alarms=alarms)


class TeamCallers(cdk.Stack):
    """The application: a function that calls the endpoints, and an alarm on one deployed elsewhere."""

    def __init__(self, scope: Construct, id_: str, *, inference: TeamInference, on_call: sns.ITopic,
                 **kwargs) -> None:
        super().__init__(scope, id_, **kwargs)
        caller = self._caller()
        for endpoint in (inference.classifier, inference.vision, inference.shared):
            endpoint.grant_invoke(caller)
        caller.add_environment("CLASSIFIER", inference.classifier.endpoint_name)
        # An endpoint another team deployed: the same grant and metrics, by name.
        search = TritonSageMakerEndpoint.from_endpoint_name(self, "Search", "search-prod")
        search.grant_invoke(caller)
        latency = cloudwatch.Alarm(self, "SearchLatency", threshold=250_000, evaluation_periods=3,
                                   metric=search.metric_model_latency(cloudwatch.MetricOptions(
                                       statistic="p99", period=cdk.Duration.minutes(5))),
                                   alarm_description="search-prod p99 model latency at or above 250 ms")
        latency.add_alarm_action(cw_actions.SnsAction(on_call))  # CT.CLOUDWATCH.PR.1

    def _caller(self) -> lambda_.Function:
        """The team's function, with its own role and log group."""
        log_group = logs.LogGroup(self, "CallerLogs", retention=logs.RetentionDays.ONE_YEAR)  # CT.CLOUDWATCH.PR.2
        role = iam.Role(self, "CallerRole", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
        role.add_to_policy(iam.PolicyStatement(actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                                               resources=[log_group.log_group_arn]))
        function = lambda_.Function(self, "Caller", runtime=lambda_.Runtime.PYTHON_3_14, handler="index.handler",
                                    code=lambda_.Code.from_inline(CALLER_CODE), role=role, log_group=log_group,
                                    reserved_concurrent_executions=10, timeout=cdk.Duration.seconds(30))
        skip_checkov(function,
                     ("CKV_AWS_116", "Invoked synchronously by the team's API; the caller sees errors, nothing to replay"),
                     ("CKV_AWS_117", "Calls only the SageMaker runtime API, over the internet"),
                     ("CKV_AWS_173", "Its one variable is an endpoint name, not a secret"))
        # cfn-lint W3005: the role is already ordered by the Role reference; depend on its policy only.
        policy = cfn(role.node.find_child("DefaultPolicy"))
        cfn(function).add_override("DependsOn", [cdk.Stack.of(self).get_logical_id(policy)])
        skip_checkov(log_group, ("CKV_AWS_158", (
            "The function's own log, kept a year with CloudWatch Logs' default encryption; it holds no payloads")))
        # The team's own choices for its own function, where an account enables these controls: a VPC with a
        # sagemaker.runtime interface endpoint, and a key of its own for the log.
        control_tower.acknowledge(function, control_tower.LAMBDA_IN_VPC,
                                  "calls the SageMaker runtime over the internet; no VPC needed for that")
        control_tower.acknowledge(log_group, control_tower.LOG_ENCRYPTED,
                                  "CloudWatch Logs' default encryption; the log holds no payloads")
        return function


app = cdk.App()
# Environment-agnostic stacks (no account or region): one template for every account, zones from Fn::GetAZs.
platform = TeamPlatform(app, "TeamPlatform")
inference = TeamInference(
    app, "TeamInference", platform=platform,
    manifest=app.node.try_get_context("manifest") or str(HERE.parents[1] / "assets" / "manifest.json"),
    archive_bucket=app.node.try_get_context("archive_bucket") or "team-model-archive")
TeamCallers(app, "TeamCallers", inference=inference, on_call=platform.on_call)
# cdk-nag, AWS Control Tower's proactive controls (cfn-guard rules) and Security Hub's SageMaker controls.
cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app), control_tower.validator(), security_hub.checks())
app.synth()
