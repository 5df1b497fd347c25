"""InvokeEndpointAsync's checks, the cloud's layout, the object names and the notification, without a server; and
the audits the server tests rely on, shown to fail on a planted fault (a guard that finds nothing must be able to)."""
from __future__ import annotations

import datetime
import json
import re

import pytest

from deployment_spec.sections.asynchronous import Asynchronous
from local_endpoint.asynchronous import notifications
from local_endpoint.asynchronous.job import new_job
from local_endpoint.asynchronous.locations import S3Location, Topic, locations_for, topic_accounts
from local_endpoint.asynchronous.request import AsyncRequest, parse_request
from local_endpoint.runtime.errors import RuntimeReply

from async_fixtures import audit, max_overlap

SETTINGS = Asynchronous(request_ttl_s=600, oldest_request_age_s=300, max_processing_s=120)
LOCATION = {"X-Amzn-SageMaker-InputLocation": "s3://tritonsm-local/async/ep/input/one.json"}
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def refusal(headers: dict[str, str], body: bytes = b"") -> str:
    reply = parse_request(headers, body, SETTINGS)
    assert isinstance(reply, RuntimeReply), reply
    assert (reply.status, reply.headers["x-amzn-ErrorType"]) == (400, "ValidationError")
    message: str = json.loads(reply.body)["Message"]
    return message


def accepted(headers: dict[str, str], body: bytes = b"") -> AsyncRequest:
    request = parse_request(headers, body, SETTINGS)
    assert isinstance(request, AsyncRequest), request
    return request


def test_a_request_without_ttl_or_timeout_gets_the_endpoint_defaults_and_a_generated_id() -> None:
    request = accepted({**LOCATION, "x-amzn-sagemaker-content-type": "application/json"})   # names ignore case
    assert (request.ttl_s, request.invocation_timeout_s, request.content_type) == (600, 120, "application/json")
    assert UUID.fullmatch(request.inference_id)
    assert (request.input_location, request.inline_body) == (LOCATION["X-Amzn-SageMaker-InputLocation"], None)


def test_the_request_ttl_and_timeout_headers_override_the_defaults() -> None:
    request = accepted({**LOCATION, "X-Amzn-SageMaker-RequestTTLSeconds": "60",
                        "X-Amzn-SageMaker-InvocationTimeoutSeconds": "3600", "X-Amzn-SageMaker-Inference-Id": "job 7"})
    assert (request.ttl_s, request.invocation_timeout_s, request.inference_id) == (60, 3600, "job 7")


@pytest.mark.parametrize(("header", "value", "message"), [
    ("X-Amzn-SageMaker-RequestTTLSeconds", "21601",
     "1 validation error detected: Value '21601' at 'requestTTLSeconds' failed to satisfy constraint: Member must "
     "have value less than or equal to 21600; pass RequestTTLSeconds: how long a request may wait in the queue, "
     "between 60 and 21600 seconds, or leave it out for 600"),
    ("X-Amzn-SageMaker-RequestTTLSeconds", "59",
     "1 validation error detected: Value '59' at 'requestTTLSeconds' failed to satisfy constraint: Member must have "
     "value greater than or equal to 60; pass RequestTTLSeconds: how long a request may wait in the queue, between "
     "60 and 21600 seconds, or leave it out for 600"),
    ("X-Amzn-SageMaker-InvocationTimeoutSeconds", "3601",
     "1 validation error detected: Value '3601' at 'invocationTimeoutSeconds' failed to satisfy constraint: Member "
     "must have value less than or equal to 3600; pass InvocationTimeoutSeconds: how long the model may take, "
     "between 1 and 3600 seconds, or leave it out for 120"),
    ("X-Amzn-SageMaker-InvocationTimeoutSeconds", "soon",
     "1 validation error detected: Value 'soon' at 'invocationTimeoutSeconds' failed to satisfy constraint: Member "
     "must be an integer; pass InvocationTimeoutSeconds: how long the model may take, between 1 and 3600 seconds, or "
     "leave it out for 120"),
    ("X-Amzn-SageMaker-Inference-Id", "x" * 65,
     f"1 validation error detected: Value '{'x' * 65}' at 'inferenceId' failed to satisfy constraint: Member must "
     "have length less than or equal to 64 and consist of printable characters, the first not a space; pass an "
     "InferenceId of 1 to 64 printable characters, or leave it out for a generated one"),
])
def test_a_header_out_of_bounds_is_a_validation_error_naming_member_value_limit_and_fix(header, value, message) -> None:
    assert refusal({**LOCATION, header: value}) == message


