"""One request through an asynchronous endpoint, as an application sends it: the body put under the endpoint's
input location, ``InvokeEndpointAsync``, then the answer (or the failure) read back from S3.

The same boto3 calls reach a deployed endpoint or the local one of `tritonsm serve` (clients made with its
``endpoint_url`` values). The answer object carries the container's content type (so a binary+json answer
decodes as an InvokeEndpoint answer does); a failure object's text is the reason, raised as ``InvokeError``.
"""
from __future__ import annotations

import time
import uuid
from typing import Any

from local_endpoint.client.payload import DecodedResponse, EncodedRequest, decode_response
from local_endpoint.errors import InvokeError

POLL_SECONDS = 0.5
DEFAULT_WAIT_S = 900.0   # InvokeEndpointAsync's default InvocationTimeoutSeconds, plus the queue


def invoke_async_endpoint(endpoint_name: str, request: EncodedRequest, *, input_url: str, runtime: Any, s3: Any,
                          wait_s: float = DEFAULT_WAIT_S) -> DecodedResponse:
    """Puts ``request`` under ``input_url`` (``s3://bucket/prefix/``), invokes, waits up to ``wait_s`` for the
    answer. ``runtime``, ``s3``: boto3 ``sagemaker-runtime`` and ``s3`` clients."""
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, prefix = _split(input_url)
    key = f"{prefix}{uuid.uuid4()}.req"
    try:
        s3.put_object(Bucket=bucket, Key=key, Body=request.body, ContentType=request.content_type)
        accepted = runtime.invoke_endpoint_async(EndpointName=endpoint_name, InputLocation=f"s3://{bucket}/{key}",
                                                 ContentType=request.content_type)
        return _answer(s3, endpoint_name, accepted["OutputLocation"], accepted["FailureLocation"], wait_s)
    except ClientError as error:
        details = error.response.get("Error", {})
        raise InvokeError(f"asynchronous endpoint {endpoint_name!r}: {details.get('Code', 'error')}: "
                          f"{details.get('Message', '')}") from None
    except BotoCoreError as error:
        raise InvokeError(f"asynchronous endpoint {endpoint_name!r}: {error}") from None


def _answer(s3: Any, endpoint_name: str, output_url: str, failure_url: str, wait_s: float) -> DecodedResponse:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        answer = _read(s3, output_url)
        if answer is not None:
            return decode_response(answer[0], answer[1])
        failure = _read(s3, failure_url)
        if failure is not None:
            raise InvokeError(f"asynchronous endpoint {endpoint_name!r} failed the request ({failure_url}): "
                              f"{failure[0].decode(errors='replace')}")
        time.sleep(POLL_SECONDS)
    raise InvokeError(f"asynchronous endpoint {endpoint_name!r}: no answer at {output_url} and no failure at "
                      f"{failure_url} within {wait_s:g} s; see the endpoint's ApproximateBacklogSize and its logs")


def _read(s3: Any, url: str) -> tuple[bytes, str] | None:
    """The object's body and content type, or None while it does not exist."""
    bucket, key = _split(url)
    try:
        found = s3.get_object(Bucket=bucket, Key=key)
    except s3.exceptions.NoSuchKey:
        return None
    return found["Body"].read(), found.get("ContentType", "")


def _split(url: str) -> tuple[str, str]:
    bucket, _, key = url.removeprefix("s3://").partition("/")
    return bucket, key
