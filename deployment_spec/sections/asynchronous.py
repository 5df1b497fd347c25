"""An endpoint's ``asynchronous:`` block: SageMaker Asynchronous Inference in front of one Triton model.

Requests wait in SageMaker's queue; the payload comes from S3 (``InvokeEndpointAsync`` ``InputLocation``), the
answer or the failure goes to S3 and to SNS topics, and the variant may scale to zero instances while the queue is
empty. Sources: botocore's SageMaker service model (``AsyncInferenceConfig``, ``AsyncInferenceClientConfig``:
``MaxConcurrentInvocationsPerInstance`` 1-1000; ``AsyncInferenceNotificationConfig``:
``IncludeInferenceResponseIn``) and SageMaker Runtime service model (``InvokeEndpointAsync``:
``RequestTTLSeconds`` 60-21600, default 21600; ``InvocationTimeoutSeconds`` 1-3600, default 900); the SageMaker
developer guide, "Asynchronous inference" (payloads up to 1 GB, processing up to one hour; one model, one variant,
no data capture). No aws_cdk here: the spec, the constructs and the local endpoint share it.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any, Optional

from deployment_spec.parsing.errors import Problem
from deployment_spec.parsing.parse import Validated, join, meta

# Triton refuses an HTTP request body over 64 MB unless --http-max-input-size is raised (Triton v2.59.0, server
# PR #8174); its SageMaker front end honours that flag from release 26.03 (v2.67.0, PR #8686).
TRITON_DEFAULT_MAX_INPUT_MB = 64
MAX_INPUT_SIZE_FROM_RELEASE = "26.03"
MAX_PAYLOAD_MB = 1024  # InvokeEndpointAsync's input: up to 1 GB (developer guide, "Asynchronous inference")
DEFAULT_REQUEST_TTL_S = 21600  # InvokeEndpointAsync RequestTTLSeconds default (SageMaker Runtime model)
DEFAULT_INVOCATION_TIMEOUT_S = 900  # InvokeEndpointAsync InvocationTimeoutSeconds default
# Queued requests per instance when neither the spec nor a measurement says: the developer guide's autoscaling
# example's target ("Autoscale an asynchronous endpoint", TargetValue 5.0).
DEFAULT_BACKLOG_PER_INSTANCE = 5.0

# The layout under the stage bucket, shared by the constructs, the local queue and the smoke test:
# async/<endpoint>/input/ (callers' requests), .../output/ and .../failure/ (SageMaker's answers).
ASYNC_PREFIX = "async/"


def endpoint_prefix(storage_name: str) -> str:
    """``async/<endpoint>/``: an asynchronous endpoint's folder in the stage bucket."""
    return f"{ASYNC_PREFIX}{storage_name}/"


def input_prefix(storage_name: str) -> str:
    """Where callers put an asynchronous endpoint's requests (its execution role reads only there)."""
    return f"{endpoint_prefix(storage_name)}input/"


_S3_PATH = r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[^\s]*)?"
_TOPIC_ARN = r"arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?"


@dataclasses.dataclass(frozen=True)
class Asynchronous(Validated):
    """Asynchronous Inference settings of a single-model endpoint.

    ``max_concurrent_invocations_per_instance``: requests SageMaker sends one instance at a time
    (``ClientConfig.MaxConcurrentInvocationsPerInstance``; a change replaces the endpoint configuration).
    ``max_payload_mb``: the largest request body the model needs; above Triton's 64 MB default it becomes
    ``--http-max-input-size``, which the SageMaker front end honours from release 26.03 only.
    ``max_processing_s``: the longest one request may take in the container: the default
    ``InvocationTimeoutSeconds`` of the local queue, and the processing-time alarm's threshold.
    ``request_ttl_s``: how long a request may wait, queue included (the local default; SageMaker's is 21600).
    ``backlog_per_instance``: the scaling target on ``ApproximateBacklogSizePerInstance``. Left out: derived from
    the drain rate ``tritonsm bench drain --record`` measured (``deployment_spec.cost.capacity.backlog_target``), else
    ``DEFAULT_BACKLOG_PER_INSTANCE``.
    ``oldest_request_age_s``: the latency SLA: an alarm when the oldest queued request is older.
    ``output_path`` / ``failure_path``: ``s3://`` locations of your own; default: the stage's encrypted bucket,
    ``async/<endpoint>/output/`` and ``async/<endpoint>/failure/``.
    ``success_topic_arn`` / ``error_topic_arn``: SNS topics of your own; default: topics this stack creates,
    encrypted with the stage key.
    ``include_response_in_notifications``: the answer (up to 128 KB) in the success and error messages.
    """

    max_concurrent_invocations_per_instance: int = dataclasses.field(default=4, metadata=meta(minimum=1, maximum=1000))
    max_payload_mb: int = dataclasses.field(default=TRITON_DEFAULT_MAX_INPUT_MB,
                                            metadata=meta(minimum=1, maximum=MAX_PAYLOAD_MB))
    max_processing_s: int = dataclasses.field(default=DEFAULT_INVOCATION_TIMEOUT_S, metadata=meta(minimum=1, maximum=3600))
    request_ttl_s: int = dataclasses.field(default=DEFAULT_REQUEST_TTL_S, metadata=meta(minimum=60, maximum=21600))
    backlog_per_instance: Optional[float] = dataclasses.field(default=None, metadata=meta(minimum=0.1))
    oldest_request_age_s: int = dataclasses.field(default=1800, metadata=meta(minimum=60, maximum=21600))
    output_path: Optional[str] = dataclasses.field(default=None, metadata=meta(
        pattern=_S3_PATH, pattern_help="an s3:// location such as s3://my-bucket/async/output",
        pattern_fix="write it as s3://<bucket>/<prefix>"))
    failure_path: Optional[str] = dataclasses.field(default=None, metadata=meta(
        pattern=_S3_PATH, pattern_help="an s3:// location such as s3://my-bucket/async/failure",
        pattern_fix="write it as s3://<bucket>/<prefix>"))
    success_topic_arn: Optional[str] = dataclasses.field(default=None, metadata=meta(
        pattern=_TOPIC_ARN, pattern_help="an SNS topic ARN such as arn:aws:sns:eu-west-1:123456789012:done",
        pattern_fix="copy the topic's ARN from the SNS console or `aws sns list-topics`"))
    error_topic_arn: Optional[str] = dataclasses.field(default=None, metadata=meta(
        pattern=_TOPIC_ARN, pattern_help="an SNS topic ARN such as arn:aws:sns:eu-west-1:123456789012:failed",
        pattern_fix="copy the topic's ARN from the SNS console or `aws sns list-topics`"))
    include_response_in_notifications: bool = False

    @property
    def backlog_target(self) -> float:
        """The backlog-per-instance target: as set, else the default (the CDK app puts a measured one in first)."""
        return self.backlog_per_instance if self.backlog_per_instance is not None else DEFAULT_BACKLOG_PER_INSTANCE

    @property
    def max_payload_bytes(self) -> int:
        return self.max_payload_mb * 1024 * 1024

    def triton_args(self) -> tuple[str, ...]:
        """Triton arguments the payload limit needs (none at Triton's own default)."""
        if self.max_payload_mb <= TRITON_DEFAULT_MAX_INPUT_MB:
            return ()
        return (f"--http-max-input-size={self.max_payload_bytes}",)

    def problems(self, path: str) -> list[Problem]:
        out = []
        if self.oldest_request_age_s > self.request_ttl_s:
            out.append(Problem(join(path, "oldest_request_age_s"), str(self.oldest_request_age_s),
                               f"at most request_ttl_s ({self.request_ttl_s})",
                               "a request older than its TTL has expired, so the alarm could never fire; lower "
                               "oldest_request_age_s or raise request_ttl_s"))
        return out


