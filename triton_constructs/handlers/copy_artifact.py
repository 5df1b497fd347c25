"""CloudFormation custom resource: copies one model tarball from the CDK asset bucket into the model bucket.

Runs in AWS Lambda (Python runtime, boto3 included); synth never imports it.
The copy is server-side (UploadPartCopy parts of one multipart upload,
conditional_copy.py), so the tarball never passes through the function: no
/tmp or memory limit, objects up to S3's 5 TB maximum (a BucketDeployment would
download, unzip and re-upload inside its Lambda). It completes only where no
object has the key (If-None-Match), which the model bucket's policy requires of
every object-creating write under models/. Delete does nothing on purpose:
object names carry a content hash, instances cache models by name, and an older
endpoint configuration may still point at an older object; the bucket's removal
policy decides what happens to them.

The object that serves must be the one the build verified: a multi-model
endpoint loads a target from S3 again after evicting it, so bytes put under a
model's name later would be served without a deploy. Every object this
function accepts, one already there or its own copy, is checked against the
build's sha256 (the ``Sha256`` property), not only its size. For a signed build
that is the digest the signed build statement binds, which synth verified with
the team's public key and checked against the file (``DigestFrom`` then says so,
and the messages name it); otherwise the build manifest's.

How it is checked (botocore's S3 service model, 2006-03-01, and the S3 User Guide, "Checking object integrity",
https://docs.aws.amazon.com/AmazonS3/latest/userguide/checking-object-integrity.html):

* HeadObject with ``ChecksumMode='ENABLED'`` returns the stored checksum ("To retrieve the checksum, this parameter
  must be enabled"; for a KMS-encrypted object it needs ``kms:Decrypt``). For an object written in one request
  with ``ChecksumAlgorithm='SHA256'`` (CopyObject, PutObject: how earlier releases of this function copied) it is
  the SHA-256 of the whole object, base64 (PutObject's ChecksumType: "always FULL_OBJECT"), which S3 computed or
  checked itself: a writer cannot store a value that its bytes do not have. Such an object is not read.
* For a multipart object, this function's own copies included, a SHA-256 "may not be a direct checksum value of
  the full object. Instead, it's a calculation based on the checksum values of each individual part" (HeadObject,
  ChecksumSHA256): S3 keeps a full-object checksum of a multipart object only for the CRC algorithms (user guide,
  checksum types). So the object is read (GetObject) and hashed, a chunk at a time: nothing goes to /tmp and
  memory stays at one chunk. (CopyObject, which would give a full-object SHA-256, cannot be used: the bucket
  policy requires If-None-Match, and S3 refuses CopyObject under such a policy; see conditional_copy.py.)
* A stored checksum only ever confirms a match. Anything else (no SHA-256 stored, a composite one, one that
  differs) is settled by reading the bytes, so neither an S3-compatible server that formats checksums differently
  nor a runtime botocore that predates ``ChecksumType`` can make a good object fail; and a composite value can
  never equal a whole-file sha256 by accident (that would take a SHA-256 preimage).

Time: the function has 15 minutes for the copy and the check together. Reading is the slow path: hashlib's
sha256 measured 0.8 GB/s on one core of an AMD EPYC with SHA extensions (the machine these tests ran on); the
function has 256 MB of memory, which Lambda pairs with about 0.15 of a vCPU (one vCPU at 1,769 MB), so about
0.1 GB/s for hashing, and one S3 GetObject stream is assumed to give 85-90 MB/s (the S3 user guide's
"Performance guidelines" figure per connection, not measured here). A streamed check therefore covers roughly
50-75 GB within the timeout, less the copy's own time.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import re
import time
from typing import Any, Optional

import boto3
from botocore.exceptions import ClientError
from cfn_response import respond
from conditional_copy import KeyTaken, Raced, copy_new, require_conditional_complete

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)
ATTEMPTS = 3  # copies started again after a 409 (another write to the key in progress)
READ_CHUNK = 8 * 1024 * 1024  # what a streamed check holds in memory at a time
MISSING = ("403", "404", "NoSuchKey", "NotFound")  # 403: HeadObject on a missing key without s3:ListBucket
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")  # archive_listing.py: hashlib's hexdigest() of the whole tarball
DIGEST_FROM = "the build manifest"  # what Sha256 and Size come from, unless DigestFrom names the signed statement


def asset_changed(source: str) -> str:
    return (f"the CDK file asset differs from {source} (changed in the asset bucket, or the tarball changed after "
            "tritonsm build hashed it)")


REPLACED = ("a content-versioned model object was replaced after it was copied; find out who wrote it (the bucket's "
            "server access logs / CloudTrail data events), delete that version, and deploy again")


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
    bucket, key, size, expected = props["DestinationBucket"], props["DestinationKey"], int(props["Size"]), props["Sha256"]
    source_of = str(props.get("DigestFrom") or DIGEST_FROM)
    if not isinstance(expected, str) or not _SHA256_HEX.fullmatch(expected):
        raise ValueError(f"s3://{bucket}/{key}: the Sha256 property is {expected!r}; expected the 64 lowercase hex "
                         f"digits of the tarball's sha256 from {source_of}: rebuild the models (tritonsm build) "
                         "and deploy again")
    head = _head(s3, bucket, key)
    if head is not None:
        return _accept_present(s3, bucket, key, head, size, expected, source_of)
    source = {"Bucket": props["SourceBucket"], "Key": props["SourceKey"]}
    source_url = f"s3://{source['Bucket']}/{source['Key']}"
    require_conditional_complete(s3)
    source_size = _source_size(s3, source, f"s3://{bucket}/{key}")
    if source_size != size:
        raise RuntimeError(
            f"{source_url} (the CDK file asset to copy to s3://{bucket}/{key}) is {source_size} bytes, {source_of} "
            f"says {size} bytes: {asset_changed(source_of)}; nothing was copied")
    extra = {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": props["KmsKeyArn"], "Metadata": {"sha256": expected}}
    for _ in range(ATTEMPTS):
        LOG.info("copying %s to s3://%s/%s (%d bytes), only if the key stays free", source_url, bucket, key, size)
        try:
            copy_new(s3, source, size, bucket, key, extra)
            break
        except KeyTaken:
            LOG.info("s3://%s/%s was written while this function copied it; checking what is there", bucket, key)
            return _accept_present(s3, bucket, key, _head_present(s3, bucket, key), size, expected, source_of)
        except Raced:
            LOG.info("another write to s3://%s/%s was in progress (409); copying again", bucket, key)
    else:
        raise RuntimeError(
            f"s3://{bucket}/{key}: {ATTEMPTS} copies in a row met another write to the same key (409 "
            "ConditionalRequestConflict) and were abandoned, nothing written: only this deployment should write "
            "under models/; find the other writer (CloudTrail data events of the model bucket) and deploy again")
    head = _head_present(s3, bucket, key)
    found = verify(s3, bucket, key, head, size, expected, source_of)
    if found is not None:
        # Nothing is deleted: both objects are evidence, and deletes may be denied by the bucket policy anyway.
        raise RuntimeError(
            f"{_name(bucket, key, head)}, just copied from {source_url}, holds other bytes "
            f"than the build ({found}): {asset_changed(source_of)}; nothing was deleted; find out who wrote {source_url} "
            "(CloudTrail data events of the asset bucket), delete both objects (cdk deploy uploads an asset again "
            "only when it is missing), and deploy again")
    return "copied (sha256 verified)"


def _accept_present(s3: Any, bucket: str, key: str, head: dict[str, Any], size: int, expected: str,
                    source_of: str = DIGEST_FROM) -> str:
    found = verify(s3, bucket, key, head, size, expected, source_of)
    if found is not None:
        raise RuntimeError(f"{_name(bucket, key, head)} holds other bytes than the build ({found}): {REPLACED}")
    return "already present (sha256 verified)"


def _source_size(s3: Any, source: dict[str, str], destination: str) -> int:
    try:
        return int(s3.head_object(**source)["ContentLength"])
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code")
        if code not in MISSING:
            raise
        raise RuntimeError(
            f"s3://{source['Bucket']}/{source['Key']} (the CDK file asset to copy to {destination}) is missing or "
            f"this function may not read it (HeadObject: {code}): cdk deploy uploads a file asset only when the "
            "asset bucket lacks it, so deploy again; if it goes missing again, look for what deletes objects in "
            "the asset bucket (a lifecycle rule, cdk gc)") from exc


def verify(s3: Any, bucket: str, key: str, head: dict[str, Any], size: int, expected: str,
           source_of: str = DIGEST_FROM) -> Optional[str]:
    """None when the object (as ``head`` found it) holds the build's bytes; else what it holds, for the message
    (``source_of``: what ``size`` and ``expected`` come from)."""
    url = f"s3://{bucket}/{key}"
    length = int(head["ContentLength"])
    if length != size:
        LOG.info("%s: %d bytes, %s says %d: other bytes, not read", url, length, source_of, size)
        return f"{length} bytes, {source_of} says {size} bytes"
    stored = stored_sha256(head)
    if stored == expected:
        LOG.info("%s: sha256 verified from S3's full-object SHA-256 checksum, not read", url)
        return None
    LOG.info("%s: %s; reading it to hash it", url, "its stored SHA-256 checksum differs" if stored else
             f"no full-object SHA-256 checksum stored (ChecksumSHA256 {head.get('ChecksumSHA256')!r}, "
             f"ChecksumType {head.get('ChecksumType')!r})")
    started = time.monotonic()
    found = streamed_sha256(s3, bucket, key, head["ETag"])
    LOG.info("%s: read and hashed %d bytes in %.1f s: sha256 %s", url, length, time.monotonic() - started, found)
    if found == expected:
        LOG.info("%s: sha256 verified by reading the object", url)
        return None
    return f"sha256 {found}, {source_of} says {expected}"


def stored_sha256(head: dict[str, Any]) -> Optional[str]:
    """The object's full-object SHA-256 as hex, from a HeadObject made with ChecksumMode='ENABLED'; None if absent.

    A composite checksum is refused by its ``ChecksumType`` where botocore parses it (x-amz-checksum-type, added to
    the service model with the CRC full-object checksums) and by its ``-<parts>`` suffix, which base64 lacks.
    """
    value = head.get("ChecksumSHA256")
    if not value or "-" in value or head.get("ChecksumType", "FULL_OBJECT") != "FULL_OBJECT":
        return None
    try:
        digest = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
    return digest.hex() if len(digest) == 32 else None


def streamed_sha256(s3: Any, bucket: str, key: str, etag: str) -> str:
    """The sha256 of the object's bytes, read once in ``READ_CHUNK`` pieces.

    ``IfMatch`` pins the read to the object HeadObject described: one written in between fails the read (412)
    instead of being hashed in its place (GetObject, IfMatch: "Return the object only if its entity tag (ETag) is
    the same as the one specified"). It needs no permission beyond s3:GetObject, unlike a VersionId.
    """
    body = s3.get_object(Bucket=bucket, Key=key, IfMatch=etag)["Body"]
    digest = hashlib.sha256()
    try:
        for chunk in body.iter_chunks(READ_CHUNK):
            digest.update(chunk)
    finally:
        body.close()
    return digest.hexdigest()


def _head_present(s3: Any, bucket: str, key: str) -> dict[str, Any]:
    head: dict[str, Any] = s3.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
    return head


def _head(s3: Any, bucket: str, key: str) -> Optional[dict[str, Any]]:
    try:
        return _head_present(s3, bucket, key)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") not in MISSING:
            raise
        return None


def _name(bucket: str, key: str, head: dict[str, Any]) -> str:
    """The object's URL and, in a versioned bucket, the version HeadObject saw: the one to look into and delete."""
    version = head.get("VersionId")
    return f"s3://{bucket}/{key}" + (f" (version {version})" if version and version != "null" else "")
