"""CloudFormation custom resource: copies one model tarball from the CDK asset bucket into the model bucket.

Runs in AWS Lambda (Python runtime, boto3 included); synth never imports it.
The copy is server-side (CopyObject, or UploadPartCopy above the chunk size),
so the tarball never passes through the function: no /tmp or memory limit,
objects up to S3's 5 TB maximum (a BucketDeployment would download, unzip and
re-upload inside its Lambda). Delete does nothing on purpose: object names
carry a content hash, instances cache models by name, and an older endpoint
configuration may still point at an older object; the bucket's removal policy
decides what happens to them.
"""
from __future__ import annotations

import logging
from typing import Any

import boto3
from boto3.s3.transfer import TransferConfig
from botocore.exceptions import ClientError
from cfn_response import respond

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)
CHUNK = 256 * 1024 * 1024
MISSING = ("403", "404", "NoSuchKey", "NotFound")  # 403: HeadObject on a missing key without s3:ListBucket


def handler(event: dict[str, Any], context: Any, s3: Any = None) -> None:
    props = event["ResourceProperties"]
    physical_id = f"s3://{props['DestinationBucket']}/{props['DestinationKey']}"
    status, reason = "SUCCESS", "copied"
    try:
        if event["RequestType"] in ("Create", "Update"):
            reason = copy(s3 or boto3.client("s3"), props)
        else:
            reason = "kept (model objects are never deleted by a stack update)"
    except Exception as exc:  # any failure must reach CloudFormation, or it waits for the timeout
        LOG.exception("copy failed")
        status, reason = "FAILED", f"{type(exc).__name__}: {exc}"[:900]
    respond(event, status, reason, physical_id)


def copy(s3: Any, props: dict[str, Any]) -> str:
    bucket, key, size = props["DestinationBucket"], props["DestinationKey"], int(props["Size"])
    try:
        existing = s3.head_object(Bucket=bucket, Key=key)["ContentLength"]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") not in MISSING:
            raise
        existing = None
    if existing == size:
        LOG.info("s3://%s/%s already exists; not copied again", bucket, key)
        return "already present"
    if existing is not None:
        raise RuntimeError(f"s3://{bucket}/{key} exists with {existing} bytes, expected {size}: a content-versioned "
                           "model object is never overwritten; rebuild the models (tritonsm build)")
    source = {"Bucket": props["SourceBucket"], "Key": props["SourceKey"]}
    LOG.info("copying s3://%s/%s to s3://%s/%s (%d bytes)", source["Bucket"], source["Key"], bucket, key, size)
    s3.copy(source, bucket, key, ExtraArgs={
        "ServerSideEncryption": "aws:kms", "SSEKMSKeyId": props["KmsKeyArn"],
        "Metadata": {"sha256": props["Sha256"]}, "MetadataDirective": "REPLACE",
    }, Config=TransferConfig(multipart_threshold=CHUNK, multipart_chunksize=CHUNK, max_concurrency=16))
    return "copied"

