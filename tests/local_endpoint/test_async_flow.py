"""An application's asynchronous inference code, unchanged but for endpoint URLs, against the local runtime: the
real Triton server, moto's server as S3, SNS and SQS (a child process), boto3 clients as the application makes them.

One runtime for the module: the ``add`` model as an asynchronous endpoint (2 at a time, payloads up to 1 MB, the
answer in notifications) and the same model real-time, to compare answers.
"""
from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
from botocore.exceptions import ClientError

from deployment_spec.sections.asynchronous import Asynchronous
from deployment_spec.sections.endpoint import EndpointKind
from local_endpoint.asynchronous import AsyncSetup
from local_endpoint.endpoints.single_model import SingleModelEndpoint
from local_endpoint.runtime.local_runtime import LocalRuntime, NamedEndpoint

from async_fixtures import REGION, app_client, read_object, split_s3_url, wait_for_object

ASYNC, REALTIME = "Tests-dev-adder", "Tests-dev-realtime"
INPUTS = "s3://tritonsm-local/async/adder/input/"
ADD_BODY = json.dumps({"inputs": [{"name": "A", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]},
                                  {"name": "B", "shape": [1, 4], "datatype": "FP32", "data": [1, 1, 1, 1]}]}).encode()
SETTINGS = Asynchronous(max_concurrent_invocations_per_instance=2, max_payload_mb=1, max_processing_s=60,
                        include_response_in_notifications=True)


@pytest.fixture(scope="module")
def runtime(tarballs: dict[str, pathlib.Path], module_tmp):
    logs = module_tmp.mktemp("logs")
    endpoints = [
        NamedEndpoint(ASYNC, EndpointKind.SINGLE_MODEL,
                      SingleModelEndpoint(tarballs["add"], log_file=logs / "async.log"),
                      asynchronous=AsyncSetup(SETTINGS, "adder", REGION)),
        NamedEndpoint(REALTIME, EndpointKind.SINGLE_MODEL,
                      SingleModelEndpoint(tarballs["add"], log_file=logs / "rt.log")),
    ]
    with LocalRuntime(endpoints) as served:
        yield served


@pytest.fixture(scope="module")
def aws_url(runtime) -> str:
    assert runtime.asynchronous is not None
    url: str = runtime.asynchronous.aws.url
    return url


@pytest.fixture(scope="module")
def s3(aws_url):
    return app_client("s3", aws_url)


@pytest.fixture(scope="module")
def sagemaker(runtime):
    return app_client("sagemaker-runtime", runtime.url)


def put_input(s3: Any, name: str, body: bytes) -> str:
    bucket, prefix = split_s3_url(INPUTS)
    s3.put_object(Bucket=bucket, Key=prefix + name, Body=body)
    return INPUTS + name


def invoke_async(sagemaker: Any, **request: Any) -> dict[str, Any]:
    response: dict[str, Any] = sagemaker.invoke_endpoint_async(EndpointName=ASYNC, ContentType="application/json",
                                                                **request)
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 202
    return response


def failure_of(s3: Any, response: dict[str, Any]) -> str:
    """The failure object's text, once it is there; the request must have no answer."""
    assert wait_for_object(s3, response["OutputLocation"], response["FailureLocation"]) == response["FailureLocation"]
    return read_object(s3, response["FailureLocation"]).decode()


@pytest.mark.triton
def test_the_application_polls_for_its_answer_and_gets_what_real_time_answers(s3, sagemaker) -> None:
    location = put_input(s3, "add.json", ADD_BODY)
    response = invoke_async(sagemaker, InputLocation=location, InferenceId="order-17")
    assert response["InferenceId"] == "order-17"
    assert response["OutputLocation"].startswith("s3://tritonsm-local/async/adder/output/")
    assert response["FailureLocation"].startswith("s3://tritonsm-local/async/adder/failure/")
    assert wait_for_object(s3, response["OutputLocation"], response["FailureLocation"]) == response["OutputLocation"]
    realtime = sagemaker.invoke_endpoint(EndpointName=REALTIME, ContentType="application/json", Body=ADD_BODY)
    answer = read_object(s3, response["OutputLocation"])
    assert answer == realtime["Body"].read()
    assert json.loads(answer)["outputs"][0]["data"] == [2.0, 3.0, 4.0, 5.0]


