"""The load report's cost section (load.json's ``cost``, load.md's table, load.png's panel): each configuration's
best rate within the threshold priced as the recorded endpoint, against its p99; stand-ins marked; an unknown price
drawn as no point, with the reason printed instead. Prices: the test figures of bench_prices."""
import pathlib

import pytest

from deployment_spec.cost import pricing
from tritonsm.benchmarking import load_compare, load_cost, load_cost_plot, load_plot

from bench_prices import TEST_PRICE_SOURCE


def _phase(concurrency, rps, p99):
    return {"concurrency": concurrency, "rps": rps, "p50_ms": p99 / 2, "p99_ms": p99, "within_threshold": p99 <= 300,
            "after_stop": False, "errors": 0, "requests": 10, "invocations_per_minute": rps * 60,
            "triton": {"average_batch": 1.0, "queue_share": 0.1, "queue_ms": 1.0, "compute_ms": 9.0}}


def _config(description, phases, best):
    rps, p99 = best if best else (None, None)
    return {"description": description, "dynamic_batching": True, "instances": 1, "phases": phases,
            "max_rps_within_threshold": rps, "at_concurrency": 2 if best else None, "p50_ms_at_max": None,
            "p99_ms_at_max": p99, "invocations_per_minute_at_max": None, "errors": 0, "requests": 20}


# pt-db met the 300 ms threshold at 10 req/s (p99 210 ms); pt-base never did.
RESULT = {"model": "load model", "payload": "binary+json", "repeats": 1, "gains": [], "seconds": 3,
          "plan": {"concurrencies": [1, 2], "seconds": 1, "max_requests": 50, "latency_threshold_ms": 300.0,
                   "max_error_rate": 0.01},
          "configs": {"pt-db": _config("dynamic batching, 1 instance", [_phase(1, 8, 50), _phase(2, 10, 210)],
                                       (10, 210.0)),
                      "pt-base": _config("no batching, 1 instance", [_phase(1, 5, 400)], None)}}


@pytest.fixture
def cost(priced_spec):
    return load_cost.section(RESULT, priced_spec, "tiny-sme", pricing.load_prices(priced_spec.root))


def test_each_configuration_is_priced_in_each_region_the_endpoint_is_deployed_in(cost):
    figures = [(p["config"], p["region"], p["instance_type"], p["usd_per_million"], p["p99_ms"]) for p in cost["points"]]
    # $2/h / (10 x 3600) x 1e6 = $55.56 (us-east-1, ml.g5.xlarge); $3.60/h -> $100 (us-west-2, ml.g6.xlarge).
    assert figures == [("pt-db", "eu-west-1", "ml.g5.xlarge", None, 210.0),
                       ("pt-db", "us-east-1", "ml.g5.xlarge", 55.555556, 210.0),
                       ("pt-db", "us-west-2", "ml.g6.xlarge", 100.0, 210.0),
                       ("pt-base", "eu-west-1", "ml.g5.xlarge", None, None),
                       ("pt-base", "us-east-1", "ml.g5.xlarge", None, None),
                       ("pt-base", "us-west-2", "ml.g6.xlarge", None, None)]
    # The local configurations are CPU stand-ins, every one of them.
    assert {(p["measured_on"], p["stand_in"]) for p in cost["points"]} == {("local CPU", True)}
    assert cost["points"][4]["unknown"] == ("nothing to price: no throughput within the 300 ms latency threshold (0 "
                                            "req/s per instance)")


def test_without_record_the_section_says_how_to_get_a_figure():
    assert load_cost.section(RESULT, None, None, None) == {"endpoint": None, "points": [], "note": (
        "no cost per million: the configurations are priced as the endpoint they are recorded for (its instance type "
        "in each region it is deployed in); rerun with --record ENDPOINT")}


def test_the_report_table_marks_stand_ins_and_says_what_each_figure_assumes(cost):
    lines = load_cost.markdown(cost)
    assert lines[1] == (
        "Cost per million inferences against p99, priced as endpoint tiny-sme: price per instance-hour / (req/s within "
        "the 300 ms threshold × 3600) × 1e6: one instance kept busy at that rate, no hours per month; throughput from "
        "this run (load.json).")
    assert lines[6] == ("| pt-db | us-east-1 | ml.g5.xlarge | CPU stand-in | 10 | 210 | $55.56 | ml.g5.xlarge at $2/h on "
                        f"demand in us-east-1, prices of 2026-11-01 (source: {TEST_PRICE_SOURCE}) |")
    assert lines[5].startswith("| pt-db | eu-west-1 | ml.g5.xlarge | CPU stand-in | 10 | 210 | unknown | unknown price: "
                               "ml.g5.xlarge in eu-west-1 is in none of ")
    assert lines[-1] == ("A stand-in figure is what the priced instance type would cost at the rate measured elsewhere "
                         "(here the load test's own model on this machine's CPU): not the endpoint's cost.")
    assert load_compare.markdown({**RESULT, "cost": cost}).endswith("\n".join(lines) + "\n")


