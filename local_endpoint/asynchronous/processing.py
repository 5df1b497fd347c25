"""One request's turn at the container: its TTL, its input from S3, the call, and what came of it.

The container is called as InvokeEndpoint calls it (``runtime.routes.send_to_container``: ``POST /invocations``
with the body, ``Content-Type``, ``Accept``, the custom attributes and the inference id), with the request's
InvocationTimeoutSeconds as the deadline. Every way this can go wrong ends in a ``Failure``: never an exception
that would leave the request without its object. One outcome is not final: ``Interrupted``, when the container
went down (exited, or was found unhealthy) while it had the request and `tritonsm serve` is restarting it; the
queue then sends the request again once it serves (``work_queue``).
"""
from __future__ import annotations

import dataclasses
import http.client
import socket
import time
from typing import Any, Callable, Optional, Union

from deployment_spec.sections.asynchronous import Asynchronous
from local_endpoint.asynchronous import failures
from local_endpoint.asynchronous.failures import Failure
from local_endpoint.asynchronous.job import Job
from local_endpoint.asynchronous.locations import S3Location
from local_endpoint.errors import ServerCrashedError
from local_endpoint.runtime.routes import CUSTOM_ATTRIBUTES, INFERENCE_ID, RuntimeTarget, down_reason, send_to_container

EXIT_NOTICE_S = 2.0   # a killed server's connection may drop before its exit is seen: look this long for the exit


@dataclasses.dataclass(frozen=True)
class Answer:
    body: bytes
    content_type: str


@dataclasses.dataclass(frozen=True)
class Interrupted:
    """The supervised container went down with the request (``reason``: the supervisor's, e.g. "the Triton server
    exited unexpectedly with signal SIGKILL"); nothing is written for it yet."""

    reason: str


Outcome = Union[Answer, Failure]


@dataclasses.dataclass(frozen=True)
class Container:
    """The endpoint the queue sends to: its address, and its server's crash check (``check_running``)."""

    target: RuntimeTarget
    check_running: Callable[[], None]


def process(job: Job, *, settings: Asynchronous, s3: Any, s3_url: str, container: Container,
            clock: Callable[[], float], inputs: S3Location) -> Union[Outcome, Interrupted]:
    """What one request came to; never raises for anything the request, the input or the container did.

    ``inputs``: the endpoint's input location. The deployed execution role reads requests only there
    (triton_constructs.async_inference), so an input elsewhere fails here as it would fail there.
    """
    request = job.request
    waited = clock() - job.accepted_at
    if waited > request.ttl_s:
        return failures.expired(waited, request.ttl_s)
    location = request.input_location or ""
    place = S3Location.parse(location)
    if request.inline_body is None and place is not None and (
            place.bucket != inputs.bucket or not place.key.startswith(inputs.key)):
        return failures.input_outside(location, inputs.url)
    payload = request.inline_body if request.inline_body is not None else _read_input(
        location, settings.max_payload_mb, s3, s3_url)
    if isinstance(payload, Failure):
        return payload
    headers = {"Content-Type": request.content_type, "Accept": request.accept,
               CUSTOM_ATTRIBUTES: request.custom_attributes, INFERENCE_ID: request.inference_id}
    log = container.target.log
    try:
        reply = send_to_container(container.target, {k: v for k, v in headers.items() if v}, payload,
                                  request.invocation_timeout_s)
    except (socket.timeout, TimeoutError):
        return failures.timed_out(request.invocation_timeout_s, log)
    except (OSError, http.client.HTTPException) as error:
        down = down_reason(container.target, EXIT_NOTICE_S)   # supervised: restarting, so not the request's end
        if down is not None:
            return Interrupted(down)
        exited = _exit_of(container)
        if exited is not None:
            return failures.container_exited(exited, log)
        return failures.container_unreachable(error, log)
    if reply.status == 502 and (down := down_reason(container.target, 0)) is not None:   # a front door's: the
        return Interrupted(down)                                                          # server behind it went
    if reply.status >= 400:
        return failures.refused_by_container(container.target.name, container.target.variant, reply.status,
                                             reply.body, reply.content_type, log)
    return Answer(reply.body, reply.content_type or "application/octet-stream")


def _read_input(location: str, limit_mb: int, s3: Any, s3_url: str) -> Union[bytes, Failure]:
    """The input object, checked against ``max_payload_mb`` before its body is read."""
    from botocore.exceptions import BotoCoreError, ClientError

    place = S3Location.parse(location)
    if place is None or not place.key:
        return failures.input_unreadable(location, "InvalidLocation", "not an s3://bucket/key or S3 https:// URL "
                                         "naming an object", s3_url)
    try:
        found = s3.get_object(Bucket=place.bucket, Key=place.key)
        size = int(found["ContentLength"])
        if size > limit_mb * 2**20:
            found["Body"].close()
            return failures.payload_too_large(location, size, limit_mb)
        body: bytes = found["Body"].read()
        return body
    except ClientError as error:
        details = error.response.get("Error", {})
        return failures.input_unreadable(location, str(details.get("Code", "Error")),
                                         str(details.get("Message") or "no message"), s3_url)
    except BotoCoreError as error:
        return failures.input_unreadable(location, type(error).__name__, str(error), s3_url)


def _exit_of(container: Container) -> Optional[ServerCrashedError]:
    """The crash report of a container that has exited, waiting ``EXIT_NOTICE_S`` for the exit to show."""
    deadline = time.monotonic() + EXIT_NOTICE_S
    while True:
        try:
            container.check_running()
        except ServerCrashedError as crashed:
            return crashed
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.1)
