"""The load phases against a deployed endpoint (`tritonsm bench load --endpoint E --deployed`), through
botocore's Stubber: request-bounded phases (never time-bound here), the stop rule, the per-instance figure."""
from __future__ import annotations

import io
import json

import boto3
from botocore.response import StreamingBody
from botocore.stub import ANY, Stubber

from tritonsm.benchmarking import load_deployed
from tritonsm.benchmarking.load_phases import PhasePlan
from tritonsm.checks.smoke_requests import SmokeCase
from deployment_spec.builds.manifest import TensorSpec

CASE = SmokeCase("add", "add-0123456789ab.tar.gz", (TensorSpec("A", "TYPE_FP32", (4,)),),
                 (TensorSpec("SUM", "TYPE_FP32", (4,)),), True, None, 1e-3, 1e-3)
# Each phase ends after max_requests; the 600 s budget is never what ends it.
PLAN = PhasePlan(concurrencies=(1, 2, 4), seconds=600, max_requests=4, latency_threshold_ms=60_000,
                 max_error_rate=0.3, must_reach=None)


def _ok() -> dict:
    body = json.dumps({"outputs": [{"name": "SUM", "datatype": "FP32", "shape": [1, 1], "data": [1.0]}]}).encode()
    return {"Body": StreamingBody(io.BytesIO(body), len(body)), "ContentType": "application/json"}


def _client():
    client = boto3.client("sagemaker-runtime", region_name="us-east-1", aws_access_key_id="test",
                          aws_secret_access_key="test")
    return client, Stubber(client)


def test_phases_run_until_the_error_rate_stops_them_and_the_best_rps_is_per_instance():
    client, stubber = _client()
    request = load_deployed.encode_request(CASE.tensors(), binary=True)
    for _ in range(4):                      # concurrency 1: all answered
        stubber.add_response("invoke_endpoint", _ok(), expected_params={
            "EndpointName": "Triton-staging-ep", "Body": request.body, "ContentType": request.content_type,
            "TargetModel": "add-0123456789ab.tar.gz"})
    for _ in range(2):                      # concurrency 2: half throttled, over the 30 % limit: stop
        stubber.add_response("invoke_endpoint", _ok())
        stubber.add_client_error("invoke_endpoint", service_error_code="ThrottlingException", http_status_code=400)
    lines: list[str] = []
    with stubber:
        result = load_deployed.measure("ep", "Triton-staging-ep", "ml.g5.xlarge", 2, CASE, PLAN, lines.append,
                                       client=client)
        stubber.assert_no_pending_responses()
    assert [(p.concurrency, p.requests, p.errors, p.within_threshold) for p in result.phases] == [
        (1, 4, 0, True), (2, 4, 2, False)]  # concurrency 4 never runs: the test stopped
    assert result.best_rps == result.phases[0].rps / 2
    assert result.model == ("ml.g5.xlarge, deployed endpoint Triton-staging-ep (2 instance(s); req/s divided by 2)")
    assert lines[0] == "  endpoint ep: deployed Triton-staging-ep (ml.g5.xlarge), model add"
    assert "ThrottlingException" in result.phases[1].first_error


def test_a_component_of_an_inference_components_endpoint_is_named_and_measured_per_copy(tmp_path):
    import argparse
    import pathlib
    import sys

    root = pathlib.Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "tests" / "infra" / "fixtures"))
    from fake_build import fake_build

    from tritonsm.benchmarking import runners as commands
    from deployment_spec import load_spec

    spec = load_spec(root / "examples" / "inference-components.yaml")
    manifest = fake_build(spec, tmp_path / "assets")
    args = argparse.Namespace(endpoint="shared-gpu", environment="prod", manifest=manifest, region=None,
                              component="bert")
    client, stubber = _client()
    for _ in range(4):
        # Every request names the component (InferenceComponentName), never a TargetModel.
        stubber.add_response("invoke_endpoint", _ok(), expected_params={
            "EndpointName": "Shared-prod-shared-gpu", "Body": ANY, "ContentType": ANY,
            "InferenceComponentName": "Shared-prod-shared-gpu-bert"})
    with stubber:
        result = commands._deployed_load(args, spec, PhasePlan(concurrencies=(1,), seconds=600, max_requests=4,
                                                               latency_threshold_ms=60_000, must_reach=None),
                                         client=client)
        stubber.assert_no_pending_responses()
    # prod starts bert with 2 copies: the figure is per copy, as the component's scaling target is.
    assert result.model == "ml.g5.12xlarge, deployed endpoint Shared-prod-shared-gpu (2 copy(s); req/s divided by 2)"
    assert result.best_rps == result.phases[0].rps / 2
