"""An endpoint of inference components on the real Triton server: one server per component behind one port,
routed by the InferenceComponentName header; and the deployed path's InferenceComponentName (stubbed, no AWS)."""
from __future__ import annotations

import io
import json
import pathlib
import signal
import subprocess
import sys
import time
import types

import boto3
import numpy as np
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber

from tritonsm.checks import smoke_requests as smoke
from deployment_spec.sections.endpoint import EndpointKind
from deployment_spec.builds.manifest import Artifact, EndpointArtifacts, Manifest, ModelEntry, TensorSpec
from deployment_spec.served import LocalComponent
from local_endpoint.client.http_call import call
from local_endpoint.client.invoke import INFERENCE_COMPONENT_HEADER, invoke_sagemaker_endpoint, invoke_url
from local_endpoint.client.payload import NamedTensor, encode_request
from local_endpoint.endpoints.components import ComponentsEndpoint
from local_endpoint.errors import InvokeError

INPUT = np.array([[1.0, 2.0, 3.0]], dtype=np.float32)
ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def components(tarballs: dict[str, pathlib.Path], module_tmp):
    # A one-model archive (no default needed) and an ensemble archive (its default model named), as
    # deployment_spec.served resolves them for an inference-components endpoint.
    served = [LocalComponent("Ep-dev-e-times2", "times2", tarballs["times2"], None, {}),
              LocalComponent("Ep-dev-e-pipeline", "pipeline", tarballs["ensemble"], "pipeline",
                             {"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "pipeline"})]
    with ComponentsEndpoint(served, log_dir=module_tmp.mktemp("logs")) as endpoint:
        yield endpoint


@pytest.mark.triton
def test_each_request_reaches_the_component_it_names(components) -> None:
    request = encode_request([NamedTensor("INPUT", "FP32", INPUT)], binary=True)
    doubled = invoke_url(components.url, request, inference_component="Ep-dev-e-times2")
    pipeline = invoke_url(components.url, request, inference_component="Ep-dev-e-pipeline")
    # Each component's own container answers: x2 from the one-model archive, x2+1 from the ensemble archive.
    assert (doubled.model_name, doubled.outputs[0].array.tolist()) == ("times2", (INPUT * 2).tolist())
    assert (pipeline.model_name, pipeline.outputs[0].array.tolist()) == ("pipeline", (INPUT * 2 + 1).tolist())
    assert call("127.0.0.1", components.port, "GET", "/ping").status == 200


@pytest.mark.triton
def test_a_request_without_a_known_component_is_refused_with_the_names(components) -> None:
    request = encode_request([NamedTensor("INPUT", "FP32", INPUT)], binary=False)
    for name, said in ((None, "no component named"), ("Ep-dev-e-bert", "'Ep-dev-e-bert' is not one of its components")):
        with pytest.raises(InvokeError) as caught:
            invoke_url(components.url, request, inference_component=name)
        assert str(caught.value) == (
            f"the endpoint rejected the request (HTTP 400): this endpoint hosts inference components and {said}: "
            f"name one with the {INFERENCE_COMPONENT_HEADER} header (InferenceComponentName in InvokeEndpoint, "
            "--inference-component in tritonsm invoke): Ep-dev-e-times2, Ep-dev-e-pipeline")


@pytest.mark.triton
def test_a_components_model_error_names_that_components_log_only(components) -> None:
    # Through the SageMaker runtime: a request the times2 component's Triton refuses (a tensor it does not take)
    # is a ModelError naming the log of that component's server, not every component's.
    from local_endpoint.runtime import routes

    target = routes.RuntimeTarget("Ep-dev-e", EndpointKind.INFERENCE_COMPONENTS, components.port,
                                  components=tuple(components.component_names), log=components.log_path,
                                  component_logs=components.component_logs)
    request = encode_request([NamedTensor("WRONG", "FP32", INPUT)], binary=False)
    reply = routes.invoke({"Ep-dev-e": target}, "Ep-dev-e", {"Content-Type": request.content_type,
                                                            INFERENCE_COMPONENT_HEADER: "Ep-dev-e-times2"},
                          request.body, 30)
    message = json.loads(reply.body)["Message"]
    logs = components.component_logs
    assert (reply.status, sorted(logs)) == (424, ["Ep-dev-e-pipeline", "Ep-dev-e-times2"])
    assert message.startswith("Received client error (400) from AllTraffic with message ") and message.endswith(
        f"See {logs['Ep-dev-e-times2']} (deployed: log group /aws/sagemaker/Endpoints/Ep-dev-e) for more information.")
    assert logs["Ep-dev-e-pipeline"] not in message


@pytest.mark.triton
def test_the_smoke_test_sends_one_case_per_component(components) -> None:
    entry = ModelEntry("times2", "times2", "python", 8, (TensorSpec("INPUT", "TYPE_FP32", (3,)),),
                       (TensorSpec("OUTPUT", "TYPE_FP32", (3,)),), "0" * 64)
    built = EndpointArtifacts("inference-components", (Artifact("times2-0123456789ab.tar.gz", "0" * 64, 1, ("times2",)),))
    cases = smoke.cases(types.SimpleNamespace(kind=EndpointKind.INFERENCE_COMPONENTS, name="e"), built,
                        Manifest("25.09", {"times2": entry}, {"e": built}), {}, component_names={"times2": "Ep-dev-e-times2"})
    [result] = smoke.run(smoke.LocalClient(components.url), cases, log=lambda _: None)
    assert (cases[0].inference_component, cases[0].target_model, result.problems) == ("Ep-dev-e-times2", None, [])


def test_the_deployed_call_names_the_inference_component() -> None:
    client = boto3.client("sagemaker-runtime", region_name="us-east-1", aws_access_key_id="test",
                          aws_secret_access_key="test")
    request = encode_request([NamedTensor("INPUT", "FP32", INPUT)], binary=False)
    body = json.dumps({"model_name": "times2", "outputs": [
        {"name": "OUTPUT", "datatype": "FP32", "shape": [1, 3], "data": [2.0, 4.0, 6.0]}]}).encode()
    with Stubber(client) as stubber:
        # InvokeEndpoint carries InferenceComponentName, nothing else changes.
        stubber.add_response("invoke_endpoint", {"Body": StreamingBody(io.BytesIO(body), len(body)),
                                                 "ContentType": "application/json"}, expected_params={
            "EndpointName": "Shared-staging-shared-gpu", "Body": request.body, "ContentType": request.content_type,
            "InferenceComponentName": "Shared-staging-shared-gpu-bert"})
        response = invoke_sagemaker_endpoint("Shared-staging-shared-gpu", request,
                                             inference_component="Shared-staging-shared-gpu-bert", client=client)
        stubber.assert_no_pending_responses()
    assert response.outputs[0].array.tolist() == [[2.0, 4.0, 6.0]]


def test_invoke_resolves_the_component_from_the_spec(tmp_path) -> None:
    spec = ROOT / "examples" / "inference-components.yaml"
    base = [sys.executable, "-m", "tritonsm", "invoke", "--spec", str(spec), "--endpoint", "shared-gpu",
            "--url", "http://127.0.0.1:9", "--input", str(tmp_path / "in.json")]
    (tmp_path / "in.json").write_text(json.dumps({"inputs": [{"name": "TEXT", "datatype": "BYTES", "shape": [1, 1],
                                                             "data": ["a fine film"]}]}))
    missing = subprocess.run(base, capture_output=True, text=True, cwd=ROOT, timeout=120)
    # Every call to such an endpoint names a component; the spec knows which exist.
    assert missing.returncode == 2
    assert missing.stderr.strip() == (
        "error: endpoint shared-gpu hosts inference components and no --component given; name one with "
        "--component MODEL: resnet50, bert, text-classifier")
    named = subprocess.run(base + ["--component", "text-classifier", "--environment", "staging"],
                           capture_output=True, text=True, cwd=ROOT, timeout=120)
    # Resolved to the staging name and sent; nothing listens on port 9, which the error names.
    assert named.returncode == 1 and "nothing answers at http://127.0.0.1:9" in named.stderr


@pytest.mark.triton
def test_serve_runs_components_until_sigterm_and_stops_every_server(tarballs, tmp_path) -> None:
    from local_endpoint.cli import serve_components  # noqa: F401  (the entry point tritonsm serve uses)
    script = (f"import pathlib, sys; sys.path.insert(0, {str(ROOT)!r})\n"
              "from deployment_spec.served import LocalComponent\n"
              "from local_endpoint.cli import serve_components\n"
              f"sys.exit(serve_components([LocalComponent('c-times2', 'times2', pathlib.Path({str(tarballs['times2'])!r}),"
              f" None, {{}})], log_dir=pathlib.Path({str(tmp_path)!r})))\n")
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        first = process.stdout.readline()
        deadline = time.monotonic() + 120
        while "press Ctrl-C" not in first and time.monotonic() < deadline:
            first += process.stdout.readline()
        assert first.startswith("serving 1 inference component(s) at http://127.0.0.1:")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
    assert "stopped" in process.stdout.read()


@pytest.fixture(scope="module")
def fake_manifest(module_tmp) -> pathlib.Path:
    sys.path.insert(0, str(ROOT / "tests" / "infra" / "fixtures"))
    from fake_build import fake_build

    from deployment_spec import load_spec
    return fake_build(load_spec(ROOT / "examples" / "inference-components.yaml"), module_tmp.mktemp("fake"))


def test_serve_names_only_the_components_of_the_endpoint(fake_manifest, capsys) -> None:
    from tritonsm.cli import main
    spec = str(ROOT / "examples" / "inference-components.yaml")
    base = ["serve", "shared-gpu", "--spec", spec, "--manifest", str(fake_manifest)]
    # Refused before any server starts: an unknown component, and --image (one container per component).
    assert main(base + ["--component", "berta"]) == 2
    assert main(base + ["--image"]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert errors == [
        "error: --component berta: not a model of endpoint shared-gpu (components: resnet50, bert, text-classifier)",
        "error: --image serves single-model and multi-model endpoints; serve an endpoint of inference components on "
        "the local server (one server per component), without --image"]


def test_smoke_in_the_image_skips_an_endpoint_of_components(fake_manifest, capsys) -> None:
    from tritonsm.cli import main
    done = main(["smoke", "shared-gpu", "--spec", str(ROOT / "examples" / "inference-components.yaml"),
                 "--manifest", str(fake_manifest), "--image"])
    # Skipped and said so (the pipeline's deployed smoke test then checks its answers against the manifest only).
    assert done == 0
    assert "smoke shared-gpu: skipped, --image runs single-model and multi-model endpoints" in capsys.readouterr().out