# The scaling fields whose policies track Invocations or InvocationsPerInstance, or concurrent requests, which
# SageMaker does not publish for an asynchronous endpoint (developer guide, "Monitoring asynchronous endpoints").
_INVOCATION_TARGETS = ("invocations_target", "max_rps_per_instance", "concurrent_requests_per_model")


def combination_problems(asynchronous: Asynchronous, *, kind: str, data_capture: bool,
                         scaling: Optional[Any], triton_version: str) -> list[Problem]:
    """What SageMaker refuses, or cannot serve, beside Asynchronous Inference, each at its field.

    ``kind``: the endpoint kind's spec value (single-model, multi-model, inference-components). ``scaling``: the
    endpoint's ``Scaling`` (typed ``Any``: endpoint.py imports this module).
    """
    out = []
    if kind != "single-model":
        out.append(Problem("asynchronous", f"an asynchronous block on kind: {kind}",
                           "single-model endpoints only (Asynchronous Inference serves one model on one variant: "
                           "no multi-model endpoints, no inference components)",
                           "make the endpoint kind: single-model, or remove asynchronous"))
    if data_capture:
        out.append(Problem("data_capture", "a data capture setting", "no data capture on an asynchronous endpoint "
                           "(SageMaker captures real-time requests only)",
                           "remove data_capture: the requests and the answers are in S3 already"))
    if scaling is not None:
        for field in _INVOCATION_TARGETS:
            value = getattr(scaling, field)
            if value is not None:
                out.append(Problem(f"scaling.{field}", f"{value:g}", "no invocation or concurrency target on an "
                                   "asynchronous endpoint: SageMaker publishes neither for it",
                                   "remove it; asynchronous.backlog_per_instance sets the queue's target"))
        if scaling.load_metric.value != "invocations":
            out.append(Problem("scaling.load_metric", scaling.load_metric.value, "invocations (the default) on an "
                               "asynchronous endpoint, whose load policy tracks the queue",
                               "remove load_metric; asynchronous.backlog_per_instance sets the queue's target"))
    return out + release_problems(asynchronous, triton_version, "asynchronous")


def release_problems(asynchronous: Asynchronous, triton_version: str, path: str) -> list[Problem]:
    """A payload over Triton's 64 MB default on a release whose SageMaker front end ignores the raised limit."""
    if asynchronous.max_payload_mb <= TRITON_DEFAULT_MAX_INPUT_MB or _release(triton_version) >= _release(
            MAX_INPUT_SIZE_FROM_RELEASE):
        return []
    return [Problem(join(path, "max_payload_mb"), str(asynchronous.max_payload_mb),
                    f"at most {TRITON_DEFAULT_MAX_INPUT_MB} on Triton {triton_version} (its SageMaker front end "
                    f"honours --http-max-input-size from {MAX_INPUT_SIZE_FROM_RELEASE} on)",
                    f"set triton_version to {MAX_INPUT_SIZE_FROM_RELEASE} or later, or send payloads of at most "
                    f"{TRITON_DEFAULT_MAX_INPUT_MB} MB")]


def _release(version: str) -> tuple[int, ...]:
    """``25.09`` -> (25, 9); an unparsable version sorts first (the version check reports it)."""
    found = re.match(r"(\d+)\.(\d+)", version)
    return (int(found.group(1)), int(found.group(2))) if found else (0, 0)