def test_the_payload_must_come_from_exactly_one_place_within_its_limits() -> None:
    assert refusal({}) == (
        "Provide exactly one of InputLocation and Body: the request has neither. Upload the payload to the local S3 "
        "and pass its s3://bucket/key as InputLocation, or pass up to 128,000 bytes as Body")
    assert refusal(LOCATION, b"{}") == (
        "Provide exactly one of InputLocation and Body: the request has both. Leave Body out when the payload is in "
        "S3, or InputLocation out to send it inline")
    assert refusal({}, b"x" * 128_001) == (
        "1 validation error detected: Value at 'body' failed to satisfy constraint: Member must have length less "
        "than or equal to 128000 (got 128001 bytes); upload a larger payload to S3 and pass its location as "
        "InputLocation")
    assert refusal({"X-Amzn-SageMaker-InputLocation": "ftp://bucket/key"}) == (
        "1 validation error detected: Value 'ftp://bucket/key' at 'inputLocation' failed to satisfy constraint: "
        "Member must satisfy regular expression pattern: ^(https|s3)://([^/]+)/?(.*)$ and have length 1 to 1024; "
        "pass the object's URI, e.g. s3://tritonsm-local/async/<endpoint>/input/request.json")
    inline = accepted({}, b"x" * 128_000)
    assert (inline.input_location, len(inline.inline_body or b"")) == (None, 128_000)


def test_the_default_layout_is_the_clouds_under_the_local_bucket() -> None:
    where = locations_for("photos", Asynchronous(), "eu-west-1")
    assert (where.input.url, where.output.url, where.failure.url) == (
        "s3://tritonsm-local/async/photos/input/", "s3://tritonsm-local/async/photos/output/",
        "s3://tritonsm-local/async/photos/failure/")
    assert (where.success_topic.arn, where.error_topic.arn) == (
        "arn:aws:sns:eu-west-1:000000000000:photos-async-success",
        "arn:aws:sns:eu-west-1:000000000000:photos-async-error")


def test_the_specs_own_locations_and_topics_are_kept() -> None:
    settings = Asynchronous(output_path="s3://answers/photos", failure_path="s3://answers/broken/",
                            success_topic_arn="arn:aws:sns:eu-west-1:111122223333:done",
                            error_topic_arn="arn:aws:sns:us-east-2:111122223333:failed")
    where = locations_for("photos", settings, "eu-west-1")
    assert (where.output.url, where.failure.url, where.buckets) == (
        "s3://answers/photos/", "s3://answers/broken/", ["answers", "tritonsm-local"])
    assert (where.success_topic, where.error_topic) == (Topic("done", "eu-west-1", "111122223333"),
                                                        Topic("failed", "us-east-2", "111122223333"))
    assert topic_accounts(settings) == {"111122223333"}


def test_an_input_location_may_be_an_https_s3_url() -> None:
    expected = S3Location("bucket-a", "in/x.json")
    assert S3Location.parse("https://bucket-a.s3.eu-west-1.amazonaws.com/in/x.json") == expected
    assert S3Location.parse("https://s3.eu-west-1.amazonaws.com/bucket-a/in/x.json") == expected
    assert S3Location.parse("https://example.com/x") is None


