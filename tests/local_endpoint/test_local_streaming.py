"""InvokeEndpointWithResponseStream on the local runtime, in front of the real Triton server streaming a decoupled
Python-backend model (``streaming_model``), with boto3's own client and ``tritonsm invoke --stream``: the parts as
they arrive, an error in the middle as botocore raises it, a refusal before the first part, InvokeEndpoint's whole
event stream, and a client that hangs up."""
from __future__ import annotations

import http.client
import json
import pathlib
import re
import time

import pytest
from botocore.exceptions import EventStreamError

from deployment_spec.sections.endpoint import EndpointKind
from deployment_spec.served import LocalComponent
from local_endpoint.client.local_clients import local_client
from local_endpoint.endpoints.components import ComponentsEndpoint
from local_endpoint.endpoints.single_model import SingleModelEndpoint
from local_endpoint.runtime.local_runtime import LocalRuntime, NamedEndpoint
from tritonsm.cli import main as tritonsm_main

import streaming_model
import triton_model_fixtures as models

NAME = "Tests-dev-stream"
STREAM_PATH = f"/endpoints/{NAME}/invocations-response-stream"
# An endpoint of inference components: one streams (its own container in generate_stream mode), one answers whole.
SHARED, WRITER = "Tests-dev-shared", "Tests-dev-shared-writer"


def event(text: str) -> bytes:
    """One event of Triton's generate-stream route, as the model's words come out."""
    return f'data: {{"model_name":"stream","model_version":"1","text_output":"{text}"}}\n\n'.encode()


def part(text: str) -> dict:
    return {"PayloadPart": {"Bytes": event(text)}}


def generate(text: str, **parameters: object) -> str:
    return json.dumps({"text_input": text, "parameters": parameters})


@pytest.fixture(scope="module")
def runtime(module_tmp):
    root = module_tmp.mktemp("stream")
    streaming_model.write_stream(root / "repository")
    tarball = models.pack(root / "repository", root / "stream.tar.gz")
    named = NamedEndpoint(NAME, EndpointKind.SINGLE_MODEL, SingleModelEndpoint(tarball, log_file=root / "server.log"))
    with LocalRuntime([named], container_contract=True) as served:
        yield served


@pytest.fixture(scope="module")
def shared(module_tmp):
    """The runtime of an endpoint of inference components whose one component streams (a component that answers
    whole is refused by the runtime before any server is asked: tests/local_endpoint/test_event_stream.py)."""
    root = module_tmp.mktemp("shared")
    streaming_model.write_stream(root / "repository")
    components = [LocalComponent(WRITER, "stream", models.pack(root / "repository", root / "stream.tar.gz"), None, {})]
    named = NamedEndpoint(SHARED, EndpointKind.INFERENCE_COMPONENTS, ComponentsEndpoint(components, log_dir=root))
    with LocalRuntime([named]) as served:
        yield served


@pytest.fixture(scope="module")
def client(runtime):
    return local_client("sagemaker-runtime", runtime.url)


def log_path(runtime) -> pathlib.Path:
    return runtime.endpoints[0].server.log_path


def told(runtime, what: str) -> str:
    """The message tail the runtime puts after ``what`` went wrong: where to look."""
    return (f"{what} See {log_path(runtime)} (deployed: log group /aws/sagemaker/Endpoints/{NAME}) "
            "for more information.")


@pytest.mark.triton
def test_the_words_arrive_as_payload_parts_while_the_model_still_produces(client) -> None:
    response = client.invoke_endpoint_with_response_stream(EndpointName=NAME, ContentType="application/json",
                                                           Body=generate("one two three four five"))
    assert (response["ContentType"], response["InvokedProductionVariant"]) == (
        "text/event-stream; charset=utf-8", "AllTraffic")
    arrivals, parts = [], []
    for item in response["Body"]:
        arrivals.append(time.monotonic())
        parts.append(item)
    assert parts == [part("one"), part(" two"), part(" three"), part(" four"), part(" five")]
    # The model sleeps STEP_S after each word: the first part was there four steps before the last was made.
    assert arrivals[-1] - arrivals[0] >= 3 * streaming_model.STEP_S


@pytest.mark.triton
def test_an_error_in_the_middle_of_the_stream_is_botocores_model_stream_error(client, runtime) -> None:
    response = client.invoke_endpoint_with_response_stream(EndpointName=NAME, Body=generate("one two FAIL three"))
    parts = []
    with pytest.raises(EventStreamError) as caught:
        for item in response["Body"]:
            parts.append(item)
    assert parts == [part("one"), part(" two")]
    message = told(runtime, 'Received error with message "the model failed after 2 words" in the middle of the '
                            "response stream from AllTraffic.")
    assert caught.value.response == {"Error": {"Code": "ModelStreamError", "Message": message}}
    assert str(caught.value) == ("An error occurred (ModelStreamError) when calling the "
                                 f"InvokeEndpointWithResponseStream operation: {message}")


@pytest.mark.triton
def test_a_refusal_before_the_first_part_is_invoke_endpoints_model_error(client, runtime) -> None:
    with pytest.raises(client.exceptions.ModelError) as caught:
        client.invoke_endpoint_with_response_stream(EndpointName=NAME, Body=generate("one", bad="yes"))
    original = '{"error":"parameter bad=yes is not one this model takes"}'
    error = caught.value.response
    assert (error["OriginalStatusCode"], error["OriginalMessage"], error["Error"]["Message"]) == (
        400, original, told(runtime, f'Received client error (400) from AllTraffic with message "{original}".'))


