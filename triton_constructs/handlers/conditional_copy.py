"""A server-side S3 copy that creates its key only if nothing is there yet: the model store never overwritten.

The model bucket's policy denies an object-creating write under ``models/`` that carries no ``If-None-Match``
(``model_store.protect_models``). S3 accepts that header on PutObject and CompleteMultipartUpload (added to the
S3 API on 2024-08-20), and its user guide, "Enforce conditional writes on Amazon S3 buckets"
(https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes-enforce.html), says that under such a
policy CopyObject cannot be used: without the header it is denied, with it S3 answers 501 Not Implemented. So the
copy is a multipart upload whose parts are server-side copies (CreateMultipartUpload, UploadPartCopy, which take
no conditional header and which the policy exempts through ``s3:ObjectCreationOperation``), completed with
``IfNoneMatch='*'``: the object appears whole, and only where no object had the key (otherwise 412
PreconditionFailed; 409 ConditionalRequestConflict when another write raced it). boto3's managed copy forwards no
``IfNoneMatch`` (s3transfer's ``ALLOWED_COPY_ARGS``), hence this module. A failed copy is aborted, so no parts
are left behind (they would be billed until a lifecycle rule removes them).

The parts are ``PART`` bytes (raised for objects so large that 10,000 parts would not hold them: S3's limits are
5 MiB to 5 GiB a part, 10,000 parts, 5 TiB an object), copied by up to ``WORKERS`` threads: S3 copies each part
itself, so the function only waits.
"""
from __future__ import annotations

import logging
import math
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import botocore
import botocore.exceptions

LOG = logging.getLogger()

PART = 256 * 1024 * 1024
MAX_PARTS = 10_000
WORKERS = 16
MIB = 1024 * 1024


class KeyTaken(Exception):
    """CompleteMultipartUpload answered 412: an object has the key (written after this function looked)."""


class Raced(Exception):
    """CompleteMultipartUpload answered 409: another write to the key was in progress; start again."""


def part_ranges(size: int, part: int) -> list[tuple[int, int]]:
    """Inclusive byte ranges covering ``size`` bytes in at most ``MAX_PARTS`` parts of ``part`` bytes or more."""
    part = max(part, math.ceil(size / MAX_PARTS / MIB) * MIB)
    return [(start, min(start + part, size) - 1) for start in range(0, max(size, 1), part)]


def require_conditional_complete(s3: Any) -> None:
    """Fails before anything is written when the runtime's botocore cannot send If-None-Match on completion:
    the bucket policy would deny the copy at its last step, after every part was copied."""
    members = s3.meta.service_model.operation_model("CompleteMultipartUpload").input_shape.members
    if "IfNoneMatch" not in members:
        raise RuntimeError(
            f"this function's botocore {botocore.__version__} cannot send If-None-Match on CompleteMultipartUpload "
            "(added to the S3 API on 2024-08-20), which the model bucket's policy requires: use a Lambda Python "
            "runtime whose boto3 is from 2024-08-20 or later (the construct library sets python3.14)")


def copy_new(s3: Any, source: dict[str, str], size: int, bucket: str, key: str, extra: dict[str, Any]) -> None:
    """Copies ``source`` (``size`` bytes) to ``bucket``/``key`` if and only if no object has that key.

    ``extra``: CreateMultipartUpload's encryption and metadata arguments. Raises ``KeyTaken`` or ``Raced``
    (nothing written, the upload aborted), or the ClientError of a failed step (likewise aborted).
    """
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key=key, **extra)["UploadId"]
    try:
        ranges = part_ranges(size, PART)

        def copy_part(number: int) -> dict[str, Any]:
            first, last = ranges[number - 1]
            result = s3.upload_part_copy(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number,
                                         CopySource=source, CopySourceRange=f"bytes={first}-{last}")
            return {"PartNumber": number, "ETag": result["CopyPartResult"]["ETag"]}

        with ThreadPoolExecutor(max_workers=min(WORKERS, len(ranges))) as pool:
            parts = list(pool.map(copy_part, range(1, len(ranges) + 1)))
        try:
            s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts},
                                         IfNoneMatch="*")
        except botocore.exceptions.ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            if code == "PreconditionFailed":
                raise KeyTaken() from exc
            if code == "ConditionalRequestConflict":
                raise Raced() from exc
            raise
    except BaseException:
        # An upload that failed must not leave billed parts behind; a failed abort must not hide why it failed.
        try:
            s3.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
        except botocore.exceptions.ClientError:
            LOG.exception("could not abort multipart upload %s of s3://%s/%s", upload_id, bucket, key)
        raise
