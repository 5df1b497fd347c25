"""The server-access-log bucket every bucket of this app logs to: one recipe for the model store and the pipeline.

Server access logs can only be delivered to an SSE-S3 bucket, hence no KMS key here
(https://docs.aws.amazon.com/AmazonS3/latest/userguide/enable-server-access-logging.html). The
parent construct sets ``@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy`` before creating its
children, so delivery is granted by a bucket policy rather than the legacy LogDeliveryWrite ACL.
"""
from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_s3 as s3
from constructs import Construct

from triton_constructs import checkov, control_tower
from triton_constructs.nag import acknowledge

USE_BUCKET_POLICY = "@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy"


def access_log_bucket(scope: Construct, id_: str, *, logged: str, removal_policy: cdk.RemovalPolicy,
                      auto_delete_objects: bool, retention_days: int = 365, object_lock: bool = False) -> s3.Bucket:
    """A private, SSL-only, versioned SSE-S3 bucket for the server access logs of ``logged`` (e.g. "the model bucket").

    ``object_lock``: S3 Object Lock on, without a default retention (``ModelStore``'s choice)."""
    bucket = s3.Bucket(
        scope, id_, encryption=s3.BucketEncryption.S3_MANAGED, enforce_ssl=True, versioned=True,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL, object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        lifecycle_rules=[s3.LifecycleRule(expiration=cdk.Duration.days(retention_days),
                                          noncurrent_version_expiration=cdk.Duration.days(30))],
        removal_policy=removal_policy, auto_delete_objects=auto_delete_objects, object_lock_enabled=object_lock or None)
    control_tower.bucket_events(bucket, object_lock)
    reason = f"This is the access-log bucket of {logged}; logging its own access would loop."
    acknowledge(bucket, "AwsSolutions-S1", reason)
    checkov.skip(bucket, "CKV_AWS_18", reason)
    control_tower.acknowledge(bucket, control_tower.BUCKET_LOGGING, reason)
    control_tower.acknowledge(bucket, control_tower.BUCKET_SSE_KMS, (
        "server access logs are delivered only to a bucket with SSE-S3 (https://docs.aws.amazon.com/AmazonS3/latest/"
        "userguide/enable-server-access-logging.html)"))
    return bucket
