"""SageMaker Runtime's InvokeEndpoint errors, as bytes botocore turns into the same exception classes.

InvokeEndpoint is a ``rest-json`` operation (botocore ``data/sagemaker-runtime/2017-05-13/service-2.json``,
``metadata.protocol``). botocore's RestJSONParser takes the error code from the ``x-amzn-ErrorType`` header,
the message from the body's ``Message``, the request id from ``x-amzn-RequestId``, and fills the error
shape's own members (``ModelError``: ``OriginalStatusCode``, ``OriginalMessage``, ``LogStreamArn``) from
the body, so ``client.exceptions.ModelError`` is raised with ``error.response["OriginalStatusCode"]`` set.
Status codes are the service model's (``error.httpStatusCode`` of each shape):

| shape | status | SageMaker raises it when (service model, SageMaker documentation) |
|---|---|---|
| ValidationError | 400 | "Inspect your request and try again": unknown endpoint, a header the endpoint does not take |
| ModelError | 424 | "Model (owned by the customer in the container) returned 4xx or 5xx error code" |
| ModelNotReadyException | 429 | "a multi-model endpoint is still downloading or loading the target model" |
| ServiceUnavailable | 503 | "The service is unavailable. Try your call again." |

The message texts follow what SageMaker returns (quoted in public reports, since no reference page lists
them): "Endpoint NAME of account ACCOUNT not found." (aws/amazon-sagemaker-examples#293), "Endpoint NAME
is not a multi-model endpoint and does not support target model header." with ErrorCode
TARGET_MODEL_HEADER_NOT_SUPPORTED (aws/amazon-sagemaker-examples#1026, #1216), "Inference Component Name
header is required for endpoints to which you plan to deploy inference components. ..."
(aws-samples/amazon-kendra-langchain-extensions#64), "Received client error (400) from primary with
message ..." / "Received server error (500) ..." with a CloudWatch link (aws/amazon-sagemaker-examples#1881,
#4324), "Received server error (0) from model with message "Your invocation timed out while waiting for a
response from container model. ..."" (aws/sagemaker-pytorch-inference-toolkit#92). Each local message
then says what this local runtime serves and how to fix the call.
"""
from __future__ import annotations

import dataclasses
import json
import uuid

# The local runtime has no AWS account or region; messages and ARNs that carry them say so.
LOCAL_ACCOUNT = "000000000000"
LOCAL_REGION = "local"
JSON = "application/json"


@dataclasses.dataclass(frozen=True)
class RuntimeReply:
    """One InvokeEndpoint answer: status, headers (besides Content-Length) and body."""

    status: int
    headers: dict[str, str]
    body: bytes


def _error(status: int, code: str, body: dict[str, object]) -> RuntimeReply:
    headers = {"Content-Type": JSON, "x-amzn-ErrorType": code, "x-amzn-RequestId": str(uuid.uuid4())}
    return RuntimeReply(status, headers, json.dumps(body).encode())


def content_too_large(limit: int, detail: str) -> RuntimeReply:
    """A body over InvokeEndpoint's limit, refused before any endpoint is looked up, as SageMaker's front refuses
    it: HTTP 413 with no error type, so botocore names the error by its status ("An error occurred (413) ...:
    HTTP content length exceeded N bytes.", quoted in aws/sagemaker-python-sdk#171 at the limit of its day)."""
    headers = {"Content-Type": JSON, "x-amzn-RequestId": str(uuid.uuid4())}
    message = f"HTTP content length exceeded {limit} bytes. ({detail})"
    return RuntimeReply(413, headers, json.dumps({"message": message}).encode())


def validation_error(message: str, error_code: str = "VALIDATION_ERROR") -> RuntimeReply:
    return _error(400, "ValidationError", {"ErrorCode": error_code, "Message": message})


def model_not_ready(message: str) -> RuntimeReply:
    return _error(429, "ModelNotReadyException", {"Message": message})


def service_unavailable(message: str) -> RuntimeReply:
    return _error(503, "ServiceUnavailable", {"Message": message})


def model_error(endpoint_name: str, variant: str, original_status: int, original_message: str,
                log: str = "") -> RuntimeReply:
    """The container answered ``original_status`` (4xx/5xx, or 0 when it did not answer in time); ``log`` is
    its server log, where SageMaker names the endpoint's CloudWatch log group."""
    side = "client" if 400 <= original_status < 500 else "server"
    message = model_error_message(endpoint_name, variant, original_status, original_message, log)
    group = _log_group(endpoint_name)
    log_stream = f"arn:aws:logs:{LOCAL_REGION}:{LOCAL_ACCOUNT}:log-group:{group}:log-stream:{variant}/local"
    return _error(424, "ModelError", {"ErrorCode": f"{side.upper()}_ERROR_FROM_MODEL", "Message": message,
                                      "OriginalStatusCode": original_status, "OriginalMessage": original_message,
                                      "LogStreamArn": log_stream})


def model_error_message(endpoint_name: str, variant: str, original_status: int, original_message: str,
                        log: str = "") -> str:
    """ModelError's message; also an asynchronous request's failure reason when the container refused it."""
    side = "client" if 400 <= original_status < 500 else "server"
    return (f"Received {side} error ({original_status}) from {variant} with message \"{original_message}\". "
            f"See {log or 'the server log'} (deployed: log group {_log_group(endpoint_name)}) for more information.")


def model_stream_error_message(endpoint_name: str, variant: str, what: str, log: str = "") -> str:
    """A ModelStreamError's message (InvokeEndpointWithResponseStream, once the stream has begun): ``what`` went
    wrong, worded like ModelError's, since SageMaker publishes no wording of its own."""
    return (f"{what} in the middle of the response stream from {variant}. See {log or 'the server log'} "
            f"(deployed: log group {_log_group(endpoint_name)}) for more information.")


def _log_group(endpoint_name: str) -> str:
    return f"/aws/sagemaker/Endpoints/{endpoint_name}"
