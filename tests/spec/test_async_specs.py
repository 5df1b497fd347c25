"""The ``asynchronous:`` block in the spec: every refusal's exact message, at its spec path.

Each case mutates the example (examples/image-async-sme.yaml, one plain environment) in one way; the same rules
refuse the construct's props (tests/infra/test_async_endpoint.py).
"""
import copy
import pathlib

import pytest
import yaml

from deployment_spec import SpecError, load_spec
from deployment_spec.spec import parse_spec
from spec_mutations import all_of, set_path

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "image-async-sme.yaml"
BASE = {**yaml.safe_load(EXAMPLE.read_text()), "environments": {"dev": {"region": "us-east-1"}}}
EP = "endpoints.photos"

CASES = {
    "on a multi-model endpoint": (
        all_of(set_path(f"{EP}.kind", "multi-model"), set_path(f"{EP}.scaling", {"min_instances": 1})),
        f"{EP}.asynchronous: got an asynchronous block on kind: multi-model; allowed: single-model endpoints only "
        "(Asynchronous Inference serves one model on one variant: no multi-model endpoints, no inference "
        "components); fix: make the endpoint kind: single-model, or remove asynchronous"),
    "on an inference-components endpoint": (
        all_of(set_path(f"{EP}.kind", "inference-components"), lambda raw: raw["endpoints"]["photos"].pop("scaling")),
        f"{EP}.asynchronous: got an asynchronous block on kind: inference-components; allowed: single-model "
        "endpoints only (Asynchronous Inference serves one model on one variant: no multi-model endpoints, no "
        "inference components); fix: make the endpoint kind: single-model, or remove asynchronous"),
    "with data capture": (
        set_path(f"{EP}.data_capture", {"sampling_percent": 10}),
        f"{EP}.data_capture: got a data capture setting; allowed: no data capture on an asynchronous endpoint "
        "(SageMaker captures real-time requests only); fix: remove data_capture: the requests and the answers are in "
        "S3 already"),
    "with an invocations target": (
        set_path(f"{EP}.scaling.invocations_target", 600),
        f"{EP}.scaling.invocations_target: got 600; allowed: no invocation or concurrency target on an asynchronous "
        "endpoint: SageMaker publishes neither for it; fix: remove it; asynchronous.backlog_per_instance sets the "
        "queue's target"),
    "concurrency out of range": (
        set_path(f"{EP}.asynchronous.max_concurrent_invocations_per_instance", 0),
        f"{EP}.asynchronous.max_concurrent_invocations_per_instance: got 0; allowed: an integer from 1 to 1000; fix: "
        "set it within 1..1000"),
    "a payload over 64 MB before 26.03": (
        set_path("triton_version", "25.09"),
        f"{EP}.asynchronous.max_payload_mb: got 200; allowed: at most 64 on Triton 25.09 (its SageMaker front end "
        "honours --http-max-input-size from 26.03 on); fix: set triton_version to 26.03 or later, or send payloads "
        "of at most 64 MB"),
    "a payload over 1 GB": (
        set_path(f"{EP}.asynchronous.max_payload_mb", 2048),
        f"{EP}.asynchronous.max_payload_mb: got 2048; allowed: an integer from 1 to 1024; fix: set it within 1..1024"),
    "an SLA the TTL makes unreachable": (
        set_path(f"{EP}.asynchronous.request_ttl_s", 600),
        f"{EP}.asynchronous.oldest_request_age_s: got 900; allowed: at most request_ttl_s (600); fix: a request older "
        "than its TTL has expired, so the alarm could never fire; lower oldest_request_age_s or raise request_ttl_s"),
    "an output location that is not s3://": (
        set_path(f"{EP}.asynchronous.output_path", "https://bucket/out"),
        f"{EP}.asynchronous.output_path: got 'https://bucket/out'; allowed: an s3:// location such as "
        "s3://my-bucket/async/output; fix: write it as s3://<bucket>/<prefix>"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_invalid_async_spec_is_rejected_with_its_exact_message(name):
    mutate, expected = CASES[name]
    raw = copy.deepcopy(BASE)
    mutate(raw)
    with pytest.raises(SpecError) as caught:
        parse_spec(raw, pathlib.Path("spec.yaml"))
    assert str(caught.value) == f"spec.yaml: 1 problem\n  - {expected}"


def test_the_example_loads_with_zero_instances_allowed_and_the_input_size_argument():
    spec = load_spec(EXAMPLE)
    endpoint = spec.environments["dev"].endpoints["photos"]
    assert endpoint.scaling is not None and endpoint.scaling.min_instances == 0
    assert endpoint.triton_args == ("--http-max-input-size=209715200",)
    assert endpoint.asynchronous is not None and endpoint.asynchronous.request_ttl_s == 21600  # SageMaker's default
