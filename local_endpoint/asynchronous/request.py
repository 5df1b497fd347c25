"""InvokeEndpointAsync's request, checked as SageMaker checks it before it queues anything.

The operation (botocore ``data/sagemaker-runtime/2017-05-13/service-2.json``, ``InvokeEndpointAsync``) is
``POST /endpoints/{EndpointName}/async-invocations`` and answers 202. Its request headers
(``InvokeEndpointAsyncInput``): ``X-Amzn-SageMaker-Content-Type``, ``-Accept``, ``-Custom-Attributes``,
``-Inference-Id`` (1-64 printable characters, the first not a space), ``-InputLocation``
(``^(https|s3)://([^/]+)/?(.*)$``, 1-1024 characters), ``-S3OutputPathExtension``, ``-Filename``,
``-RequestTTLSeconds`` (60-21600; "The default is 6 hours, or 21,600 seconds") and ``-InvocationTimeoutSeconds``
(1-3600; "The default is 15 minutes, or 900 seconds"); the payload ``Body`` ("can be up to 128,000 bytes",
"``Body`` and ``InputLocation`` are mutually exclusive. Provide exactly one of them"). botocore checks only the
lower bounds on the client; the rest is the service's.

Messages: the "1 validation error detected: Value ... at '...' failed to satisfy constraint: ..." form is the
service's own for a member out of bounds (seen for InvokeEndpointAsync's body in aws/aws-sdk-js#4203); the texts
for a missing or doubled payload are inferred (no public record of them). Each ends with the local fix.
"""
from __future__ import annotations

import dataclasses
import datetime
import re
import uuid
from typing import Mapping, Optional, Union

from deployment_spec.sections.asynchronous import Asynchronous
from local_endpoint.runtime import errors
from local_endpoint.runtime.errors import RuntimeReply

CONTENT_TYPE = "X-Amzn-SageMaker-Content-Type"
ACCEPT = "X-Amzn-SageMaker-Accept"
CUSTOM_ATTRIBUTES = "X-Amzn-SageMaker-Custom-Attributes"
INFERENCE_ID = "X-Amzn-SageMaker-Inference-Id"
INPUT_LOCATION = "X-Amzn-SageMaker-InputLocation"
OUTPUT_PATH_EXTENSION = "X-Amzn-SageMaker-S3OutputPathExtension"
FILENAME = "X-Amzn-SageMaker-Filename"
REQUEST_TTL = "X-Amzn-SageMaker-RequestTTLSeconds"
INVOCATION_TIMEOUT = "X-Amzn-SageMaker-InvocationTimeoutSeconds"
INLINE_BODY_MAX = 128_000
TTL_RANGE = (60, 21600)
TIMEOUT_RANGE = (1, 3600)
_INPUT_LOCATION = re.compile(r"(https|s3)://([^/]+)/?(.*)")
_INFERENCE_ID = re.compile(r"\S[\x20-\x7e]*")   # \A\S[\p{Print}]*\z, ASCII printable


@dataclasses.dataclass(frozen=True)
class AsyncRequest:
    """One accepted request, before the queue gives it an object name."""

    inference_id: str
    input_location: Optional[str]   # None: the payload came inline (``inline_body``)
    inline_body: Optional[bytes]
    content_type: Optional[str]
    accept: Optional[str]
    custom_attributes: Optional[str]
    output_extension: str           # S3OutputPathExtension, without slashes at its ends
    filename: Optional[str]
    ttl_s: int
    invocation_timeout_s: int
    received: datetime.datetime     # when the runtime accepted it (the notification's receivedTime)