@pytest.mark.triton
def test_a_small_payload_may_come_inline_as_body(s3, sagemaker) -> None:
    response = invoke_async(sagemaker, Body=ADD_BODY)
    assert wait_for_object(s3, response["OutputLocation"], response["FailureLocation"]) == response["OutputLocation"]
    assert json.loads(read_object(s3, response["OutputLocation"]))["outputs"][0]["data"] == [2.0, 3.0, 4.0, 5.0]


def subscribed_queue(aws_url: str, name: str) -> tuple[Any, str]:
    """An SQS queue of the application's, subscribed to both topics of the endpoint, found by name as an
    application finds them (list_topics)."""
    sns, sqs = app_client("sns", aws_url), app_client("sqs", aws_url)
    queue_url = sqs.create_queue(QueueName=name)["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    topics = {t["TopicArn"].rsplit(":", 1)[1]: t["TopicArn"] for t in sns.list_topics()["Topics"]}
    for topic in ("adder-async-success", "adder-async-error"):
        sns.subscribe(TopicArn=topics[topic], Protocol="sqs", Endpoint=queue_arn)
    return sqs, queue_url


def next_notification(sqs: Any, queue_url: str) -> tuple[str, dict[str, Any]]:
    """The topic and SageMaker's message of the next notification (SNS's envelope around it, as SQS gets it)."""
    for _ in range(20):
        got = sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=1, MaxNumberOfMessages=1).get("Messages", [])
        if got:
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=got[0]["ReceiptHandle"])
            envelope = json.loads(got[0]["Body"])
            return envelope["TopicArn"], json.loads(envelope["Message"])
    raise AssertionError("no notification within 20 s")


@pytest.mark.triton
def test_an_sqs_queue_subscribed_to_the_topics_reads_a_success_and_a_failure(s3, sagemaker, aws_url) -> None:
    sqs, queue_url = subscribed_queue(aws_url, "app-notifications")
    location = put_input(s3, "notified.json", ADD_BODY)
    done = invoke_async(sagemaker, InputLocation=location, InferenceId="ok-1", CustomAttributes="trace=9")
    topic, message = next_notification(sqs, queue_url)
    assert topic == f"arn:aws:sns:{REGION}:000000000000:adder-async-success"
    assert message["invocationStatus"] == "Completed"
    assert message["requestParameters"] == {"contentType": "application/json", "customAttributes": "trace=9",
                                            "endpointName": ASYNC, "inputLocation": location}
    assert message["responseParameters"] == {"contentType": "application/json",
                                             "outputLocation": done["OutputLocation"]}
    assert (message["inferenceId"], message["eventSource"], message["eventVersion"], message["awsRegion"]) == (
        "ok-1", "aws:sagemaker", "1.0", REGION)
    assert message["responseBody"]["encoding"] == "BASE64"   # include_response_in_notifications, answer <= 128 KB

    failed = invoke_async(sagemaker, InputLocation=INPUTS + "never-uploaded.json", InferenceId="bad-1")
    topic, message = next_notification(sqs, queue_url)
    assert topic == f"arn:aws:sns:{REGION}:000000000000:adder-async-error"
    assert (message["invocationStatus"], message["inferenceId"]) == ("Failed", "bad-1")
    assert message["responseParameters"] == {"contentType": "text/plain; charset=utf-8",
                                             "failureLocation": failed["FailureLocation"]}
    assert message["failureReason"] == failure_of(s3, failed)
    assert "responseBody" not in message   # no container answer to include


@pytest.mark.triton
def test_an_input_that_is_not_there_ends_in_a_failure_saying_where_to_upload(s3, sagemaker, aws_url) -> None:
    response = invoke_async(sagemaker, InputLocation=INPUTS + "missing.json")
    assert failure_of(s3, response) == (
        f"The input {INPUTS}missing.json could not be read from the local S3 (NoSuchKey: The specified key does not "
        f"exist.). Upload the request body there before calling InvokeEndpointAsync (the local S3 is {aws_url}: set "
        "AWS_ENDPOINT_URL_S3 to it), or pass the InputLocation you uploaded to.")


@pytest.mark.triton
def test_an_input_outside_the_endpoints_input_location_fails_as_the_deployed_role_would(s3, sagemaker) -> None:
    # The deployed execution role reads requests only under the input location: an object elsewhere, though it
    # exists, fails there (RequestDownloadFailures), so it fails here too.
    bucket, _ = INPUTS.removeprefix("s3://").split("/", 1)
    s3.put_object(Bucket=bucket, Key="elsewhere/request.json", Body=b"{}")
    elsewhere = f"s3://{bucket}/elsewhere/request.json"
    assert failure_of(s3, invoke_async(sagemaker, InputLocation=elsewhere)) == (
        f"The input {elsewhere} is outside this endpoint's input location {INPUTS}: the deployed endpoint's execution "
        "role reads requests only there, so SageMaker could not download it (RequestDownloadFailures). Upload the "
        f"request body under {INPUTS} and pass that InputLocation.")


