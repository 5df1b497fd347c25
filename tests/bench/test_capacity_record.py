"""The record path of `bench load --record`: a measurement lands in capacity.json and sets the scaling target."""
import json

import pytest

from tritonsm.benchmarking import capacity_record
from deployment_spec.cost.capacity import Measurement, invocations_target, load_capacity, save_capacity
from tritonsm.cli import main

MEASURED = Measurement(max_rps_per_instance=12.5, latency_sla_ms=300, p99_ms=210.0,
                       measured_on="local CPU (2 cores), pt-ig-db", command="tritonsm bench load --record tiny-sme")


def test_recorded_rps_becomes_rps_x_60_x_safety_factor(tiny_spec, tmp_path):
    path = tmp_path / "capacity.json"
    target, note = capacity_record.record(tiny_spec, "tiny-sme", MEASURED, path)
    # 12.5 req/s x 60 s x 0.5 (the default safety factor) = 375 invocations per instance per minute.
    assert target.value == 375.0
    assert note == ("invocations target 375 per instance per minute (capacity.json: 12.5 rps measured on "
                    "local CPU (2 cores), pt-ig-db x 60 x 0.5)")
    # What the CDK app reads back gives the same target.
    assert invocations_target(tiny_spec.endpoints["tiny-sme"], load_capacity(path)).value == 375.0


def test_record_keeps_other_endpoints_and_replaces_its_own(tiny_spec, tmp_path):
    path = tmp_path / "capacity.json"
    other = Measurement(3.0, 100, 90.0, "ml.g5.xlarge", "by hand")
    save_capacity({"elsewhere": other, "tiny-sme": MEASURED}, path)
    newer = Measurement(20.0, 300, 250.0, "local CPU (2 cores), pt-db", "tritonsm bench load --record tiny-sme")
    capacity_record.record(tiny_spec, "tiny-sme", newer, path)
    assert load_capacity(path) == {"elsewhere": other, "tiny-sme": newer}


def test_a_spec_value_wins_and_the_note_says_so(tiny_spec, tmp_path):
    target, note = capacity_record.record(tiny_spec, "tiny-fixed", MEASURED, tmp_path / "capacity.json")
    # max_rps_per_instance 10 in the spec: 10 x 60 x 0.5, whatever was measured.
    assert target.value == 300.0
    assert note == ("the spec sets 10.0 rps x 60 x 0.5 for tiny-fixed, which wins over the measurement; "
                    "remove scaling.invocations_target / scaling.max_rps_per_instance to use it")


def test_an_endpoint_scaling_on_concurrency_gets_the_concurrency_target_noted(tiny_spec, tmp_path):
    import dataclasses

    from deployment_spec.sections.endpoint import LoadMetric

    ep = tiny_spec.endpoints["tiny-sme"]
    on_concurrency = dataclasses.replace(tiny_spec, endpoints={**tiny_spec.endpoints, "tiny-sme": dataclasses.replace(
        ep, scaling=dataclasses.replace(ep.scaling, load_metric=LoadMetric.CONCURRENCY))})
    target, note = capacity_record.record(on_concurrency, "tiny-sme", dataclasses.replace(MEASURED, max_concurrency=6),
                                          tmp_path / "capacity.json")
    assert note == ("concurrency target 3 requests in flight per model (capacity.json: concurrency 6 within the SLA "
                    "measured on local CPU (2 cores), pt-ig-db x 0.5)")
    # A measurement without concurrency (a recommender import) cannot set it: the note says what can.
    _, note = capacity_record.record(on_concurrency, "tiny-sme", MEASURED, tmp_path / "capacity.json")
    assert note == ("endpoint tiny-sme scales on concurrency and this measurement has none; set "
                    "scaling.concurrent_requests_per_model, or record a load test (tritonsm bench load --record)")


