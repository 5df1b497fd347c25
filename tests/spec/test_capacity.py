"""Measured capacity feeds the invocations target, or the concurrency target, unless the spec sets one."""
import dataclasses
import pathlib

import pytest

from deployment_spec import load_spec
from deployment_spec.cost.capacity import (CapacityError, Measurement, invocations_target, load_capacity,
                                      load_target, save_capacity)
from deployment_spec.sections.endpoint import LoadMetric

ROOT = pathlib.Path(__file__).resolve().parents[2]
MEASURED = Measurement(max_rps_per_instance=25.0, latency_sla_ms=200, p99_ms=180.0,
                       measured_on="local CPU (2 cores)", command="tritonsm bench load vision-nlp --record")


@pytest.fixture()
def endpoint_without_rps():
    ep = load_spec(ROOT / "triton.yaml").endpoints["vision-nlp"]
    return dataclasses.replace(ep, scaling=dataclasses.replace(ep.scaling, max_rps_per_instance=None))


def test_measurement_gives_rps_times_60_times_safety(endpoint_without_rps):
    target = invocations_target(endpoint_without_rps, {"vision-nlp": MEASURED})
    # 25 rps x 60 s x 0.5 = 750 invocations per instance per minute.
    assert target.value == 750.0
    assert target.source == "capacity.json: 25.0 rps measured on local CPU (2 cores) x 60 x 0.5"


def test_spec_value_wins_over_a_measurement():
    ep = load_spec(ROOT / "triton.yaml").endpoints["vision-nlp"]
    # max_rps_per_instance 40 in the spec: 40 x 60 x 0.5.
    assert invocations_target(ep, {"vision-nlp": MEASURED}).value == 1200.0


def test_no_measurement_and_no_spec_value_means_no_invocations_policy(endpoint_without_rps):
    assert invocations_target(endpoint_without_rps, {}) is None


def test_round_trip_and_malformed_file(tmp_path):
    path = tmp_path / "capacity.json"
    save_capacity({"vision-nlp": MEASURED}, path)
    assert load_capacity(path) == {"vision-nlp": MEASURED}
    path.write_text('{"schema": 1, "endpoints": {"x": {"max_rps_per_instance": 1}}}')
    with pytest.raises(CapacityError) as caught:
        load_capacity(path)
    assert str(caught.value).startswith(f"{path}: malformed capacity file (")
    assert str(caught.value).endswith("rerun `tritonsm bench load --record` or delete the file")


def _on_concurrency(ep, **changes):
    return dataclasses.replace(ep, scaling=dataclasses.replace(
        ep.scaling, max_rps_per_instance=None, load_metric=LoadMetric.CONCURRENCY, **changes))


def test_a_measured_concurrency_gives_the_concurrency_target_times_safety(endpoint_without_rps):
    ep = _on_concurrency(endpoint_without_rps)
    target = load_target(ep, {"vision-nlp": dataclasses.replace(MEASURED, max_concurrency=12)})
    # 12 requests in flight within the SLA x 0.5; no invocations target beside it.
    assert (target.value, target.metric, target.measured) == (6.0, "concurrency", True)
    assert target.source == "capacity.json: concurrency 12 within the SLA measured on local CPU (2 cores) x 0.5"
    assert invocations_target(ep, {"vision-nlp": MEASURED}) is None


def test_the_spec_s_concurrency_wins_and_an_old_measurement_gives_none(endpoint_without_rps):
    ep = _on_concurrency(endpoint_without_rps, concurrent_requests_per_model=4.0)
    assert load_target(ep, {"vision-nlp": dataclasses.replace(MEASURED, max_concurrency=12)}).value == 4.0
    # A file recorded before concurrency was measured (no max_concurrency) gives no concurrency target.
    assert load_target(_on_concurrency(endpoint_without_rps), {"vision-nlp": MEASURED}) is None


def test_a_capacity_file_without_concurrency_still_loads(tmp_path):
    path = tmp_path / "capacity.json"
    path.write_text('{"schema": 1, "endpoints": {"x": {"max_rps_per_instance": 1, "latency_sla_ms": 200, '
                    '"p99_ms": 150, "measured_on": "ml.g5.xlarge", "command": "tritonsm bench load"}}}')
    assert load_capacity(path)["x"].max_concurrency is None
