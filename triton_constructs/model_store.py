"""The model bucket of one environment: tarballs under per-endpoint prefixes, plus data capture."""
from __future__ import annotations

from typing import Optional, Sequence

import aws_cdk as cdk
from aws_cdk import aws_iam as iam, aws_kms as kms, aws_s3 as s3
from constructs import Construct

from triton_constructs import checkov, control_tower
from triton_constructs.access_logs import USE_BUCKET_POLICY, access_log_bucket


class ModelStore(Construct):
    """An S3 bucket for model tarballs and captured requests, with its own KMS key and access logs.

    The bucket is versioned, SSL-only, blocks all public access, is encrypted
    with a customer-managed key (rotation on) and logs server access to a
    second bucket. Model objects are never overwritten: their names carry a
    content hash, because multi-model instances cache models by name, and the
    bucket policy refuses a write under ``models/`` that could replace one.

    Only the deployment writes models: the bucket policy denies writes under ``models/`` to every principal
    but a role under the IAM path ``MODEL_WRITERS_PATH`` of this account (the artifact-copy functions' roles),
    and, unless ``removal_policy`` is ``DESTROY``, denies every principal deleting an object or a version
    there (``protect_models``).

    Args:
        scope: Parent construct.
        id_: Construct ID.
        removal_policy: What happens to the buckets and the key when the stack
            goes away. ``DESTROY`` also deletes every object (for throw-away
            environments). Defaults to ``RETAIN``.
        access_log_days: Days to keep server access logs. Defaults to 365.
        log_group_prefix: The names of the log groups the key may encrypt start with this (after
            ``/aws/sagemaker/Endpoints/`` for endpoint logs), e.g. ``Triton-prod-``. Defaults to none:
            CloudWatch Logs may not use the key.
        key: Encrypts the bucket. Defaults to a new customer-managed key with rotation, whose policy lets
            AWS services alone create grants (AWS Control Tower's CT.KMS.PR.3).
        object_lock: Turn S3 Object Lock on for both buckets, without a default retention (CT.S3.PR.9). It
            can never be turned off again. Defaults to False: SageMaker does not need it.

    Attributes:
        bucket: The model bucket.
        key: Its KMS key.
        access_logs: The server access log bucket.
    """

    def __init__(self, scope: Construct, id_: str, *, removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN,
                 access_log_days: int = 365, log_group_prefix: str = "", key: Optional[kms.IKey] = None,
                 object_lock: bool = False) -> None:
        super().__init__(scope, id_)
        # Grant log delivery with a bucket policy, not the legacy LogDeliveryWrite ACL (which needs ACLs
        # enabled); set here so the construct does not depend on the app's cdk.json.
        self.node.set_context(USE_BUCKET_POLICY, True)
        destroy = removal_policy == cdk.RemovalPolicy.DESTROY
        self.key: kms.IKey = key or kms.Key(
            self, "Key", description="Triton model tarballs and captured endpoint data", enable_key_rotation=True,
            removal_policy=removal_policy, pending_window=cdk.Duration.days(7) if destroy else None)
        if key is None:
            control_tower.deny_grants_for_non_aws_resources(self.key)
        if log_group_prefix:
            allow_logs(self.key, [f"{log_group_prefix}*", f"{ENDPOINT_LOG_GROUPS}{log_group_prefix}*",
                                  f"{COMPONENT_LOG_GROUPS}{log_group_prefix}*"])
        self.access_logs = access_log_bucket(self, "AccessLogs", logged="the model bucket",
                                             removal_policy=removal_policy, auto_delete_objects=destroy,
                                             retention_days=access_log_days, object_lock=object_lock)
        self.bucket = s3.Bucket(
            self, "Bucket", encryption=s3.BucketEncryption.KMS, encryption_key=self.key, bucket_key_enabled=True,
            versioned=True, enforce_ssl=True, block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            server_access_logs_bucket=self.access_logs, server_access_logs_prefix="model-bucket/",
            lifecycle_rules=[s3.LifecycleRule(noncurrent_version_expiration=cdk.Duration.days(90),
                                              abort_incomplete_multipart_upload_after=cdk.Duration.days(7))],
            removal_policy=removal_policy, auto_delete_objects=destroy, object_lock_enabled=object_lock or None)
        control_tower.bucket_events(self.bucket, object_lock)
        # DESTROY: CDK's auto-delete provider must empty the bucket, model versions included, when the stack goes.
        protect_models(self.bucket, deletable=destroy)
        if destroy:
            # Escape hatch: CDK's auto-delete provider handler names its role both by reference and in
            # DependsOn (cfn-lint W3005); the reference alone orders them.
            provider = cdk.Stack.of(self).node.try_find_child("Custom::S3AutoDeleteObjectsCustomResourceProvider")
            handler = provider.node.try_find_child("Handler") if provider else None
            if isinstance(handler, cdk.CfnResource):
                handler.add_deletion_override("DependsOn")
                reason = ("CDK's own handler that empties the buckets when a throw-away (removal_policy: destroy) "
                          "stack is deleted; invoked once by CloudFormation")
                checkov.skip(handler, "CKV_AWS_115", reason + ", so it needs no concurrency limit")
                checkov.skip_custom_resource_function(handler)
                control_tower.acknowledge(handler, control_tower.LAMBDA_IN_VPC, reason + "; CDK gives it no VPC "
                                          "setting, so a stage in an account with this control uses removal_policy: "
                                          "retain")

    @staticmethod
    def model_prefix(endpoint_name: str) -> str:
        """The key prefix (ending in '/') holding every tarball version of one endpoint."""
        return f"{MODELS}{endpoint_name}/"

    @staticmethod
    def capture_prefix(endpoint_name: str) -> str:
        """The key prefix (ending in '/') where an endpoint's data capture lands."""
        return f"data-capture/{endpoint_name}/"


