"""`bench load --record` says what a million inferences cost at the recorded rate, and labels a CPU stand-in."""
import pathlib

from deployment_spec import load_spec
from deployment_spec.capacity import Measurement
from tritonsm.benchmarking.capacity_record import cost_line

# Test prices beside it: ml.g5.xlarge at $2/h in us-east-1 (round test figures, not AWS prices).
SPEC = pathlib.Path(__file__).resolve().parents[1] / "infra" / "fixtures" / "specs" / "budgeted.yaml"


def _measured(on: str) -> Measurement:
    return Measurement(max_rps_per_instance=10, latency_sla_ms=100, p99_ms=40, measured_on=on, command="test")


def test_a_measurement_on_the_endpoint_s_type_gives_its_cost_per_million():
    # $2 / (10 req/s x 3600 s) x 1e6 = $55.56
    assert cost_line(load_spec(SPEC), "classifier", _measured("ml.g5.xlarge (1 instance)")) == (
        "$55.56 per million inferences in us-east-1 (ml.g5.xlarge at $2/h in us-east-1, prices of 2026-11-28)")


def test_a_cpu_measurement_is_labelled_a_stand_in():
    assert cost_line(load_spec(SPEC), "classifier", _measured("local CPU (2 cores)")).endswith(
        "; measured on local CPU (2 cores), not on ml.g5.xlarge: a CPU stand-in figure, not the endpoint's cost")


def test_an_unpriced_type_says_how_to_price_it():
    spec = load_spec(pathlib.Path(__file__).resolve().parents[2] / "triton.yaml")
    line = cost_line(spec, "classifier", _measured("ml.g5.xlarge"))
    assert line.startswith("unknown price: ml.g5.xlarge in us-east-1 is in none of ")
    assert "run `tritonsm prices refresh --region us-east-1 --instance-type ml.g5.xlarge`" in line