def parse_request(headers: Mapping[str, str], body: bytes, settings: Asynchronous) -> Union[AsyncRequest, RuntimeReply]:
    """The request, or SageMaker's ValidationError (400) for the first thing wrong. ``settings.request_ttl_s`` and
    ``settings.max_processing_s`` are the defaults of a request that gives no TTL or timeout."""
    headers = {key.lower(): value for key, value in headers.items()}   # HTTP header names ignore case
    location = headers.get(INPUT_LOCATION.lower())
    refused = _payload_refusal(location, body)
    if refused is not None:
        return refused
    ttl = _bounded(headers, REQUEST_TTL, "requestTTLSeconds", TTL_RANGE, settings.request_ttl_s,
                   "RequestTTLSeconds: how long a request may wait in the queue")
    timeout = _bounded(headers, INVOCATION_TIMEOUT, "invocationTimeoutSeconds", TIMEOUT_RANGE,
                       settings.max_processing_s, "InvocationTimeoutSeconds: how long the model may take")
    if isinstance(ttl, RuntimeReply):
        return ttl
    if isinstance(timeout, RuntimeReply):
        return timeout
    inference_id = headers.get(INFERENCE_ID.lower()) or str(uuid.uuid4())
    if len(inference_id) > 64 or not _INFERENCE_ID.fullmatch(inference_id):
        return errors.validation_error(
            f"1 validation error detected: Value '{inference_id}' at 'inferenceId' failed to satisfy constraint: "
            "Member must have length less than or equal to 64 and consist of printable characters, the first not a "
            "space; pass an InferenceId of 1 to 64 printable characters, or leave it out for a generated one")
    return AsyncRequest(inference_id, location, body if location is None else None,
                        headers.get(CONTENT_TYPE.lower()), headers.get(ACCEPT.lower()),
                        headers.get(CUSTOM_ATTRIBUTES.lower()),
                        headers.get(OUTPUT_PATH_EXTENSION.lower(), "").strip("/"), headers.get(FILENAME.lower()),
                        ttl, timeout, datetime.datetime.now(datetime.timezone.utc))


def _payload_refusal(location: Optional[str], body: bytes) -> Optional[RuntimeReply]:
    """Exactly one of InputLocation and Body, each within its limits."""
    if location is None and not body:
        return errors.validation_error(
            "Provide exactly one of InputLocation and Body: the request has neither. Upload the payload to the "
            "local S3 and pass its s3://bucket/key as InputLocation, or pass up to 128,000 bytes as Body")
    if location is not None and body:
        return errors.validation_error(
            "Provide exactly one of InputLocation and Body: the request has both. Leave Body out when the payload "
            "is in S3, or InputLocation out to send it inline")
    if location is not None and not (1 <= len(location) <= 1024 and _INPUT_LOCATION.fullmatch(location)):
        return errors.validation_error(
            f"1 validation error detected: Value '{location}' at 'inputLocation' failed to satisfy constraint: "
            "Member must satisfy regular expression pattern: ^(https|s3)://([^/]+)/?(.*)$ and have length 1 to 1024; "
            "pass the object's URI, e.g. s3://tritonsm-local/async/<endpoint>/input/request.json")
    if location is None and len(body) > INLINE_BODY_MAX:
        return errors.validation_error(
            f"1 validation error detected: Value at 'body' failed to satisfy constraint: Member must have length "
            f"less than or equal to {INLINE_BODY_MAX} (got {len(body)} bytes); upload a larger payload to S3 and "
            "pass its location as InputLocation")
    return None


def _bounded(headers: Mapping[str, str], header: str, member: str, bounds: tuple[int, int], default: int,
             meaning: str) -> Union[int, RuntimeReply]:
    """An integer header within ``bounds``, ``default`` when absent, else a ValidationError naming the fix."""
    raw = headers.get(header.lower())
    if raw is None:
        return default
    low, high = bounds
    fix = f"pass {meaning}, between {low} and {high} seconds, or leave it out for {default}"
    try:
        value = int(raw)
    except ValueError:
        return errors.validation_error(
            f"1 validation error detected: Value '{raw}' at '{member}' failed to satisfy constraint: Member must be "
            f"an integer; {fix}")
    if not low <= value <= high:
        said = (f"greater than or equal to {low}" if value < low else f"less than or equal to {high}")
        return errors.validation_error(
            f"1 validation error detected: Value '{value}' at '{member}' failed to satisfy constraint: Member must "
            f"have value {said}; {fix}")
    return value
