"""Why an accepted request failed: the failure object's content and the error notification's ``failureReason``.

SageMaker writes "failure model responses" to the failure location (the 2023-04-04 InvokeEndpointAsync release,
which added ``FailureLocation``): for an answer the container refused, the object here is the container's own
body and content type, and the reason is InvokeEndpoint's ModelError message ("Received client error (400) from
<variant> with message ..."), quoting it. For a failure with no container answer (the input, the queue, a timeout, an
exited container) the object is the reason itself, as text. Those texts are local: SageMaker's are not public
beyond "ClientError: Received server error (500) from model. See the SageMaker Endpoint logs ..." (developer guide,
"Check prediction results"); each here says what went wrong, the value, the limit and the fix.
"""
from __future__ import annotations

import dataclasses

from local_endpoint.errors import ServerCrashedError
from local_endpoint.runtime.errors import model_error_message
from local_endpoint.server.server_process import describe_exit

TEXT = "text/plain; charset=utf-8"


@dataclasses.dataclass(frozen=True)
class Failure:
    """What the failure object holds and what the error notification says."""

    reason: str
    body: bytes
    content_type: str = TEXT
    from_container: bool = False   # the body is the container's answer (not the reason)

    @classmethod
    def said(cls, reason: str) -> Failure:
        """A failure without a container answer: the object is the reason."""
        return cls(reason, reason.encode(), TEXT)


def input_unreadable(location: str, code: str, detail: str, s3_url: str) -> Failure:
    return Failure.said(
        f"The input {location} could not be read from the local S3 ({code}: {detail}). Upload the request body "
        f"there before calling InvokeEndpointAsync (the local S3 is {s3_url}: set AWS_ENDPOINT_URL_S3 to it), or "
        "pass the InputLocation you uploaded to.")


def input_outside(location: str, inputs_url: str) -> Failure:
    return Failure.said(
        f"The input {location} is outside this endpoint's input location {inputs_url}: the deployed endpoint's "
        "execution role reads requests only there, so SageMaker could not download it (RequestDownloadFailures). "
        f"Upload the request body under {inputs_url} and pass that InputLocation.")


def payload_too_large(location: str, size: int, limit_mb: int) -> Failure:
    return Failure.said(
        f"The input {location} is {size} bytes ({size / 2**20:.1f} MB), over this endpoint's limit of {limit_mb} MB "
        "(asynchronous.max_payload_mb). Send a smaller payload, or raise asynchronous.max_payload_mb in the spec "
        "(at most 1024) and serve the endpoint again.")


def expired(waited_s: float, ttl_s: int) -> Failure:
    return Failure.said(
        f"The request waited {waited_s:.0f} s in the queue, longer than its RequestTTLSeconds of {ttl_s} s, and "
        "expired before the model saw it. Send fewer requests at once, raise "
        "asynchronous.max_concurrent_invocations_per_instance, or pass a larger RequestTTLSeconds (at most 21600).")


def timed_out(timeout_s: int, log: str) -> Failure:
    return Failure.said(
        f"The model did not answer within the request's InvocationTimeoutSeconds of {timeout_s} s. Pass a larger "
        "InvocationTimeoutSeconds (at most 3600; the endpoint's default is asynchronous.max_processing_s), or make "
        f"the model answer sooner; see the server log {log}.")


def container_exited(crash: ServerCrashedError, log: str) -> Failure:
    """``crash``: the endpoint's ``check_running`` report; its exit code, where the server reports one."""
    exit_ = describe_exit(crash.exit_code) if crash.exit_code is not None else "see its log"
    return Failure.said(
        f"The model container exited ({exit_}) before it answered; the local endpoint does not restart it. See the "
        f"server log {log}, fix the cause, run `tritonsm serve` again and send the request again.")


def interrupted_twice(first: str, second: str, log: str) -> Failure:
    """The container went down twice while it had the request; ``first`` and ``second``: the supervisor's
    reasons."""
    return Failure.said(
        f"The model container went down twice while it had this request ({first}; sent again once it was "
        f"restarted, then {second}). It is not sent a third time: it may be what brings the server down. See the "
        f"server log {log}, and send the request again once the cause is fixed.")


def container_unreachable(error: Exception, log: str) -> Failure:
    return Failure.said(
        f"The model container did not answer ({error}) although it still runs; see the server log {log} and send "
        "the request again.")


def endpoint_stopped() -> Failure:
    return Failure.said(
        "The local endpoint stopped (tritonsm serve ended) before this request was answered. Send it again once "
        "the endpoint runs.")


def refused_by_container(endpoint_name: str, variant: str, status: int, body: bytes, content_type: str,
                         log: str) -> Failure:
    """The container answered 4xx/5xx: its body is the failure object, and the reason is InvokeEndpoint's
    ModelError message quoting it."""
    reason = model_error_message(endpoint_name, variant, status, body.decode(errors="replace"), log)
    return Failure(reason, body, content_type or TEXT, from_container=True)
