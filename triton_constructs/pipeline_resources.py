"""What the delivery pipeline adds besides CDK Pipelines' own resources: the build cache bucket,
and the cdk-nag acknowledgements for what CDK Pipelines generates."""
from __future__ import annotations

import json

import aws_cdk as cdk
from aws_cdk import aws_iam as iam, aws_s3 as s3, pipelines
from constructs import Construct

from triton_constructs import checkov
from triton_constructs.access_logs import USE_BUCKET_POLICY, access_log_bucket
from triton_constructs.escape_hatch import default_child
from triton_constructs.nag import acknowledge, statement_findings

CACHE_DAYS = 30  # a cache: anything older is re-created by the next build


class BuildCache(Construct):
    """A private, SSL-only, encrypted bucket for CodeBuild's cache (pip wheels, serving runtimes, built models).

    Attributes:
        bucket: The cache bucket; only the GPU build project's role reads and writes it (CodeBuild grants it).
        access_logs: Its server access log bucket.
    """

    def __init__(self, scope: Construct, id_: str) -> None:
        super().__init__(scope, id_)
        self.node.set_context(USE_BUCKET_POLICY, True)
        self.access_logs = access_log_bucket(self, "AccessLogs", logged="the build cache bucket",
                                             removal_policy=cdk.RemovalPolicy.DESTROY, auto_delete_objects=False)
        self.bucket = s3.Bucket(
            self, "Bucket", encryption=s3.BucketEncryption.S3_MANAGED, enforce_ssl=True, versioned=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL, object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            removal_policy=cdk.RemovalPolicy.DESTROY, auto_delete_objects=False,
            lifecycle_rules=[s3.LifecycleRule(expiration=cdk.Duration.days(CACHE_DAYS),
                                              noncurrent_version_expiration=cdk.Duration.days(1))],
            server_access_logs_bucket=self.access_logs, server_access_logs_prefix="build-cache/")


# Why each kind of wildcard in CDK Pipelines' generated policies is as narrow as it gets (first match wins).
_REASONS = (
    ("AsyncSmokeTest", "the staging smoke test of an asynchronous endpoint (stacks.pipeline_stack."
                       "async_smoke_statements): the stage bucket's and key's names are generated in the stage, so "
                       "requests and answers are reachable only under the endpoint's own async/<endpoint>/ prefixes "
                       "of any bucket, the key only through S3, and its stack's outputs by the stack's name"),
    ("sts:AssumeRole", "CDK Pipelines assumes only the CDK bootstrap roles (condition iam:ResourceTag/"
                       "aws-cdk:bootstrap-role in image-publishing, file-publishing, deploy) in the stage accounts"),
    ("log-group:/aws/codebuild/", "the CodeBuild project's own log group (/aws/codebuild/<project>), whose streams "
                                  "are named per build"),
    ("report-group/", "the CodeBuild project's own report groups (<project>-*), created by its builds"),
    ("cloudformation:DescribeStacks", "the self-mutation step runs `cdk deploy` of this pipeline stack, which reads "
                                      "stack status and lists the bootstrap bucket; these lookups take no narrower "
                                      "resource"),
    ("codebuild:StartBuild", "the asset-publishing role starts the pipeline's own asset CodeBuild projects, which "
                             "CDK Pipelines creates with generated names"),
    ("ecr:GetAuthorizationToken", "the GPU build's `tritonsm smoke --image` logs in to the SageMaker image registry; "
                                  "an ECR authorization token takes no resource narrower than *, and the image reads "
                                  "are limited to the sagemaker-tritonserver repository"),
    ("kms:", "the pipeline's artifact KMS keys: this stack's, and the cross-region replication keys CodePipeline makes "
             "in each stage region and references by alias, so IAM sees no key ARN; each key's own policy still "
             "decides who may use it"),
    ("s3:", "object-level access inside the pipeline's own artifact buckets and the build cache bucket, granted by "
            "CDK Pipelines / CodeBuild (grantReadWrite): objects have generated keys"),
)


def acknowledge_pipeline_findings(stack: cdk.Stack, pipeline: pipelines.CodePipeline) -> None:
    """Acknowledges each cdk-nag IAM5 finding of CDK Pipelines' generated policies, one exact finding per call.

    The findings are computed from the policies themselves (like ``nag.wildcard_finding``), so a new
    grant CDK Pipelines adds in an upgrade is not acknowledged silently: its text must match a reason.
    """
    for policy in [c for c in stack.node.find_all() if isinstance(c, iam.CfnPolicy) and cdk.Stack.of(c) is stack]:
        for statement in stack.resolve(policy.policy_document)["Statement"]:
            text = json.dumps(statement)
            reason = next((why for key, why in _REASONS if key in text), None)
            for finding in statement_findings(statement):
                if reason is None:
                    raise ValueError(f"no reason for {finding} in {policy.node.path}: {text}")
                acknowledge(policy, finding, reason)
    for support in pipeline.pipeline.cross_region_support.values():
        # The replication bucket lives in CodePipeline's support stack of each stage region, with no log bucket there.
        acknowledge(default_child(support.replication_bucket, s3.CfnBucket), "AwsSolutions-S1",
                    "CodePipeline's cross-region replication bucket, KMS-encrypted and private; only the pipeline's "
                    "roles use it, and CloudTrail records them")
    # checkov's "write without constraints" on two generated policies; the reasons above (_REASONS) apply.
    reasons = dict(_REASONS)
    for path, why in (("Pipeline/Pipeline/Role/DefaultPolicy", reasons["kms:"]),
                      ("Pipeline/Assets/FileRole/DefaultPolicy", reasons["codebuild:StartBuild"])):
        found = stack.node.try_find_child(path.split("/")[0])
        for part in path.split("/")[1:]:
            found = found.node.try_find_child(part) if found else None
        if found is not None:
            checkov.skip(found, "CKV_AWS_111", why)


def log_artifacts(pipeline: pipelines.CodePipeline, cache: BuildCache) -> None:
    """The artifact bucket CDK Pipelines makes, versioned and logging its access next to the cache bucket's."""
    bucket = pipeline.pipeline.artifact_bucket
    cfn = default_child(bucket, s3.CfnBucket)
    cfn.versioning_configuration = s3.CfnBucket.VersioningConfigurationProperty(status="Enabled")
    cfn.logging_configuration = s3.CfnBucket.LoggingConfigurationProperty(
        destination_bucket_name=cache.access_logs.bucket_name, log_file_prefix="artifacts/")
    # What server_access_logs_bucket would add: S3's log delivery may write only this bucket's logs.
    cache.access_logs.add_to_resource_policy(iam.PolicyStatement(
        principals=[iam.ServicePrincipal("logging.s3.amazonaws.com")], actions=["s3:PutObject"],
        resources=[cache.access_logs.arn_for_objects("artifacts/*")],
        conditions={"ArnLike": {"aws:SourceArn": bucket.bucket_arn},
                    "StringEquals": {"aws:SourceAccount": cdk.Stack.of(bucket).account}}))

