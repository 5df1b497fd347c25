"""What the spec costs (deployment_spec.cost.figures): floor, ceiling and expected range per environment and endpoint, the
shipped price snapshot's coverage, `tritonsm cost` and its --diff, and the budget refusal.

The prices here are test figures ($1.00 and $2.00 an hour, round on purpose), written as a refresh cache under a
temporary spec folder or built in code: none of them is a SageMaker price.
"""
from __future__ import annotations

import json
import pathlib
import shutil
import subprocess

import pytest
import yaml

from deployment_spec import SpecError, load_spec
from deployment_spec.cost import figures as cost, report as cost_report, pricing
from deployment_spec.facts import instances
from deployment_spec.cost.capacity import Measurement
from deployment_spec.sections.capacity_reservation import CapacityReservation
from deployment_spec.sections.components import ManagedInstances
from deployment_spec.sections.endpoint import EndpointKind, EndpointSpec, Scaling
from deployment_spec.sections.scheduled_scaling import ScheduledScaling
from deployment_spec.facts.sagemaker_instance_types import INSTANCE_TYPES
from tritonsm.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[2]
TEST_DATE = "2026-11-01"
TEST_SOURCE = "test figures"


def _table(figures: dict[str, float], region: str = "us-east-1") -> pricing.PriceTable:
    prices = {region: {t: pricing.Price(usd, region, t, TEST_SOURCE, TEST_DATE) for t, usd in figures.items()}}
    return pricing.PriceTable((pricing.PriceFile(pathlib.Path("test.json"), TEST_SOURCE, TEST_DATE, prices),))


PRICES = _table({"ml.g5.xlarge": 1.0, "ml.g6.xlarge": 2.0})


def _endpoint(**changes: object) -> EndpointSpec:
    fields: dict[str, object] = {"kind": EndpointKind.SINGLE_MODEL, "models": ("m",), "name": "ep",
                                 "scaling": Scaling(min_instances=1, max_instances=3)}
    fields.update(changes)
    return EndpointSpec(**fields)  # type: ignore[arg-type]


def _cost(endpoint: EndpointSpec, prices: pricing.PriceTable = PRICES, **kw: object) -> cost.EndpointCost:
    return cost.endpoint_cost(endpoint, "us-east-1", prices, **kw)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------ the arithmetic

@pytest.mark.parametrize("kind", [EndpointKind.SINGLE_MODEL, EndpointKind.MULTI_MODEL])
def test_a_variant_costs_min_and_max_instances_times_price_times_730_hours(kind):
    result = _cost(_endpoint(kind=kind))
    assert (result.floor.usd, result.ceiling.usd) == (730.0, 3 * 730.0)
    assert (result.floor.instance_hours, result.ceiling.instance_hours) == (730.0, 2190.0)


def test_without_scaling_floor_and_ceiling_are_the_initial_instances():
    result = _cost(_endpoint(scaling=None, initial_instances=2))
    assert (result.floor.usd, result.ceiling.usd) == (1460.0, 1460.0)


def test_inference_components_bill_the_managed_instances_and_scale_to_zero_has_a_zero_floor():
    endpoint = _endpoint(kind=EndpointKind.INFERENCE_COMPONENTS, scaling=None,
                         managed_instances=ManagedInstances(min_instances=0, max_instances=2))
    result = _cost(endpoint)
    assert (result.floor.usd, result.ceiling.usd) == (0.0, 1460.0)
    assert result.pools[0].pool.bounds_field == "managed_instances.min_instances"


def test_scheduled_copies_of_inference_components_say_why_there_is_no_expected_range():
    from deployment_spec.sections.components import ComponentSpec, CopyScaling
    from deployment_spec.sections.scheduled_scaling import ScheduledCopies
    nights = ScheduledCopies(name="nights", schedule="cron(0 20 ? * MON-FRI *)", max_copies=1)
    endpoint = _endpoint(kind=EndpointKind.INFERENCE_COMPONENTS, scaling=None,
                         managed_instances=ManagedInstances(min_instances=1, max_instances=3),
                         components={"bert": ComponentSpec(scaling=CopyScaling(
                             max_copies=4, invocations_per_copy=100, schedules=(nights,))),
                                     "t5": ComponentSpec()})
    pool, = _cost(endpoint).pools
    assert (pool.floor.usd, pool.ceiling.usd, pool.expected) == (730.0, 3 * 730.0, None)
    assert pool.notes == ("the schedules of bert move copies, not managed_instances: the instances the copies need "
                          "stay between the floor and the ceiling; no expected range",)