@pytest.mark.triton
def test_a_payload_over_max_payload_mb_ends_in_a_failure_naming_the_limit(s3, sagemaker) -> None:
    location = put_input(s3, "big.json", b" " * (3 * 2**19))   # 1.5 MB, over max_payload_mb: 1
    assert failure_of(s3, invoke_async(sagemaker, InputLocation=location)) == (
        f"The input {location} is 1572864 bytes (1.5 MB), over this endpoint's limit of 1 MB "
        "(asynchronous.max_payload_mb). Send a smaller payload, or raise asynchronous.max_payload_mb in the spec (at "
        "most 1024) and serve the endpoint again.")


@pytest.mark.triton
def test_a_body_the_model_refuses_keeps_tritons_message(s3, sagemaker, runtime) -> None:
    location = put_input(s3, "wrong.json", b'{"inputs": [{"name": "A", "shape": [1, 4], "datatype": "FP32", '
                                           b'"data": [1, 2, 3, 4]}]}')   # B is missing
    response = invoke_async(sagemaker, InputLocation=location)
    refused = failure_of(s3, response)
    # The failure object is the container's own answer, as SageMaker stores "failure model responses".
    assert json.loads(refused) == {"error": "[request id: <id_unknown>] expected 2 inputs but got 1 inputs for "
                                            "model 'add'. Got input(s) ['A'], but missing required input(s) ['B']. "
                                            "Please provide all required input(s)."}


@pytest.mark.triton
@pytest.mark.parametrize(("request_", "message"), [
    ({"InputLocation": INPUTS + "x.json", "RequestTTLSeconds": 21601},
     "1 validation error detected: Value '21601' at 'requestTTLSeconds' failed to satisfy constraint: Member must "
     "have value less than or equal to 21600; pass RequestTTLSeconds: how long a request may wait in the queue, "
     "between 60 and 21600 seconds, or leave it out for 21600"),
    ({"InputLocation": INPUTS + "x.json", "InvocationTimeoutSeconds": 3601},
     "1 validation error detected: Value '3601' at 'invocationTimeoutSeconds' failed to satisfy constraint: Member "
     "must have value less than or equal to 3600; pass InvocationTimeoutSeconds: how long the model may take, "
     "between 1 and 3600 seconds, or leave it out for 60"),
    ({}, "Provide exactly one of InputLocation and Body: the request has neither. Upload the payload to the local S3 "
         "and pass its s3://bucket/key as InputLocation, or pass up to 128,000 bytes as Body"),
])
def test_botocore_raises_sagemakers_validation_error(sagemaker, request_, message) -> None:
    with pytest.raises(ClientError) as raised:
        sagemaker.invoke_endpoint_async(EndpointName=ASYNC, **request_)
    assert (raised.value.response["Error"]["Code"], raised.value.response["Error"]["Message"]) == (
        "ValidationError", message)


@pytest.mark.triton
def test_each_invoke_operation_refuses_the_other_kind_of_endpoint(sagemaker) -> None:
    with pytest.raises(sagemaker.exceptions.ValidationError) as realtime:
        sagemaker.invoke_endpoint(EndpointName=ASYNC, ContentType="application/json", Body=ADD_BODY)
    assert realtime.value.response["Error"]["Message"] == (
        f"Endpoint {ASYNC} of account 000000000000 is an asynchronous endpoint and does not take InvokeEndpoint. "
        "Upload the request body to S3 (e.g. under s3://tritonsm-local/async/adder/input/) and call "
        "InvokeEndpointAsync with its InputLocation, or send up to 128,000 bytes inline as its Body")
    with pytest.raises(sagemaker.exceptions.ValidationError) as asynchronous:
        sagemaker.invoke_endpoint_async(EndpointName=REALTIME, InputLocation=INPUTS + "x.json")
    assert asynchronous.value.response["Error"]["Message"] == (
        f"Endpoint {REALTIME} of account 000000000000 is not an asynchronous endpoint, and InvokeEndpointAsync calls "
        "asynchronous endpoints only. Call InvokeEndpoint for it, or give the endpoint an asynchronous: block in the "
        "spec and run `tritonsm serve` again")