@pytest.mark.triton
def test_invoke_endpoint_answers_the_whole_event_stream(client) -> None:
    response = client.invoke_endpoint(EndpointName=NAME, ContentType="application/json",
                                      Body=generate("one two", step_s=0.01))
    assert (response["ContentType"], response["Body"].read()) == (
        "text/event-stream; charset=utf-8", event("one") + event(" two"))


@pytest.mark.triton
def test_a_client_hanging_up_cancels_the_request_and_others_are_answered(client, runtime) -> None:
    words = " ".join(f"w{i}" for i in range(20))   # 4 s of words at STEP_S
    logged = len(log_path(runtime).read_text())
    connection = http.client.HTTPConnection("127.0.0.1", runtime.port, timeout=10)
    connection.request("POST", STREAM_PATH, body=generate(words), headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    assert response.status == 200 and response.read1(65536)   # the first part arrived
    hung_up = time.monotonic()
    connection.close()
    # The model sees response_sender.is_cancelled() at its next word and says so in the server log.
    while not (said := re.findall(r"stream (cancelled|finished) after (\d+) words",
                                  log_path(runtime).read_text()[logged:])):
        assert time.monotonic() - hung_up < 5, "the model never saw the request cancelled"
        time.sleep(0.05)
    assert said[0][0] == "cancelled" and int(said[0][1]) <= 3
    follow_up = client.invoke_endpoint_with_response_stream(EndpointName=NAME, Body=generate("still here"))
    assert list(follow_up["Body"]) == [part("still"), part(" here")]


@pytest.mark.triton
def test_tritonsm_invoke_stream_prints_each_text_output(runtime, capsys) -> None:
    argv = ["invoke", "--url", runtime.url, "--stream", "--text", "one two three", "--parameter", "step_s=0.01"]
    assert tritonsm_main(argv) == 0
    assert capsys.readouterr() == ("one two three\n", "")


@pytest.mark.triton
def test_tritonsm_invoke_stream_tells_a_broken_stream_and_a_refusal(runtime, capsys) -> None:
    assert tritonsm_main(["invoke", "--url", runtime.url, "--stream", "--text", "one FAIL"]) == 1
    broken = told(runtime, 'Received error with message "the model failed after 1 words" in the middle of the '
                           "response stream from AllTraffic.")
    assert capsys.readouterr() == (
        "one\n", f"error: the response stream of endpoint '{NAME}' failed (ModelStreamError): {broken}\n")
    assert tritonsm_main(["invoke", "--url", runtime.url, "--stream", "--text", "one", "--parameter", "bad=1"]) == 1
    original = '{"error":"parameter bad=1 is not one this model takes"}'
    refused = told(runtime, f'Received client error (400) from AllTraffic with message "{original}".')
    assert capsys.readouterr() == (
        "", f"error: endpoint '{NAME}' rejected the request (ModelError, HTTP 400): {refused}\n")


@pytest.mark.triton
def test_the_client_of_the_how_to_page_streams_from_the_local_endpoint(runtime, monkeypatch, capsys) -> None:
    page = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "howto" / "streaming-locally.md").read_text()
    (snippet,) = re.findall(r"```python\n(.*?)```", page, re.S)
    for key, value in {"AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME": runtime.url, "AWS_ACCESS_KEY_ID": "local",
                       "AWS_SECRET_ACCESS_KEY": "local", "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(key, value)
    namespace: dict = {}
    exec(compile(snippet, "streaming-locally.md", "exec"), namespace)
    assert namespace["stream"](NAME, "one two three", step_s=0.01) == "one two three"
    assert capsys.readouterr().out == "one two three\n"
    with pytest.raises(EventStreamError):
        namespace["stream"](NAME, "one FAIL")


@pytest.mark.triton
def test_serves_banner_names_the_streaming_operation(runtime, capsys) -> None:
    from local_endpoint.runtime.cli import _announce_runtime

    _announce_runtime(runtime)
    assert capsys.readouterr().out.splitlines()[1] == (
        f"SageMaker Runtime API: InvokeEndpointWithResponseStream at {runtime.url}/endpoints/ENDPOINT_NAME/"
        f"invocations-response-stream for {NAME}")


@pytest.mark.triton
def test_an_inference_component_streams_from_its_own_container(shared, capsys) -> None:
    """Each component is a container of its own in its own mode: the one whose model is decoupled streams, through
    InferenceComponentName as boto3 sends it; InvokeEndpoint on it answers the whole event stream."""
    from local_endpoint.runtime.cli import _announce_runtime

    client = local_client("sagemaker-runtime", shared.url)
    response = client.invoke_endpoint_with_response_stream(EndpointName=SHARED, InferenceComponentName=WRITER,
                                                           ContentType="application/json", Body=generate("one two"))
    assert list(response["Body"]) == [part("one"), part(" two")]
    whole = client.invoke_endpoint(EndpointName=SHARED, InferenceComponentName=WRITER, ContentType="application/json",
                                   Body=generate("one two", step_s=0.01))
    assert whole["Body"].read() == event("one") + event(" two")
    _announce_runtime(shared)
    assert f"invocations-response-stream for {SHARED}" in capsys.readouterr().out
    argv = ["invoke", "--url", shared.url, "--endpoint-name", SHARED, "--inference-component", WRITER, "--stream",
            "--text", "one two three", "--parameter", "step_s=0.01"]
    assert tritonsm_main(argv) == 0
    assert capsys.readouterr() == ("one two three\n", "")