def test_fallback_pools_price_the_ceiling_at_the_dearest_pool():
    result = _cost(_endpoint(fallback_instance_types=("ml.g6.xlarge",)))
    assert (result.floor.usd, result.ceiling.usd) == (730.0, 3 * 730.0 * 2.0)
    assert result.pools[0].notes == ("ceiling priced at the dearest fallback pool, ml.g6.xlarge ($2/h)",)


def test_a_fallback_pool_without_a_price_leaves_the_ceiling_unknown_not_guessed():
    result = _cost(_endpoint(fallback_instance_types=("ml.g6e.xlarge",)))
    assert result.floor.usd == 730.0
    assert result.ceiling.usd is None and result.ceiling.instance_hours == 2190.0
    assert result.ceiling.unknown == (
        "unknown price: ml.g6e.xlarge in us-east-1 is in none of test.json of 2026-11-01; with AWS credentials "
        "(pricing:GetProducts) run `tritonsm prices refresh --region us-east-1 --instance-type ml.g6e.xlarge`",)
    assert cost.amount(result.ceiling) == "unknown price (2,190 instance-hours of ml.g6e.xlarge)"


def test_a_capacity_reservation_is_prepaid_and_left_out_of_the_on_demand_figures():
    reservation = CapacityReservation(arn="arn:aws:sagemaker:us-east-1:123456789012:ml-reservation/r1",
                                      instance_type="ml.g5.xlarge", instances=3)
    result = _cost(_endpoint(capacity_reservation=reservation))
    assert (result.floor.usd, result.ceiling.usd) == (0.0, 0.0)
    assert result.floor.instance_hours == 730.0
    assert result.pools[0].notes[0].startswith("prepaid: launches into a capacity reservation")


def test_weekday_office_hours_give_the_time_weighted_expected_range():
    schedules = (ScheduledScaling(name="up", schedule="cron(0 8 ? * MON-FRI *)", min_instances=3),
                 ScheduledScaling(name="down", schedule="cron(0 20 ? * MON-FRI *)", min_instances=1))
    result = _cost(_endpoint(scaling=Scaling(min_instances=1, max_instances=4, schedules=schedules)))
    # Per week: 5 days x 12 h at 3 instances, the other 108 h at 1: 288 instance-hours of 168 h.
    assert result.expected is not None
    assert result.expected[0].usd == pytest.approx(288 / 168 * 730)
    assert result.expected[1].usd == pytest.approx(4 * 730)
    assert (result.floor.usd, result.ceiling.usd) == (730.0, 4 * 730.0)


def test_a_schedule_that_is_not_weekly_gives_no_expected_range():
    schedules = (ScheduledScaling(name="once", schedule="at(2026-12-24T18:00:00)", min_instances=0),)
    result = _cost(_endpoint(scaling=Scaling(min_instances=1, max_instances=4, schedules=schedules)))
    assert result.expected is None
    assert result.floor.usd == 0.0  # the lowest bound a schedule may set
    assert result.pools[0].notes == ("schedules not all weekly cron expressions: no expected range",)


def test_variants_and_a_shadow_each_bill_their_instances():
    from deployment_spec.sections.variants import Shadow, Variant
    endpoint = _endpoint(variants=(Variant(name="A"), Variant(name="B", instance_type="ml.g6.xlarge",
                                                                 scaling=Scaling(min_instances=1, max_instances=1))),
                         shadow=Shadow(model="m", initial_instances=1))
    result = _cost(endpoint)
    assert [p.pool.where for p in result.pools] == ["ep.variants.A", "ep.variants.B", "ep.shadow"]
    assert result.floor.usd == 730.0 + 1460.0 + 730.0


def test_cost_per_million_inferences_from_the_measured_throughput():
    measured = Measurement(max_rps_per_instance=30.0, latency_sla_ms=200, p99_ms=150, measured_on="ml.g5.xlarge",
                           command="tritonsm bench load")
    result = _cost(_endpoint(), measurement=measured)
    assert result.per_million is not None and not result.per_million.stand_in
    assert result.per_million.usd == pytest.approx(1.0 / (30 * 3600) * 1e6)
    stand_in = _cost(_endpoint(), measurement=Measurement(30.0, 200, 150, "local CPU (2 cores)", "x"))
    line = cost_report.endpoint_lines(stand_in, 730)[-1]
    assert line == ("    cost per million inferences: $9.26 at 30 requests/s per instance within the 200 ms SLA "
                    "(p99 150 ms; capacity.json, measured on local CPU (2 cores), not on ml.g5.xlarge: a stand-in "
                    "figure, not this endpoint's cost; ml.g5.xlarge at $1/h in us-east-1, prices of 2026-11-01)")