@pytest.fixture
def axis():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axis = plt.subplots()
    yield axis
    plt.close(fig)


def test_the_panel_draws_a_labelled_hollow_point_per_priced_stand_in(axis, cost):
    load_cost_plot.draw(axis, cost)
    assert [(line.get_xdata()[0], line.get_ydata()[0], line.get_markerfacecolor()) for line in axis.lines] == [
        (210.0, 55.555556, "none"), (210.0, 100.0, "none")]
    assert [t.get_text() for t in axis.texts[:2]] == ["pt-db, us-east-1 (CPU stand-in)",
                                                      "pt-db, us-west-2 (CPU stand-in)"]
    assert axis.get_title() == ("Cost per million inferences against p99\n(hollow: stand-in, not the endpoint's "
                                "cost)")


def test_an_unknown_figure_gets_no_point_and_the_panel_says_why(axis, cost):
    load_cost_plot.draw(axis, cost)
    assert len(axis.lines) == 2  # of six points, four have no figure
    notes = load_cost_plot.notes(cost)
    assert notes[0] == (f"assumes ml.g5.xlarge at $2/h on demand in us-east-1, prices of 2026-11-01 (source: "
                        f"{TEST_PRICE_SOURCE})")
    assert notes[2].startswith("no figure for pt-db in eu-west-1: unknown price: ml.g5.xlarge in eu-west-1 ")
    # One reason, printed once for the points it holds for.
    assert notes[3] == ("no figure for pt-base in eu-west-1, pt-base in us-east-1, pt-base in us-west-2: nothing to "
                        "price: no throughput within the 300 ms latency threshold (0 req/s per instance)")
    assert len(notes) == 4
    assert axis.texts[-1].get_text().replace("\n", " ") == " ".join(notes)


def test_a_point_measured_on_the_served_type_is_filled_and_not_called_a_stand_in(axis, cost):
    # The guard's twin: the same point, measured on the type it prices, loses the mark and the label.
    own = {**cost["points"][1], "stand_in": False, "measured_on": "ml.g5.xlarge"}
    load_cost_plot.draw(axis, {**cost, "points": [own]})
    assert axis.lines[0].get_markerfacecolor() != "none"
    assert axis.texts[0].get_text() == "pt-db, us-east-1"
    assert axis.get_title() == "Cost per million inferences against p99"


def test_with_no_figure_at_all_the_panel_draws_nothing_but_the_reasons(axis):
    load_cost_plot.draw(axis, load_cost.section(RESULT, None, None, None))
    assert len(axis.lines) == 0 and list(axis.get_yticks()) == []
    assert axis.texts[-1].get_text().replace("\n", " ") == load_cost.NO_ENDPOINT


def test_load_png_gets_the_cost_panel(cost, tmp_path: pathlib.Path):
    result = {**RESULT, "cost": cost}
    load_plot.plot(result, tmp_path / "load.png")
    assert (tmp_path / "load.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_endpoint_run_is_priced_as_that_endpoint_in_load_endpoint_md(priced_spec):
    from deployment_spec.cost.capacity import Measurement
    prices = pricing.load_prices(priced_spec.root)
    measured = Measurement(10.0, 300.0, 210.0, "local CPU (2 cores), endpoint tiny-sme's own model tiny-text", "x")
    lines = load_cost.endpoint_markdown(priced_spec, "tiny-sme", measured, prices)
    assert lines[:3] == ["", "Cost per million inferences at the best rate within the threshold, priced as endpoint "
                         "tiny-sme:", ""]
    us_east_1, = [line for line in lines if " in us-east-1 " in line]
    assert us_east_1.startswith("- $55.56 per million inferences in us-east-1 at 10 req/s per instance")
    assert us_east_1.endswith("not on ml.g5.xlarge: a CPU stand-in figure, not the endpoint's cost")
    assert any(line.startswith("- unknown price: ml.g5.xlarge in eu-west-1 ") for line in lines)
    assert load_cost.endpoint_markdown(priced_spec, "tiny-sme", None, prices)[-1] == (
        "- none: no phase met the threshold")