@pytest.mark.triton
def test_bench_load_record_writes_the_target_the_app_derives(tiny_spec, tmp_path, capsys):
    # One short configuration on the real local Triton server, then the capacity file.
    path = tmp_path / "capacity.json"
    code = main(["bench", "--spec", str(tiny_spec.path), "load", "--configs", "pt-db", "--concurrency", "1,2",
                 "--phase-seconds", "1", "--max-requests", "50", "--repeats", "2", "--record", "tiny-sme",
                 "--capacity", str(path), "--out", str(tmp_path / "load")])
    assert code == 0
    # Every phase keeps its rounds, each with the machine's load recorded beside its timing.
    phases = json.loads((tmp_path / "load" / "load.json").read_text())["configs"]["pt-db"]["phases"]
    assert [len(p["rounds"]) for p in phases] == [2, 2]
    assert all(len(r["load_average"]) == 3 for p in phases for r in p["rounds"])
    # Triton's own metrics per phase: batches formed, queue share, queue and compute ms per request.
    assert all(set(p["triton"]) == {"average_batch", "queue_share", "queue_ms", "compute_ms"} for p in phases)
    assert all(p["triton"]["average_batch"] >= 1.0 and 0 <= p["triton"]["queue_share"] <= 1 for p in phases)
    assert "- pt-db (dynamic batching, 1 instance): at concurrency 2: " in (tmp_path / "load" / "load.md").read_text()
    assert (tmp_path / "load" / "load.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    measured = load_capacity(path)["tiny-sme"]
    assert measured.latency_sla_ms == 300.0  # the endpoint's alarms.latency_sla_ms
    assert measured.max_rps_per_instance > 0
    # The concurrency of the phase that gave the best throughput, for scaling.load_metric: concurrency.
    assert measured.max_concurrency in (1, 2)
    target = invocations_target(tiny_spec.endpoints["tiny-sme"], {"tiny-sme": measured})
    assert target.value == round(measured.max_rps_per_instance * 60 * 0.5, 2)
    assert (tmp_path / "load" / "load.md").read_text().startswith("Model: encoder")
    assert f"recorded {measured.max_rps_per_instance:g} req/s for endpoint tiny-sme in {path}" in capsys.readouterr().out


@pytest.mark.triton
def test_bench_load_record_prices_the_cpu_run_as_a_stand_in(priced_spec, tmp_path, capsys):
    # The real local server, priced at the test figures of bench_prices ($2/h for ml.g5.xlarge in us-east-1).
    path = tmp_path / "capacity.json"
    code = main(["bench", "--spec", str(priced_spec.path), "load", "--configs", "pt-db", "--concurrency", "1",
                 "--phase-seconds", "1", "--max-requests", "30", "--repeats", "1", "--record", "tiny-sme",
                 "--capacity", str(path), "--out", str(tmp_path / "load"), "--work", str(tmp_path / "work")])
    assert code == 0
    measured = load_capacity(path)["tiny-sme"]
    us = measured.cost_per_million[1]
    assert (us.region, us.instance_type, us.cpu_stand_in, us.usd_per_hour) == ("us-east-1", "ml.g5.xlarge", True, 2.0)
    assert us.usd_per_million == round(2.0 / (measured.max_rps_per_instance * 3600) * 1e6, 6)
    out = capsys.readouterr().out
    assert (f"not on ml.g5.xlarge: a CPU stand-in figure, not the endpoint's cost\n") in out
    cost = json.loads((tmp_path / "load" / "load.json").read_text())["cost"]
    assert [(p["config"], p["region"], p["stand_in"]) for p in cost["points"]] == [
        ("pt-db", region, True) for region in ("eu-west-1", "us-east-1", "us-west-2")]
    assert "| pt-db | us-east-1 | ml.g5.xlarge | CPU stand-in |" in (tmp_path / "load" / "load.md").read_text()


def test_record_of_an_unknown_endpoint_is_refused_before_any_load(tiny_spec, tmp_path, capsys):
    code = main(["bench", "--spec", str(tiny_spec.path), "load", "--record", "nope", "--capacity",
                 str(tmp_path / "c.json")])
    assert code == 2
    assert capsys.readouterr().err == (f"error: --record nope: no such endpoint in {tiny_spec.path} "
                                       "(tiny-sme, tiny-fixed)\n")


@pytest.mark.triton
def test_bench_load_on_the_endpoints_own_model_records_it(tiny_spec, tmp_path):
    # The endpoint's own built tarball (tiny-text, ONNX Runtime int8, through the labelled CPU stand-in).
    import json
    assert main(["build", "--spec", str(tiny_spec.path), "--model", "tiny-text", "--out", str(tmp_path / "assets"),
                 "--work-dir", str(tmp_path / "work")]) == 0
    ids = [[101] + [7] * 14 + [102]]
    (tmp_path / "in.json").write_text(json.dumps({"inputs": [
        {"name": "input_ids", "shape": [1, 16], "datatype": "INT64", "data": ids},
        {"name": "attention_mask", "shape": [1, 16], "datatype": "INT64", "data": [[1] * 16]}]}))
    path = tmp_path / "capacity.json"
    code = main(["bench", "--spec", str(tiny_spec.path), "load", "--endpoint", "tiny-sme", "--cpu-stand-in",
                 "--manifest", str(tmp_path / "assets" / "manifest.json"), "--input", str(tmp_path / "in.json"),
                 "--concurrency", "1,2", "--phase-seconds", "1", "--max-requests", "30", "--record", "tiny-sme",
                 "--capacity", str(path), "--out", str(tmp_path / "load")])
    assert code == 0
    measured = load_capacity(path)["tiny-sme"]
    # Recorded as what it is: this CPU, the endpoint's own model, through the stand-in.
    assert measured.measured_on.endswith("endpoint tiny-sme's own model tiny-text as a CPU stand-in")
    assert measured.max_rps_per_instance > 0 and measured.latency_sla_ms == 300.0
    report = (tmp_path / "load" / "load-endpoint.md").read_text()
    assert report.startswith("Endpoint tiny-sme: local CPU")
    # Priced as the endpoint, from the shipped snapshot's ml.g5.xlarge in us-east-1, and said to be a stand-in.
    assert "\nCost per million inferences at the best rate within the threshold, priced as endpoint tiny-sme:\n" in report
    assert "\n- $" in report and "not on ml.g5.xlarge: a CPU stand-in figure" in report


def test_endpoint_load_records_only_for_its_own_endpoint(tiny_spec, tmp_path, capsys):
    code = main(["bench", "--spec", str(tiny_spec.path), "load", "--endpoint", "tiny-sme", "--record", "tiny-fixed",
                 "--capacity", str(tmp_path / "c.json")])
    assert code == 2
    assert capsys.readouterr().err == (
        "error: --record tiny-fixed with --endpoint tiny-sme: a measurement is recorded for the endpoint it was "
        "taken on; drop --record or make both the same\n")


def test_endpoint_load_of_an_unknown_endpoint_is_refused(tiny_spec, capsys):
    assert main(["bench", "--spec", str(tiny_spec.path), "load", "--endpoint", "nope"]) == 2
    assert capsys.readouterr().err == (
        f"error: --endpoint nope: no such endpoint in {tiny_spec.path} (tiny-sme, tiny-fixed)\n")


def test_load_rounds_out_of_range_are_a_user_error(tiny_spec, capsys):
    assert main(["bench", "--spec", str(tiny_spec.path), "load", "--repeats", "0"]) == 2
    assert capsys.readouterr().err == ("error: --repeats 0: use 1 to 20 interleaved rounds (3 or more give a paired "
                                       "and a quieter-half ratio worth reading)\n")