@pytest.mark.parametrize("measured_on, stand_in", [
    ("ml.g5.xlarge (1 instance), Inference Recommender job J", False),  # AWS measured the served type
    ("ml.g5.xlarge, endpoint prod-classifier", False),
    ("ml.g6.xlarge (1 instance), Inference Recommender job J", True),   # another type
    ("local CPU (2 cores), pt-base", True),
])
def test_a_figure_is_a_stand_in_only_when_measured_on_other_hardware(measured_on, stand_in):
    result = _cost(_endpoint(), measurement=Measurement(30.0, 200, 150, measured_on, "x"))
    assert result.per_million is not None and result.per_million.stand_in is stand_in


# ------------------------------------------------------------------------------------------ the snapshot

def test_the_snapshot_names_its_source_date_and_regions():
    raw = json.loads(pricing.SNAPSHOT.read_text())
    assert raw["source"] and raw["date"] and raw["currency"] == "USD"
    assert {"us-east-1", "us-west-2", "eu-west-1"} <= set(raw["regions"]) == set(raw["prices"])
    pricing.read_price_file(pricing.SNAPSHOT)  # well-formed


def test_every_servable_type_is_priced_by_the_snapshot_or_shown_as_unknown_with_how_to_refresh():
    table = pricing.load_prices(None)
    servable = [t for t in INSTANCE_TYPES if instances.servable_problem(t) is None]
    assert servable
    for region in ("us-east-1", "us-west-2", "eu-west-1"):
        for instance_type in servable:
            price = table.lookup(region, instance_type)
            if price is None:
                assert table.missing(region, instance_type).endswith(
                    f"run `tritonsm prices refresh --region {region} --instance-type {instance_type}`")
            else:
                assert price.usd_per_hour > 0 and price.date and price.source


def test_the_newest_refresh_cache_is_read_before_the_snapshot(tmp_path):
    folder = tmp_path / "build" / "prices"
    folder.mkdir(parents=True)
    for day, usd in (("2026-10-01", 9.0), (TEST_DATE, 1.0)):
        (folder / f"sagemaker_realtime-{day}.json").write_text(json.dumps(
            pricing.price_document(TEST_SOURCE, __import__("datetime").date.fromisoformat(day),
                                   {"us-east-1": {"ml.g5.xlarge": usd}}, ["us-east-1"])))
    table = pricing.load_prices(tmp_path)
    assert table.lookup("us-east-1", "ml.g5.xlarge") == pricing.Price(1.0, "us-east-1", "ml.g5.xlarge", TEST_SOURCE,
                                                                      TEST_DATE)
    assert table.files[-1].path == pricing.SNAPSHOT


# ------------------------------------------------------------------------------- the spec, the CLI, the budget

def _spec_dir(tmp_path: pathlib.Path, figures: dict[str, float] | None = None, **patch: object) -> pathlib.Path:
    raw = yaml.safe_load((ROOT / "triton.yaml").read_text())
    for env, body in patch.items():
        raw["environments"][env].update(body)  # type: ignore[arg-type]
    spec = tmp_path / "triton.yaml"
    spec.write_text(yaml.safe_dump(raw, sort_keys=False))
    if figures is not None:
        folder = tmp_path / "build" / "prices"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"sagemaker_realtime-{TEST_DATE}.json").write_text(json.dumps(pricing.price_document(
            TEST_SOURCE, __import__("datetime").date.fromisoformat(TEST_DATE),
            {r: figures for r in ("us-east-1", "us-west-2")}, ["us-east-1", "us-west-2"])))
    return spec