def test_the_answer_and_the_failure_share_one_name_of_their_own() -> None:
    where = locations_for("ep", Asynchronous(), "us-east-1")
    job = new_job(accepted({**LOCATION, "X-Amzn-SageMaker-Inference-Id": "mine"}), where, 0.0)
    stem = job.output.key.removeprefix("async/ep/output/").removesuffix(".out")
    assert UUID.fullmatch(stem)
    assert job.failure.url == f"s3://tritonsm-local/async/ep/failure/{stem}-error.out"
    named = new_job(accepted({**LOCATION, "X-Amzn-SageMaker-S3OutputPathExtension": "/day-1/",
                              "X-Amzn-SageMaker-Filename": "answer.json"}), where, 0.0)
    assert named.output.url == "s3://tritonsm-local/async/ep/output/day-1/answer.json"
    assert named.failure.key.startswith("async/ep/failure/day-1/") and named.failure.key.endswith("-error.out")


def test_the_notification_has_sagemakers_fields_and_the_answer_only_when_small() -> None:
    request = accepted({**LOCATION, "X-Amzn-SageMaker-Content-Type": "application/json",
                        "X-Amzn-SageMaker-Inference-Id": "i-1"})
    request = AsyncRequest(**{**request.__dict__, "received": datetime.datetime(2026, 1, 2, 3, 4, 5, 678000,
                                                                                datetime.timezone.utc)})
    done = notifications.message(region="eu-west-1", endpoint_name="P-dev-ep", request=request,
                                 content_type="application/json", location_key="outputLocation",
                                 location="s3://b/o.out", body=b"[1]")
    assert {k: v for k, v in done.items() if k != "eventTime"} == {
        "awsRegion": "eu-west-1", "receivedTime": "2026-01-02T03:04:05.678Z", "invocationStatus": "Completed",
        "requestParameters": {"contentType": "application/json", "endpointName": "P-dev-ep",
                              "inputLocation": LOCATION["X-Amzn-SageMaker-InputLocation"]},
        "responseParameters": {"contentType": "application/json", "outputLocation": "s3://b/o.out"},
        "inferenceId": "i-1", "eventVersion": "1.0", "eventSource": "aws:sagemaker", "eventName": "InferenceResult",
        "responseBody": {"content": "WzFd", "message": "", "encoding": "BASE64"}}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", done["eventTime"])
    failed = notifications.message(region="eu-west-1", endpoint_name="P-dev-ep", request=request,
                                   content_type="text/plain", location_key="failureLocation", location="s3://b/f",
                                   failure_reason="why", body=b"x" * (128 * 1024 + 1))
    assert (failed["invocationStatus"], failed["failureReason"], "responseBody" in failed) == ("Failed", "why", False)
    assert failed["responseParameters"] == {"contentType": "text/plain", "failureLocation": "s3://b/f"}


ACCEPTED = {"a": ("s3://b/out/1.out", "s3://b/fail/1-error.out"), "b": ("s3://b/out/2.out", "s3://b/fail/2-error.out")}


def test_the_audit_passes_one_object_per_request() -> None:
    found = audit(ACCEPTED, ["s3://b/out/1.out", "s3://b/fail/2-error.out"])
    assert (found.succeeded, found.failed, found.missing, found.twice, found.strays) == (1, 1, [], [], [])


def test_the_audit_finds_a_missing_a_doubled_and_a_stray_object() -> None:
    found = audit(ACCEPTED, ["s3://b/out/1.out", "s3://b/fail/1-error.out", "s3://b/out/9.out"])
    assert (found.missing, found.twice, found.strays) == (["b"], ["a"], ["s3://b/out/9.out"])
    assert (found.succeeded, found.failed) == (0, 0)


def test_the_overlap_measure_sees_more_than_two_at_once() -> None:
    assert max_overlap([(0, 1), (1, 2), (2, 3)]) == 1   # back to back: never two
    assert max_overlap([(0, 3), (0.5, 2), (1, 4), (1.5, 5)]) == 4
