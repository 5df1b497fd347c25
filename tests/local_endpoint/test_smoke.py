"""`tritonsm smoke`'s checks against the real local endpoint (Triton, Python backend) and, for the deployed
path, against sagemaker-runtime through botocore's Stubber (no AWS)."""

from __future__ import annotations

import io
import json
import pathlib
import types

import boto3
import numpy as np
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber

from tritonsm.checks import smoke_requests as smoke
from deployment_spec.sections.endpoint import EndpointKind
from deployment_spec.builds.manifest import Artifact, EndpointArtifacts, Manifest, ModelEntry, TensorSpec
from local_endpoint import SingleModelEndpoint
from local_endpoint.client.payload import encode_request

FOUR = (TensorSpec("A", "TYPE_FP32", (4,)), TensorSpec("B", "TYPE_FP32", (4,)))


def _manifest(outputs=(TensorSpec("SUM", "TYPE_FP32", (4,)),), kind="single-model", file="add-0123456789ab.tar.gz"):
    entry = ModelEntry("add", "add", "python", 8, FOUR, tuple(outputs), "0" * 64)
    built = EndpointArtifacts(kind, (Artifact(file, "0" * 64, 1, ("add",)),), "add" if kind == "single-model" else None)
    return Manifest("25.09", {"add": entry}, {"ep": built}), built


def _cases(**manifest_args):
    manifest, built = _manifest(**manifest_args)
    kind = EndpointKind(manifest_args.get("kind", "single-model"))
    return smoke.cases(types.SimpleNamespace(kind=kind), built, manifest, {})


@pytest.fixture(scope="module")
def add_endpoint(tarballs: dict[str, pathlib.Path], module_tmp):
    with SingleModelEndpoint(tarballs["add"], default_model="add",
                             log_file=module_tmp.mktemp("logs") / "smoke.log") as endpoint:
        yield endpoint


def test_the_local_endpoint_answers_as_the_build_recorded_and_a_recording_round_trips(add_endpoint, tmp_path):
    lines: list[str] = []
    results = smoke.run(smoke.LocalClient(add_endpoint.url), _cases(), log=lines.append)
    assert [r.problems for r in results] == [[]]
    assert results[0].outputs == {"SUM": [[1.0, 1.0, 1.0, 1.0]]}  # 0.5 + 0.5, batch 1
    smoke.save_recording(results, tmp_path / "expected.json")
    again = smoke.run(smoke.LocalClient(add_endpoint.url), _cases(), smoke.load_recording(tmp_path / "expected.json"),
                      log=lines.append)
    assert again[0].problems == [] and again[0].compared
    assert lines == ["  add: ok, outputs as recorded by the build", "  add: ok, values match the recording"]


def test_a_local_answer_unlike_the_manifest_or_the_recording_is_reported(add_endpoint):
    cases = _cases(outputs=(TensorSpec("SUM", "TYPE_FP16", (5,)), TensorSpec("EXTRA", "TYPE_FP32", (1,))))
    [result] = smoke.run(smoke.LocalClient(add_endpoint.url), cases, {"add": {"SUM": [[1.0, 1.0, 1.0, 2.0]]}},
                         log=lambda _: None)
    assert result.problems == [
        "model add: output SUM is FP32, the build recorded FP16",
        "model add: output SUM has shape [1, 4], the build recorded [1, 5] (-1: any size)",
        "model add: output EXTRA is missing (got SUM)",
        "model add: output SUM differs from the recording by up to 1 (tolerance atol 0.001, rtol 0.001)",
    ]


def test_nothing_listening_is_one_failed_case_not_an_abort():
    [result] = smoke.run(smoke.LocalClient("http://127.0.0.1:9"), _cases(), log=lambda _: None)
    assert result.problems[0].startswith("model add: nothing answers at http://127.0.0.1:9")


def _runtime():
    client = boto3.client("sagemaker-runtime", region_name="us-east-1", aws_access_key_id="test",
                          aws_secret_access_key="test")
    return client, Stubber(client)


def _answer(values: list[float]) -> dict:
    body = json.dumps({"model_name": "add", "outputs": [
        {"name": "SUM", "datatype": "FP32", "shape": [1, len(values)], "data": values}]}).encode()
    return {"Body": StreamingBody(io.BytesIO(body), len(body)), "ContentType": "application/json"}


def test_the_deployed_path_sends_each_multi_model_target_and_checks_the_answer():
    client, stubber = _runtime()
    [case] = _cases(kind="multi-model")
    request = encode_request(case.tensors(), binary=True)
    stubber.add_response("invoke_endpoint", _answer([1.0, 1.0, 1.0, 1.0]), expected_params={
        "EndpointName": "Triton-staging-ep", "Body": request.body, "ContentType": request.content_type,
        "TargetModel": "add-0123456789ab.tar.gz"})
    stubber.add_response("invoke_endpoint", _answer([1.0, np.nan, 1.0, 1.0]))
    with stubber:
        deployed = smoke.DeployedClient("Triton-staging-ep", "us-east-1", client)
        first, second = (smoke.run(deployed, [case], log=lambda _: None)[0] for _ in range(2))
        stubber.assert_no_pending_responses()
    assert case.target_model == "add-0123456789ab.tar.gz" and first.problems == []
    assert second.problems == ["model add: output SUM holds NaN or infinite values"]


def test_a_deployed_model_error_names_the_endpoint():
    client, stubber = _runtime()
    stubber.add_client_error("invoke_endpoint", service_error_code="ModelError", service_message="boom",
                             http_status_code=424)
    with stubber:
        [result] = smoke.run(smoke.DeployedClient("Triton-staging-ep", client=client), _cases(), log=lambda _: None)
    assert result.problems == ["model add: endpoint 'Triton-staging-ep' rejected the request (ModelError, HTTP 424): boom"]
