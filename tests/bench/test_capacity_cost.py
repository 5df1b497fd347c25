"""`bench load --record` keeps, beside each measurement in capacity.json, its cost per million inferences in each
region the spec deploys the endpoint in, with what the figure assumes; it prints them, labels a stand-in, and keeps
an unknown price unknown. The prices are the test figures of conftest.priced_spec (a temp refresh cache)."""
import json
import pathlib

import pytest

from deployment_spec import load_spec
from deployment_spec.cost import pricing
from deployment_spec.cost.capacity import CapacityError, Measurement, load_capacity
from deployment_spec.cost.measured_cost import RegionCost
from tritonsm.benchmarking import runners as commands
from deployment_spec.cost.measured_cost import measured_hardware
from tritonsm.benchmarking.cost_per_million import cost_lines, priced

from bench_prices import TEST_PRICE_SOURCE

ROOT = pathlib.Path(__file__).resolve().parents[2]
CPU = "local CPU (2 cores), pt-db (dynamic batching, 1 instance), load model"


def _measured(on: str, rps: float = 10) -> Measurement:
    return Measurement(max_rps_per_instance=rps, latency_sla_ms=300, p99_ms=40, measured_on=on, command="test")


def _priced(spec, on: str, rps: float = 10) -> Measurement:
    return priced(spec, "tiny-sme", _measured(on, rps), pricing.load_prices(spec.root))


def test_each_region_gets_its_figure_with_what_it_assumes(priced_spec):
    costs = _priced(priced_spec, "ml.g5.xlarge (1 instance)").cost_per_million
    # $2/h / (10 req/s x 3600 s) x 1e6 = $55.56; us-west-2 serves it on ml.g6.xlarge: $3.60/h -> $100.
    assert costs == (
        RegionCost("eu-west-1", "ml.g5.xlarge", "ml.g5.xlarge", False, 10, 300, None,
                   unknown=pricing.load_prices(priced_spec.root).missing("eu-west-1", "ml.g5.xlarge")),
        RegionCost("us-east-1", "ml.g5.xlarge", "ml.g5.xlarge", False, 10, 300, 55.555556, 2.0, TEST_PRICE_SOURCE,
                   "2026-11-01"),
        RegionCost("us-west-2", "ml.g6.xlarge", "ml.g5.xlarge", True, 10, 300, 100.0, 3.6, TEST_PRICE_SOURCE,
                   "2026-11-01"))


def test_the_printed_lines_give_every_figure_and_say_what_a_stand_in_is(priced_spec):
    lines = cost_lines("tiny-sme", _priced(priced_spec, "ml.g5.xlarge (1 instance)"))
    assert lines[1:] == [
        "$55.56 per million inferences in us-east-1 at 10 req/s per instance within the 300 ms SLA (ml.g5.xlarge at "
        f"$2/h in us-east-1, prices of 2026-11-01, on demand, source: {TEST_PRICE_SOURCE})",
        "$100 per million inferences in us-west-2 at 10 req/s per instance within the 300 ms SLA (ml.g6.xlarge at "
        f"$3.6/h in us-west-2, prices of 2026-11-01, on demand, source: {TEST_PRICE_SOURCE}); measured on "
        "ml.g5.xlarge (1 instance), not on ml.g6.xlarge: a stand-in figure, not the endpoint's cost"]


def test_an_unknown_price_is_kept_unknown_with_how_to_price_it(priced_spec):
    eu = _priced(priced_spec, "ml.g5.xlarge").cost_per_million[0]
    assert (eu.region, eu.usd_per_million, eu.usd_per_hour) == ("eu-west-1", None, None)
    assert eu.unknown == (
        "unknown price: ml.g5.xlarge in eu-west-1 is in none of sagemaker_realtime-2026-11-01.json of 2026-11-01, "
        "sagemaker_realtime.json of 2026-11-28; with AWS credentials (pricing:GetProducts) run `tritonsm prices "
        "refresh --region eu-west-1 --instance-type ml.g5.xlarge`")
    assert cost_lines("tiny-sme", _priced(priced_spec, "ml.g5.xlarge"))[0] == eu.unknown


def test_a_cpu_measurement_is_labelled_a_cpu_stand_in_in_every_region(priced_spec):
    measurement = _priced(priced_spec, CPU)
    assert [(c.measured_on, c.stand_in, c.cpu_stand_in) for c in measurement.cost_per_million] == [
        ("local CPU", True, True)] * 3
    lines = cost_lines("tiny-sme", measurement)
    # Every priced line says it; the unknown one (eu-west-1) has no figure to mislabel.
    assert lines[1].endswith(f"; measured on {CPU}, not on ml.g5.xlarge: a CPU stand-in figure, not the endpoint's "
                             "cost")
    assert lines[2].endswith(f"; measured on {CPU}, not on ml.g6.xlarge: a CPU stand-in figure, not the endpoint's "
                             "cost")
    assert lines[0].startswith("unknown price: ")


@pytest.mark.parametrize("measured_on, hardware", [
    ("local CPU (2 cores), endpoint e's own model m as a CPU stand-in", "local CPU"),
    ("ml.g5.xlarge, deployed endpoint X (1 instance(s); req/s divided by 1)", "ml.g5.xlarge"),
    ("ml.g5.xlarge (1 instance), Inference Recommender job J", "ml.g5.xlarge"),
    # Text that names no hardware is not taken for the served type: it stays a stand-in.
    ("by hand", "by hand")])
def test_where_a_measurement_ran_is_read_from_its_text(measured_on, hardware):
    assert measured_hardware(measured_on) == hardware


