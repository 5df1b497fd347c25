"""The ``asynchronous:`` block in the spec: every refusal's exact message, at its spec path.

Each case mutates the example (examples/image-async-sme.yaml, one plain environment) in one way; the same rules
refuse the construct's props (tests/infra/test_async_endpoint.py).
"""
import copy
import pathlib

import pytest
import yaml

from deployment_spec import SpecError, load_spec
from deployment_spec.sections.asynchronous import DEFAULT_BACKLOG_PER_INSTANCE
from deployment_spec.cost.capacity import (Drain, Measurement, backlog_target, load_capacity, load_drains, save_capacity,
                                      save_drains)
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


# --- the backlog target: the spec's, else from the drain rate tritonsm bench drain recorded -----------------

def _endpoint(**asynchronous):
    raw = copy.deepcopy(BASE)
    raw["endpoints"]["photos"]["asynchronous"] = {"oldest_request_age_s": 600, **asynchronous}
    return parse_spec(raw, pathlib.Path("spec.yaml")).environments["dev"].endpoints["photos"]


DRAIN = Drain(drain_rps_per_instance=2.5, concurrency=4, requests=200, measured_on="local CPU (2 cores)",
              command="tritonsm bench drain --endpoint photos --record")


def test_a_measured_drain_rate_sets_the_backlog_target_the_spec_leaves_out(tmp_path):
    path = tmp_path / "capacity.json"
    save_drains({"photos": DRAIN}, path)
    target = backlog_target(_endpoint(), load_drains(path))
    # 2.5 answers/s x the 600 s SLA x the default safety factor 0.5: a request behind it waits ~300 s.
    assert (target.value, target.metric, target.measured) == (750.0, "backlog", True)
    assert target.source == ("capacity.json: drain 2.5 requests/s per instance at concurrency 4 measured on "
                             "local CPU (2 cores) x SLA 600 s x 0.5")


def test_the_spec_s_backlog_target_wins_and_nothing_known_leaves_the_default():
    assert backlog_target(_endpoint(backlog_per_instance=12), {"photos": DRAIN}).source == (
        "spec: asynchronous.backlog_per_instance")
    endpoint = _endpoint()
    assert backlog_target(endpoint, {}) is None
    assert endpoint.asynchronous.backlog_target == DEFAULT_BACKLOG_PER_INSTANCE == 5.0


def test_drain_and_load_measurements_share_the_file_without_erasing_each_other(tmp_path):
    path = tmp_path / "capacity.json"
    load = Measurement(max_rps_per_instance=40, latency_sla_ms=200, p99_ms=150, measured_on="ml.g5.xlarge",
                       command="tritonsm bench load --record classifier")
    save_drains({"photos": DRAIN}, path)
    save_capacity({"classifier": load}, path)
    assert (load_drains(path), load_capacity(path)) == ({"photos": DRAIN}, {"classifier": load})
