"""The local SageMaker Runtime with the real botocore client, the AWS CLI and the SageMaker SDK (no stubs), in
front of the real Triton server: each endpoint kind, JSON and binary+json payloads, and each error class with
its fields as botocore parses them."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import time

import boto3
import numpy as np
import pytest
from botocore.config import Config

from deployment_spec.sections.endpoint import EndpointKind
from deployment_spec.served import LocalComponent
from local_endpoint.endpoints.components import ComponentsEndpoint
from local_endpoint.endpoints.multi_model import MultiModelEndpoint
from local_endpoint.endpoints.single_model import SingleModelEndpoint
from local_endpoint.runtime.local_runtime import LocalRuntime, NamedEndpoint
from local_endpoint.runtime.routes import RuntimeTarget, invoke
from local_endpoint.server.ports import free_port

import triton_model_fixtures as models

SME, MME, IC = "Tests-dev-sme", "Tests-dev-mme", "Tests-dev-ic"
BINARY_JSON = "application/vnd.sagemaker-triton.binary+json;json-header-size="
# What an application has in production; the local runtime checks no signature, any key signs.
FAKE_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local", "AWS_DEFAULT_REGION": "us-east-1"}
ADD_BODY = json.dumps({"inputs": [{"name": "A", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]},
                                  {"name": "B", "shape": [1, 4], "datatype": "FP32", "data": [1, 1, 1, 1]}]})
X_BODY = json.dumps({"inputs": [{"name": "INPUT", "shape": [1, 3], "datatype": "FP32", "data": [1, 2, 3]}]})


@pytest.fixture(scope="module")
def runtime(tarballs: dict[str, pathlib.Path], module_tmp):
    logs = module_tmp.mktemp("logs")
    components = [LocalComponent(f"{IC}-times2", "times2", tarballs["times2"], None, {}),
                  LocalComponent(f"{IC}-times4", "times4", tarballs["times4"], None, {})]
    endpoints = [
        NamedEndpoint(SME, EndpointKind.SINGLE_MODEL, SingleModelEndpoint(tarballs["add"], log_file=logs / "sme.log")),
        NamedEndpoint(MME, EndpointKind.MULTI_MODEL,
                      MultiModelEndpoint([tarballs["times2"], tarballs["times3"]], log_file=logs / "mme.log")),
        NamedEndpoint(IC, EndpointKind.INFERENCE_COMPONENTS, ComponentsEndpoint(components, log_dir=logs), "Blue"),
    ]
    with LocalRuntime(endpoints) as served:
        yield served


def runtime_client(url: str):
    # As the application builds it, with only the endpoint URL changed; one attempt, so errors show at once.
    return boto3.client("sagemaker-runtime", endpoint_url=url, region_name="us-east-1",
                        aws_access_key_id="local", aws_secret_access_key="local",
                        config=Config(retries={"total_max_attempts": 1}))


@pytest.fixture(scope="module")
def client(runtime):
    return runtime_client(runtime.url)


def outputs(response) -> list[float]:
    return json.loads(response["Body"].read())["outputs"][0]["data"]


@pytest.mark.triton
def test_a_single_model_endpoint_answers_invoke_endpoint_as_deployed(client) -> None:
    response = client.invoke_endpoint(EndpointName=SME, ContentType="application/json", Accept="application/json",
                                      Body=ADD_BODY, CustomAttributes="trace=1")
    # The body, its content type and the variant header come back as InvokeEndpoint's output members.
    assert (response["ContentType"], response["InvokedProductionVariant"]) == ("application/json", "AllTraffic")
    assert outputs(response) == [2.0, 3.0, 4.0, 5.0]
    # Triton sets no custom attributes, so none come back (SageMaker passes only what the container sets).
    assert "CustomAttributes" not in response


@pytest.mark.triton
def test_a_body_over_invoke_endpoints_6_mb_is_refused_as_sagemaker_refuses_it(client) -> None:
    # InvokeEndpoint's Body holds at most 6,291,456 bytes (botocore's service model); botocore does not check it,
    # the service answers 413. The same request padded with JSON whitespace to exactly the limit is answered.
    at_limit = ADD_BODY + " " * (6_291_456 - len(ADD_BODY))
    assert outputs(client.invoke_endpoint(EndpointName=SME, ContentType="application/json", Body=at_limit)) == [
        2.0, 3.0, 4.0, 5.0]
    with pytest.raises(client.exceptions.ClientError) as caught:
        client.invoke_endpoint(EndpointName=SME, ContentType="application/json", Body=at_limit + " ")
    error = caught.value.response
    assert (error["ResponseMetadata"]["HTTPStatusCode"], error["Error"]["Code"], error["Error"]["Message"]) == (
        413, "413", "HTTP content length exceeded 6291456 bytes. (the body has 6,291,457 bytes; InvokeEndpoint takes at most 6,291,456: a larger or "
             "slower request belongs on an asynchronous endpoint (an asynchronous: block in the spec: payloads up to "
             "1 GB through S3, up to an hour each; docs/howto/asynchronous.md))")


@pytest.mark.triton
def test_binary_json_built_and_read_by_tritonclient(client) -> None:
    import tritonclient.http as httpclient
    inputs = [httpclient.InferInput(name, [1, 4], "FP32") for name in ("A", "B")]
    for tensor, value in zip(inputs, (1.5, 1.0)):
        tensor.set_data_from_numpy(np.full((1, 4), value, np.float32), binary_data=True)
    body, header_length = httpclient.InferenceServerClient.generate_request_body(
        inputs, outputs=[httpclient.InferRequestedOutput("SUM", binary_data=True)])
    response = client.invoke_endpoint(EndpointName=SME, ContentType=f"{BINARY_JSON}{header_length}", Body=body)
    # The answer's content type carries its JSON header's size, which parse_response_body needs.
    assert response["ContentType"].startswith(BINARY_JSON)
    result = httpclient.InferenceServerClient.parse_response_body(
        response["Body"].read(), header_length=int(response["ContentType"][len(BINARY_JSON):]))
    assert result.as_numpy("SUM").tolist() == [[2.5] * 4]


@pytest.mark.triton
def test_target_model_picks_the_archive_of_a_multi_model_endpoint(client) -> None:
    answers = {model: outputs(client.invoke_endpoint(EndpointName=MME, ContentType="application/json",
                                                     TargetModel=model, Body=X_BODY))
               for model in ("times2.tar.gz", "times3.tar.gz")}
    assert answers == {"times2.tar.gz": [2.0, 4.0, 6.0], "times3.tar.gz": [3.0, 6.0, 9.0]}


@pytest.mark.triton
def test_inference_component_name_picks_the_component(client) -> None:
    response = client.invoke_endpoint(EndpointName=IC, ContentType="application/json",
                                      InferenceComponentName=f"{IC}-times4", Body=X_BODY)
    # The component's own container answers, and the endpoint's variant name is reported.
    assert (outputs(response), response["InvokedProductionVariant"]) == ([4.0, 8.0, 12.0], "Blue")


VALIDATION_ERRORS = [
    ({"EndpointName": "Tests-dev-nope"},
     "Endpoint Tests-dev-nope of account 000000000000 not found. This local runtime serves Tests-dev-ic, "
     "Tests-dev-mme, Tests-dev-sme; pass one of them as EndpointName (the deployed name "
     "<project>-<environment>-<endpoint> of the spec's environment)"),
    ({"EndpointName": SME, "TargetModel": "add.tar.gz"},
     "Endpoint Tests-dev-sme is not a multi-model endpoint and does not support target model header. Leave "
     "TargetModel out (it is single-model)."),
    ({"EndpointName": MME},
     "Endpoint Tests-dev-mme is a multi-model endpoint and the request is missing a target model header; pass "
     "TargetModel, one of: times2.tar.gz, times3.tar.gz (tritonsm invoke --model resolves a model name)"),
    ({"EndpointName": MME, "TargetModel": "times9.tar.gz"},
     "Endpoint Tests-dev-mme is a multi-model endpoint and TargetModel 'times9.tar.gz' is not one of its models; "
     "pass TargetModel, one of: times2.tar.gz, times3.tar.gz (tritonsm invoke --model resolves a model name)"),
    ({"EndpointName": IC},
     "Endpoint Tests-dev-ic hosts inference components and Inference Component Name header is required for "
     "endpoints to which you plan to deploy inference components; pass InferenceComponentName, one of: "
     "Tests-dev-ic-times2, Tests-dev-ic-times4"),
    ({"EndpointName": IC, "InferenceComponentName": "Tests-dev-ic-bert"},
     "Endpoint Tests-dev-ic hosts inference components and InferenceComponentName 'Tests-dev-ic-bert' is not one "
     "of them; pass InferenceComponentName, one of: Tests-dev-ic-times2, Tests-dev-ic-times4"),
    ({"EndpointName": SME, "InferenceComponentName": "Tests-dev-ic-times2"},
     "Endpoint Tests-dev-sme hosts no inference components (single-model); leave InferenceComponentName out "
     "(got 'Tests-dev-ic-times2')"),
]


@pytest.mark.triton
@pytest.mark.parametrize("arguments, message", VALIDATION_ERRORS,
                         ids=["unknown-endpoint", "target-model-on-sme", "no-target-model", "unknown-target-model",
                              "no-component", "unknown-component", "component-on-sme"])
def test_request_mistakes_raise_validation_error(client, arguments: dict[str, str], message: str) -> None:
    with pytest.raises(client.exceptions.ValidationError) as caught:
        client.invoke_endpoint(ContentType="application/json", Body=X_BODY, **arguments)
    assert (caught.value.response["Error"], caught.value.response["ResponseMetadata"]["HTTPStatusCode"]) == (
        {"Code": "ValidationError", "Message": message}, 400)


@pytest.mark.triton
def test_the_containers_own_error_is_a_model_error_with_its_status_and_message(runtime, client) -> None:
    with pytest.raises(client.exceptions.ModelError) as caught:
        client.invoke_endpoint(EndpointName=MME, TargetModel="times2.tar.gz", ContentType="application/json",
                               Body=b'{"inputs": [{"name": "WRONG", "shape": [1], "datatype": "FP32", "data": [1]}]}')
    error = caught.value.response
    original = json.loads(error["OriginalMessage"])["error"]
    # Triton's 400 is the original status; the ModelError members are botocore's fields, as deployed.
    assert (error["ResponseMetadata"]["HTTPStatusCode"], error["OriginalStatusCode"]) == (424, 400)
    assert "unexpected inference input 'WRONG'" in original
    # The message names the server log to read, where SageMaker names the endpoint's CloudWatch log group.
    assert error["Error"]["Message"] == (
        f"Received client error (400) from AllTraffic with message \"{error['OriginalMessage']}\". See "
        f"{runtime.endpoints[1].server.log_path} (deployed: log group /aws/sagemaker/Endpoints/Tests-dev-mme) for "
        "more information.")
    assert error["LogStreamArn"] == ("arn:aws:logs:local:000000000000:log-group:/aws/sagemaker/Endpoints/"
                                     "Tests-dev-mme:log-stream:AllTraffic/local")


def test_an_endpoint_whose_server_is_gone_is_service_unavailable() -> None:
    port = free_port()   # nothing listens there
    reply = invoke({"E": RuntimeTarget("E", EndpointKind.SINGLE_MODEL, port)}, "E", {}, b"{}")
    assert (reply.status, reply.headers["x-amzn-ErrorType"]) == (503, "ServiceUnavailable")
    assert json.loads(reply.body)["Message"].startswith("Endpoint E: its local server did not answer (")


SLOW_TIMEOUT = 4.0   # what the runtime waits here; the slow model takes 10 s (room for a loaded 2-core machine)
# A model whose load takes longer than the runtime waits (SageMaker's cold MME model), and whose answer to a
# negative input does too (a slow container).
SLOW_LOAD_MODEL = models.AFFINE_MODEL.replace(
    "    def initialize(self, args):\n",
    "    def initialize(self, args):\n        import time; time.sleep(10)\n").replace(
    "            y = (x * self.factor", "            if x.min() < 0:\n                import time; time.sleep(10)\n"
                                       "            y = (x * self.factor")


@pytest.fixture(scope="module")
def slow_runtime(module_tmp):
    root = module_tmp.mktemp("slow")
    config = models.AFFINE_CONFIG.format(input="INPUT", output="OUTPUT", factor=2, offset=0)
    models.write_model(root / "repo", "slow", config, {"model.py": SLOW_LOAD_MODEL})
    tarball = models.pack(root / "repo", root / "slow.tar.gz")
    endpoint = NamedEndpoint(MME, EndpointKind.MULTI_MODEL, MultiModelEndpoint([tarball], log_file=root / "mme.log"))
    with LocalRuntime([endpoint], invoke_timeout=SLOW_TIMEOUT) as served:
        yield served


@pytest.fixture(scope="module")
def slow_client(slow_runtime):
    return runtime_client(slow_runtime.url)


@pytest.mark.triton
def test_a_model_still_loading_is_model_not_ready_and_answers_once_loaded(slow_client) -> None:
    client = slow_client
    call = dict(EndpointName=MME, TargetModel="slow.tar.gz", ContentType="application/json", Body=X_BODY)
    with pytest.raises(client.exceptions.ModelNotReadyException) as caught:
        client.invoke_endpoint(**call)
    assert (caught.value.response["ResponseMetadata"]["HTTPStatusCode"], caught.value.response["Error"]["Message"]) == (
        429, "Model slow.tar.gz of endpoint Tests-dev-mme is still loading (it was not loaded and 4 s passed); "
             "loading goes on: wait and try your request again")
    deadline = time.monotonic() + 60
    while True:  # as the documentation says: wait and try again; the load went on meanwhile
        try:
            assert outputs(client.invoke_endpoint(**call)) == [2.0, 4.0, 6.0]
            break
        except client.exceptions.ModelNotReadyException:
            assert time.monotonic() < deadline, "the model never finished loading"
            time.sleep(1)


@pytest.mark.triton
def test_a_loaded_model_too_slow_to_answer_is_a_model_error_not_model_not_ready(slow_client) -> None:
    # The twin of the test above: a timeout counts as "still loading" only for a model that was not loaded.
    client = slow_client
    call = dict(EndpointName=MME, TargetModel="slow.tar.gz", ContentType="application/json")
    deadline = time.monotonic() + 60
    while True:   # loaded (by the test above, or now)
        try:
            client.invoke_endpoint(Body=X_BODY, **call)
            break
        except client.exceptions.ModelNotReadyException:
            assert time.monotonic() < deadline, "the model never finished loading"
            time.sleep(1)
    with pytest.raises(client.exceptions.ModelError) as caught:
        client.invoke_endpoint(Body=X_BODY.replace("[1, 2, 3]", "[-1, 2, 3]"), **call)
    assert (caught.value.response["OriginalStatusCode"], caught.value.response["OriginalMessage"]) == (
        0, "Your invocation timed out while waiting for a response from container AllTraffic (4 s). Review the "
           "server log, resolve the issue, and try again; a larger or slower request belongs on an asynchronous "
           "endpoint (an asynchronous: block in the spec: payloads up to 1 GB through S3, up to an hour each; "
           "docs/howto/asynchronous.md).")


@pytest.mark.triton
def test_tritonsm_invoke_url_names_the_endpoint_when_the_runtime_serves_several(runtime, tmp_path, capsys) -> None:
    from local_endpoint.cli import invoke_main
    np.save(tmp_path / "x.npy", np.array([[1.0, 2.0, 3.0]], np.float32))
    argv = ["--url", runtime.url, "--input", str(tmp_path / "x.npy"), "--input-name", "INPUT"]
    served = "Tests-dev-ic, Tests-dev-mme, Tests-dev-sme"
    assert invoke_main(argv) == 1
    assert capsys.readouterr().err == (
        f"error: the local runtime at {runtime.url} serves {served}; name one with --endpoint-name\n")
    assert invoke_main([*argv, "--endpoint-name", "Tests-dev-x"]) == 1
    assert capsys.readouterr().err == (
        f"error: the local runtime at {runtime.url} serves {served}; --endpoint-name 'Tests-dev-x' is not one of "
        "them\n")
    # Named, the request goes through boto3 InvokeEndpoint like a deployed one.
    assert invoke_main([*argv, "--endpoint-name", MME, "--target-model", "times3.tar.gz"]) == 0
    assert capsys.readouterr().out == "model: times3.tar.gz\nOUTPUT FP32 [1, 3]\n[[3. 6. 9.]]\n"


@pytest.mark.triton
def test_the_aws_cli_invokes_the_local_endpoint(runtime, tmp_path: pathlib.Path) -> None:
    aws = pathlib.Path(sys.executable).parent / "aws"
    (tmp_path / "in.json").write_text(X_BODY)
    env = {**os.environ, **FAKE_CREDENTIALS}
    done = subprocess.run([str(aws), "sagemaker-runtime", "invoke-endpoint", "--endpoint-url", runtime.url,
                           "--endpoint-name", MME, "--target-model", "times3.tar.gz", "--content-type",
                           "application/json", "--body", f"fileb://{tmp_path / 'in.json'}", str(tmp_path / "out.json")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"ContentType": "application/json", "InvokedProductionVariant": "AllTraffic"}
    assert json.loads((tmp_path / "out.json").read_text())["outputs"][0]["data"] == [3.0, 6.0, 9.0]
    refused = subprocess.run([str(aws), "sagemaker-runtime", "invoke-endpoint", "--endpoint-url", runtime.url,
                              "--endpoint-name", MME, "--body", "{}", str(tmp_path / "none.json")],
                             capture_output=True, text=True, env=env, timeout=120)
    # The CLI names the error class and message as it does for a deployed endpoint.
    assert refused.returncode != 0
    assert "An error occurred (ValidationError) when calling the InvokeEndpoint operation: Endpoint Tests-dev-mme " \
           "is a multi-model endpoint and the request is missing a target model header" in refused.stderr


@pytest.mark.triton
def test_the_sagemaker_sdk_endpoint_invokes_through_the_environment_variable(runtime, monkeypatch) -> None:
    from sagemaker.core.resources import Endpoint
    for key, value in {**FAKE_CREDENTIALS, "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME": runtime.url}.items():
        monkeypatch.setenv(key, value)
    response = Endpoint(endpoint_name=SME).invoke(body=ADD_BODY, content_type="application/json",
                                                  session=boto3.Session())
    assert json.loads(response.body.read())["outputs"][0]["data"] == [2.0, 3.0, 4.0, 5.0]