def test_tritonsm_cost_prints_one_line_per_stage_and_per_endpoint(tmp_path, capsys):
    spec = _spec_dir(tmp_path, {"ml.g5.xlarge": 1.0})
    assert main(["cost", "--spec", str(spec), "--environment", "prod", "--capacity", str(tmp_path / "none.json")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == ("prod: floor $2,920 / month, ceiling $10,220 / month (us-east-1 on-demand, prices of 2026-11-01, "
                      "730 h)")
    assert out[1] == "  vision-nlp (multi-model): floor $1,460, ceiling $5,840 / month"
    assert out[2] == "    vision-nlp: 2..8 × ml.g5.xlarge at $1/h × 730 h"
    assert out[-1] == f"prices: {TEST_SOURCE} ({TEST_DATE})"


def test_tritonsm_cost_without_prices_says_unknown_and_how_to_refresh(tmp_path, capsys):
    # staging is in us-west-2, where the shipped snapshot has no figures (deployment_spec/cost/prices).
    spec = _spec_dir(tmp_path)
    assert main(["cost", "--spec", str(spec), "--environment", "staging", "--capacity",
                 str(tmp_path / "none.json")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == ("staging: floor unknown price (1,460 instance-hours of ml.g5.xlarge) / month, ceiling unknown "
                      "price (5,110 instance-hours of ml.g5.xlarge) / month (us-west-2 on-demand, 730 h)")
    assert out[-1].startswith("note: unknown price: ml.g5.xlarge in us-west-2 is in none of ")


def test_the_cost_pages_example_prints_what_the_page_shows(capsys):
    # docs/howto/cost.md: the block that runs `tritonsm cost --environment prod` on the default spec, its output
    # lines written under it as comments.
    page = (ROOT / "docs" / "howto" / "cost.md").read_text()
    block = page.split("```sh\ntritonsm cost --environment prod\n", 1)[1].split("```", 1)[0]
    promised = [line[2:] for line in block.splitlines()]
    assert len(promised) >= 3
    assert main(["cost", "--spec", str(ROOT / "triton.yaml"), "--environment", "prod", "--capacity",
                 str(ROOT / "no-capacity.json")]) == 0
    assert capsys.readouterr().out.splitlines()[:len(promised)] == promised


def test_tritonsm_cost_on_the_default_spec_prices_from_the_shipped_snapshot_naming_its_source(capsys):
    assert main(["cost", "--spec", str(ROOT / "triton.yaml"), "--environment", "prod", "--capacity",
                 str(ROOT / "no-capacity.json")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == ("prod: floor $4,113 / month, ceiling $14,394 / month (us-east-1 on-demand, prices of "
                      "2024-05-18, 730 h)")
    assert out[2] == "    vision-nlp: 2..8 × ml.g5.xlarge at $1.4084/h × 730 h"
    assert out[-1].startswith("prices: aws-samples/foundation-model-benchmarking-tool fmbench/configs/pricing.yml at "
                              "commit 39ce6b9c3572bf620a60c288c5b473462c5bc2eb")


def test_a_stage_priced_in_part_keeps_its_known_dollars_and_names_the_unpriced_hours():
    # One endpoint on ml.g5.xlarge at $1/h, one on ml.g6e.xlarge, which the prices lack: summed as a stage sums them.
    priced, unpriced = _cost(_endpoint(name="a")), _cost(_endpoint(name="b", instance_type="ml.g6e.xlarge"))
    total = priced.floor + unpriced.floor
    assert total.usd is None and total.known_usd == 730.0
    assert cost.amount(total) == "$730 + unknown price (730 instance-hours of ml.g6e.xlarge)"


def test_cost_diff_names_the_change_that_moved_each_figure(tmp_path, capsys):
    before = _spec_dir(tmp_path, {"ml.g5.xlarge": 1.0})
    after = tmp_path / "after.yaml"
    after.write_text(before.read_text().replace(
        "classifier:\n          initial_instances: 2\n          scaling:\n            min_instances: 2",
        "classifier:\n          initial_instances: 3\n          scaling:\n            min_instances: 3"))
    assert after.read_text() != before.read_text()
    assert main(["cost", "--spec", str(after), "--diff", str(before), "--capacity", str(tmp_path / "none.json")]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "dev: no change (floor $1,460, ceiling $5,110 / month)",
        "staging: no change (floor $1,460, ceiling $5,110 / month)",
        "prod floor $2,920 → $3,650 / month (+25 %): classifier min_instances 2 → 3",
    ]


def test_cost_diff_against_a_git_commit_and_a_fallback_pool(tmp_path, capsys):
    if shutil.which("git") is None:
        pytest.skip("no git")
    spec = _spec_dir(tmp_path, {"ml.g5.xlarge": 1.0, "ml.g6.xlarge": 2.0})
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run([*git, "add", "triton.yaml"], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-qm", "base"], cwd=tmp_path, check=True)
    spec.write_text(spec.read_text().replace("instance_type: ml.g5.xlarge\n    scaling:\n      min_instances: 1\n"
                                             "      max_instances: 3",
                                             "instance_type: ml.g5.xlarge\n    fallback_instance_types: "
                                             "[ml.g6.xlarge]\n    scaling:\n      min_instances: 1\n"
                                             "      max_instances: 3", 1))
    assert "fallback_instance_types" in spec.read_text()
    assert main(["cost", "--spec", str(spec), "--diff", "HEAD", "--environment", "dev",
                 "--capacity", str(tmp_path / "none.json")]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "dev ceiling $5,110 → $7,300 / month (+43 %): classifier fallback_instance_types [] → [ml.g6.xlarge]"]


def test_a_budget_below_the_ceiling_is_refused_with_the_usual_message(tmp_path):
    spec = _spec_dir(tmp_path, {"ml.g5.xlarge": 1.0}, prod={"budget": {"monthly_usd": 5000}})
    with pytest.raises(SpecError) as caught:
        load_spec(spec)
    assert str(caught.value) == (
        f"{spec}: 1 problem\n"
        "  - environments.prod.budget.monthly_usd: got $5,000, below the monthly ceiling of $10,220 (vision-nlp "
        "$5,840, classifier $4,380; us-east-1 on-demand, prices of 2026-11-01, 730 h); allowed: a budget at least "
        "the ceiling: every endpoint at its maximum instances, on demand; fix: raise budget.monthly_usd to 10,220 or "
        "more, or lower the endpoints' max_instances")


def test_a_budget_at_or_above_the_ceiling_loads(tmp_path):
    spec = _spec_dir(tmp_path, {"ml.g5.xlarge": 1.0}, prod={"budget": {"monthly_usd": 10220}})
    assert load_spec(spec).environments["prod"].budget.monthly_usd == 10220  # type: ignore[union-attr]


def test_a_budget_whose_ceiling_cannot_be_priced_is_refused(tmp_path):
    spec = _spec_dir(tmp_path, None, staging={"budget": {"monthly_usd": 100}})
    with pytest.raises(SpecError) as caught:
        load_spec(spec)
    assert str(caught.value).splitlines()[1].startswith(
        "  - environments.staging.budget.monthly_usd: got $100 against a ceiling that cannot be priced (unknown "
        "price: ml.g5.xlarge in us-west-2 is in none of sagemaker_realtime.json of ")
    assert str(caught.value).endswith("allowed: a budget for an environment whose instance types have prices; fix: "
                                      "refresh the prices (tritonsm prices refresh), or remove budget")


def test_a_budget_of_the_wrong_type_is_refused_by_the_loader(tmp_path):
    spec = _spec_dir(tmp_path, None, dev={"budget": {"monthly_usd": 0}})
    with pytest.raises(SpecError) as caught:
        load_spec(spec)
    assert "environments.dev.budget.monthly_usd: got 0" in str(caught.value)


def _with_fallback_pool(before: pathlib.Path) -> pathlib.Path:
    """The spec beside ``before`` with the classifier given an ml.g6.xlarge fallback pool."""
    after = before.with_name("after.yaml")
    after.write_text(before.read_text().replace(
        "models:\n    - text-classifier\n    instance_type: ml.g5.xlarge\n",
        "models:\n    - text-classifier\n    instance_type: ml.g5.xlarge\n    fallback_instance_types: [ml.g6.xlarge]\n"))
    assert "fallback_instance_types" in after.read_text()
    return after


def test_a_diff_without_prices_still_names_a_change_that_moves_only_dollars(tmp_path, capsys):
    before = _spec_dir(tmp_path)
    after = _with_fallback_pool(before)
    assert main(["cost", "--spec", str(after), "--diff", str(before), "--environment", "staging",
                 "--capacity", str(tmp_path / "none.json")]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "staging ceiling 5,110 instance-hours / month either way (unknown price): classifier fallback_instance_types "
        "[] → [ml.g6.xlarge]"]


def test_a_diff_to_an_unpriced_type_shows_the_old_dollars_and_the_new_instance_hours(tmp_path, capsys):
    # Found by the outside check: this read "730 → 730 instance-hours (+0 %; unknown price)", losing the old figure.
    before = _spec_dir(tmp_path, {"ml.g5.xlarge": 1.0})
    after = _with_fallback_pool(before)
    assert main(["cost", "--spec", str(after), "--diff", str(before), "--environment", "prod",
                 "--capacity", str(tmp_path / "none.json")]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "prod ceiling $10,220 → $5,840 + unknown price (4,380 instance-hours of ml.g6.xlarge) / month: classifier "
        "fallback_instance_types [] → [ml.g6.xlarge]"]