def test_a_measurement_without_throughput_has_no_figure(priced_spec):
    us = _priced(priced_spec, "ml.g5.xlarge", rps=0).cost_per_million[1]
    assert (us.usd_per_million, us.unknown) == (
        None, "nothing to price: no throughput within the 300 ms latency threshold (0 req/s per instance)")


def test_an_endpoint_deployed_in_no_region_says_how_to_price_it(tiny_spec):
    import dataclasses

    no_region = dataclasses.replace(tiny_spec, environments={
        name: dataclasses.replace(env, region=None) for name, env in tiny_spec.environments.items()})
    measurement = priced(no_region, "tiny-sme", _measured("ml.g5.xlarge"), pricing.load_prices(None))
    assert measurement.cost_per_million == ()
    assert cost_lines("tiny-sme", measurement) == [(
        "no cost per million for endpoint tiny-sme: no environment of the spec deploys it with a region (prices are "
        "per region); set environments.<name>.region of those that deploy it")]


def test_the_record_writes_the_figures_into_capacity_json_and_prints_them(priced_spec, tmp_path, capsys):
    path = tmp_path / "capacity.json"
    commands._record(priced_spec, "tiny-sme", _measured(CPU), path, pricing.load_prices(priced_spec.root))
    written = json.loads(path.read_text())["endpoints"]["tiny-sme"]["cost_per_million"]
    assert written[1] == {
        "region": "us-east-1", "instance_type": "ml.g5.xlarge", "measured_on": "local CPU", "stand_in": True,
        "rps_within_sla": 10, "latency_sla_ms": 300, "usd_per_million": 55.555556, "usd_per_hour": 2.0,
        "price_source": TEST_PRICE_SOURCE, "price_date": "2026-11-01", "unknown": None}
    assert written[0]["usd_per_million"] is None and written[0]["unknown"].startswith("unknown price: ")
    # What the app and `tritonsm cost` read back is what was priced.
    assert load_capacity(path)["tiny-sme"] == _priced(priced_spec, CPU)
    out = capsys.readouterr().out.splitlines()
    assert out[1:] == ["cost: " + line for line in cost_lines("tiny-sme", _priced(priced_spec, CPU))]


def test_a_capacity_file_written_before_costs_reads_as_before(tmp_path):
    path = tmp_path / "capacity.json"
    path.write_text(json.dumps({"schema": 1, "endpoints": {"classifier": {
        "max_rps_per_instance": 30.0, "latency_sla_ms": 500.0, "p99_ms": 412.0, "measured_on": "ml.g5.xlarge",
        "command": "tritonsm bench recommender classifier --import j"}}}))
    assert load_capacity(path) == {"classifier": Measurement(30.0, 500.0, 412.0, "ml.g5.xlarge",
                                                             "tritonsm bench recommender classifier --import j")}


def test_a_malformed_cost_entry_names_where_it_is(tmp_path):
    path = tmp_path / "capacity.json"
    path.write_text(json.dumps({"schema": 1, "endpoints": {"classifier": {
        "max_rps_per_instance": 30.0, "latency_sla_ms": 500.0, "p99_ms": 412.0, "measured_on": "ml.g5.xlarge",
        "command": "c", "cost_per_million": [{"region": "us-east-1", "usd": 1}]}}}))
    with pytest.raises(CapacityError) as caught:
        load_capacity(path)
    assert str(caught.value) == (
        f"{path}: malformed capacity file (endpoints.classifier.cost_per_million[0]: RegionCost.__init__() got an "
        "unexpected keyword argument 'usd'; the fields are region, instance_type, measured_on, stand_in, "
        "rps_within_sla, latency_sla_ms, usd_per_million, usd_per_hour, price_source, price_date, unknown); rerun "
        "`tritonsm bench load --record` or delete the file")
    path.write_text(json.dumps({"schema": 1, "endpoints": {"classifier": {
        "max_rps_per_instance": 30.0, "latency_sla_ms": 500.0, "p99_ms": 412.0, "measured_on": "ml.g5.xlarge",
        "command": "c", "cost_per_million": 55.5}}}))
    with pytest.raises(CapacityError) as caught:
        load_capacity(path)
    assert str(caught.value) == (
        f"{path}: malformed capacity file (endpoints.classifier.cost_per_million: got 55.5; a list of per-region "
        "cost objects is expected); rerun `tritonsm bench load --record` or delete the file")


def test_a_broken_price_file_stops_a_recording_run_before_it_measures(priced_spec, capsys):
    from tritonsm.cli import main

    broken = priced_spec.root / "build" / "prices" / "sagemaker_realtime-2026-12-01.json"
    broken.write_text("{")
    code = main(["bench", "--spec", str(priced_spec.path), "load", "--configs", "pt-db", "--record", "tiny-sme",
                 "--concurrency", "1"])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {broken}: unreadable price file (")
    assert err.endswith("); rerun `tritonsm prices refresh` or delete it\n")


def test_the_shipped_snapshot_prices_what_a_source_gives_and_leaves_the_rest_unknown():
    # us-east-1's ml.g5.xlarge has a cited figure; us-west-2 has none (only an inferred one: not shipped).
    spec = load_spec(ROOT / "triton.yaml")
    measurement = priced(spec, "classifier", _measured("ml.g5.xlarge"), pricing.load_prices(None))
    by_region = {c.region: c for c in measurement.cost_per_million}
    assert by_region["us-east-1"].usd_per_million is not None
    assert by_region["us-west-2"].usd_per_million is None
    assert by_region["us-west-2"].unknown.startswith("unknown price: ml.g5.xlarge in us-west-2 is in none of ")