MODELS = "models/"
# The IAM path of every role that may write model objects: the artifact-copy functions' (triton_constructs.artifacts).
# The bucket policy names writers by path because they live in the endpoint stacks and the bucket in the storage
# stack, which deploys first: a reference to a role would be an import the wrong way round (a dependency cycle).
MODEL_WRITERS_PATH = "/tritonsm/model-writers/"
# What creates an object version: PutObject, CopyObject, CreateMultipartUpload, UploadPart, UploadPartCopy and
# CompleteMultipartUpload all need s3:PutObject (botocore's S3 model, CopyObject and UploadPartCopy: "s3:PutObject
# permission to write the object copy to the destination bucket"; S3 user guide, "Multipart upload API and
# permissions"); replication into this bucket writes versions and delete markers with its own two actions.
MODEL_WRITE_ACTIONS = ("s3:PutObject", "s3:ReplicateObject", "s3:ReplicateDelete")
# DeleteObject (a delete marker, or an unversioned object) and DeleteObjectVersion (a version, for good); DeleteObjects
# checks these per key (botocore's S3 model, DeleteObject and DeleteObjects).
MODEL_DELETE_ACTIONS = ("s3:DeleteObject", "s3:DeleteObjectVersion")


def protect_models(bucket: s3.IBucket, *, deletable: bool) -> None:
    """Bucket-policy denies under ``models/``: writes by any principal but a role under ``MODEL_WRITERS_PATH``
    of this account, an object-creating write that does not require the key to be free (``If-None-Match``), and,
    unless ``deletable``, deletes by anyone.

    ``aws:PrincipalArn`` is a role's ARN, path included, for a request made with that role's session (IAM
    condition keys reference); a request without the key (anonymous, an AWS service principal) fails
    ``ArnNotLike`` and is denied too (IAM condition operators: a negated operator is true where the key is
    missing). A deny with ``Principal: *`` binds the account's administrators and root user as well: changing
    the bucket policy (``s3:PutBucketPolicy``, not denied here) is the way round it, and it shows in CloudTrail
    and as drift of the storage stack. Data capture and asynchronous requests and answers live under other
    prefixes, untouched.

    Overwrites: S3 evaluates ``s3:if-none-match`` (present when the request sends If-None-Match) and
    ``s3:ObjectCreationOperation`` (true for the requests that create the object, PutObject, CopyObject and
    CompleteMultipartUpload; false for CreateMultipartUpload, UploadPart and UploadPartCopy, which take no
    conditional header) in bucket policies (S3 user guide, "Enforce conditional writes on Amazon S3 buckets",
    https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes-enforce.html). Denying the first kind
    without the header means no writer, the copy role included, can replace a model object: the copy completes
    its multipart upload with ``IfNoneMatch='*'`` (handlers/conditional_copy.py), and a plain PutObject or
    CopyObject under ``models/`` is refused.
    """
    models = bucket.arn_for_objects(f"{MODELS}*")
    writers = f"arn:{cdk.Aws.PARTITION}:iam::{cdk.Aws.ACCOUNT_ID}:role{MODEL_WRITERS_PATH}*"
    bucket.add_to_resource_policy(iam.PolicyStatement(
        sid="ModelsWrittenOnlyByTheDeployment", effect=iam.Effect.DENY, principals=[iam.AnyPrincipal()],
        actions=list(MODEL_WRITE_ACTIONS), resources=[models], conditions={"ArnNotLike": {"aws:PrincipalArn": writers}}))
    bucket.add_to_resource_policy(iam.PolicyStatement(
        sid="ModelsNeverOverwritten", effect=iam.Effect.DENY, principals=[iam.AnyPrincipal()],
        actions=["s3:PutObject"], resources=[models],
        conditions={"Null": {"s3:if-none-match": "true"}, "Bool": {"s3:ObjectCreationOperation": "true"}}))
    if not deletable:
        bucket.add_to_resource_policy(iam.PolicyStatement(
            sid="ModelsNeverDeleted", effect=iam.Effect.DENY, principals=[iam.AnyPrincipal()],
            actions=list(MODEL_DELETE_ACTIONS), resources=[models]))


# SageMaker writes an endpoint's container logs to /aws/sagemaker/Endpoints/<endpoint name>.
ENDPOINT_LOG_GROUPS = "/aws/sagemaker/Endpoints/"
# ... and an inference component's to /aws/sagemaker/InferenceComponents/<component name>: the name AWS's and
# others' deployment scripts read; the developer guide states none (UNVERIFIED, docs/howto/inference-components.md).
COMPONENT_LOG_GROUPS = "/aws/sagemaker/InferenceComponents/"


def allow_logs(key: kms.IKey, log_group_names: Sequence[str]) -> bool:
    """Lets CloudWatch Logs use ``key`` for the named log groups only (an encryption-context condition).

    ``log_group_names`` may end in ``*``. Returns False for an imported key, whose policy this app
    cannot change: its owner must grant the same (https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html).
    """
    group = f"arn:{cdk.Aws.PARTITION}:logs:{cdk.Aws.REGION}:{cdk.Aws.ACCOUNT_ID}:log-group:"
    added = key.add_to_resource_policy(iam.PolicyStatement(
        principals=[iam.ServicePrincipal(f"logs.{cdk.Aws.REGION}.{cdk.Aws.URL_SUFFIX}")],
        actions=["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"],
        resources=["*"],
        conditions={"ArnLike": {"kms:EncryptionContext:aws:logs:arn": [f"{group}{name}" for name in log_group_names]}}))
    return bool(added.statement_added)
