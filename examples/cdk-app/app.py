#!/usr/bin/env python3
"""A team's own CDK app: its VPC, KMS key, bucket and Lambda function, and two Triton endpoints added to it.

Nothing here comes from this repository's YAML spec or its stacks: only the construct library
(``pip install triton-sagemaker-cdk``; no torch). Synthesize with

    cdk synth -c manifest=PATH/TO/assets/manifest.json -c archive_bucket=BUCKET

``manifest``: what ``tritonsm build`` wrote (default: this repository's assets/manifest.json, made by
``make``); ``archive_bucket``: the bucket holding the tarballs the team uploaded itself.
"""
from __future__ import annotations

import pathlib

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2, aws_iam as iam, aws_kms as kms, aws_lambda as lambda_, aws_logs as logs
from aws_cdk import aws_s3 as s3
from cdk_nag import AwsSolutionsChecks
from constructs import Construct

from triton_constructs import (Deployment, ModelArchive, ModelRepositories, NetworkProps, Scaling,
                               TritonSageMakerEndpoint)

HERE = pathlib.Path(__file__).resolve().parent
CALLER_CODE = """
import json, os, boto3
runtime = boto3.client("sagemaker-runtime")
def handler(event, context):
    answer = runtime.invoke_endpoint(EndpointName=os.environ["CLASSIFIER"], ContentType="application/json",
                                     Body=json.dumps(event))
    return json.loads(answer["Body"].read())
"""


class TeamInference(cdk.Stack):
    """The team's stack: what it already had, then the two endpoints."""

    def __init__(self, scope: Construct, id_: str, *, manifest: str, archive_bucket: str, **kwargs) -> None:
        super().__init__(scope, id_, **kwargs)
        # --- What the team already has: a key, a private VPC with an S3 endpoint, a bucket, a function.
        key = kms.Key(self, "TeamKey", enable_key_rotation=True, description="The team's data key")
        vpc = ec2.Vpc(self, "Vpc", max_azs=2, nat_gateways=0, subnet_configuration=[
            ec2.SubnetConfiguration(name="private", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)],
            gateway_endpoints={"S3": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.S3)})
        access_logs = s3.Bucket(self, "AccessLogs", encryption=s3.BucketEncryption.S3_MANAGED, enforce_ssl=True,
                                versioned=True, block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
                                object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED)
        cdk.Validations.of(access_logs).acknowledge(cdk.Acknowledgment(
            id="AwsSolutions-S1", reason="The access-log bucket itself; logging it would loop."))
        access_logs.node.default_child.add_metadata("checkov", {"skip": [
            {"id": "CKV_AWS_18", "comment": "The access-log bucket itself; logging its own access would loop."}]})
        vpc.add_flow_log("FlowLogs", destination=ec2.FlowLogDestination.to_s3(access_logs, "vpc-flow-logs/"))
        bucket = s3.Bucket(self, "TeamBucket", encryption_key=key, enforce_ssl=True, versioned=True,
                           block_public_access=s3.BlockPublicAccess.BLOCK_ALL, server_access_logs_bucket=access_logs)
        caller = self._caller(key)

        # --- 1. A single-model endpoint from `tritonsm build`: the ensemble (tokenizer + BERT), in the VPC.
        network = NetworkProps(vpc=vpc)
        classifier = TritonSageMakerEndpoint(
            self, "Classifier", models=ModelRepositories.from_manifest(manifest, ["text-classifier"]),
            instance_type="ml.g5.xlarge", bucket=bucket, encryption_key=key, network=network, initial_instances=2,
            scaling=Scaling(min_instances=2, max_instances=4, max_rps_per_instance=30), deployment=Deployment())
        # --- 2. A multi-model endpoint from tarballs the team uploaded itself, read where they are.
        vision = TritonSageMakerEndpoint(
            self, "Vision", multi_model=True, instance_type="ml.g5.xlarge", encryption_key=key, network=network,
            models=ModelRepositories.from_archives([
                ModelArchive.from_s3(f"s3://{archive_bucket}/vision/resnet50-v3.tar.gz", ["resnet50"]),
                ModelArchive.from_s3(f"s3://{archive_bucket}/vision/convnext-v1.tar.gz", ["convnext"])]),
            scaling=Scaling(max_instances=4, max_rps_per_instance=40), deployment=Deployment())
        classifier.grant_invoke(caller)
        vision.grant_invoke(caller)
        caller.add_environment("CLASSIFIER", classifier.endpoint_name)

    def _caller(self, key: kms.IKey) -> lambda_.Function:
        """The team's function that calls the classifier, with its own role and encrypted log group."""
        log_group = logs.LogGroup(self, "CallerLogs", retention=logs.RetentionDays.ONE_MONTH)
        role = iam.Role(self, "CallerRole", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
        role.add_to_policy(iam.PolicyStatement(actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                                               resources=[log_group.log_group_arn]))
        function = lambda_.Function(self, "Caller", runtime=lambda_.Runtime.PYTHON_3_14, handler="index.handler",
                                    code=lambda_.Code.from_inline(CALLER_CODE), role=role, log_group=log_group,
                                    reserved_concurrent_executions=10, timeout=cdk.Duration.seconds(30))
        skips = [("CKV_AWS_116", "Invoked synchronously by the team's API; the caller sees errors, nothing to replay"),
                 ("CKV_AWS_117", "Calls only the SageMaker runtime API; the team's VPC has no NAT for it"),
                 ("CKV_AWS_173", "Its one variable is an endpoint name, not a secret")]
        function.node.default_child.add_metadata("checkov", {"skip": [{"id": i, "comment": c} for i, c in skips]})
        # cfn-lint W3005: the role is already ordered by the Role reference; depend on its policy only.
        policy = role.node.find_child("DefaultPolicy").node.default_child
        function.node.default_child.add_override("DependsOn", [cdk.Stack.of(self).get_logical_id(policy)])
        log_group.node.default_child.add_metadata("checkov", {"skip": [{"id": "CKV_AWS_158", "comment": (
            "The function's own log, kept a month with CloudWatch Logs' default encryption; it holds no payloads")}]})
        return function


app = cdk.App()
TeamInference(app, "TeamInference",
              manifest=app.node.try_get_context("manifest") or str(HERE.parents[1] / "assets" / "manifest.json"),
              archive_bucket=app.node.try_get_context("archive_bucket") or "team-model-archive")
cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
app.synth()
