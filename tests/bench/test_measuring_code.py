"""The arithmetic behind the benchmark figures, on fixed inputs with exact expected values."""
import math

import pytest

from benchmarking import stats
from benchmarking.load_compare import _gains, best_config
from benchmarking.load_phases import PhasePlan, PhaseResult, best_within_threshold, phase_result, phases_until_stop
from benchmarking.runtime_compare import check_targets


def test_percentiles_interpolate_like_numpy():
    values = [40.0, 10.0, 30.0, 20.0]
    assert (stats.percentile(values, 50), stats.percentile(values, 99), stats.percentile(values, 0)) == (
        25.0, pytest.approx(39.7), 10.0)
    assert math.isnan(stats.percentile([], 50)) and math.isnan(stats.median([]))


def test_speedups_ratio_of_medians_and_paired():
    # Eager's third block was hit by load; the paired figure is not fooled by it.
    eager = [100.0, 100.0, 300.0, 100.0, 100.0]
    engine = [50.0, 50.0, 60.0, 50.0, 50.0]
    assert stats.speedups(eager, engine) == (2.0, 2.0)
    slowed = [50.0, 50.0, 150.0, 150.0, 150.0]  # load on the engine's last three blocks
    of_medians, paired = stats.speedups(eager, slowed)
    assert (of_medians, paired) == (100.0 / 150.0, 2.0)
    assert math.isnan(stats.ratio(1.0, 0.0))


def test_a_phase_meets_the_threshold_on_p99_and_errors():
    plan = PhasePlan(latency_threshold_ms=100.0, max_error_rate=0.1)
    ok = phase_result(4, [10.0] * 99 + [100.0], [], 2.0, plan)
    assert (ok.requests, ok.rps, ok.p50_ms, ok.within_threshold) == (100, 50.0, 10.0, True)
    slow = phase_result(4, [10.0] * 98 + [200.0, 200.0], [], 2.0, plan)
    assert slow.p99_ms == 200.0 and not slow.within_threshold
    failing = phase_result(4, [10.0] * 8, ["HTTP 500", "HTTP 500"], 1.0, plan)
    assert (failing.errors, failing.first_error, failing.within_threshold) == (2, "HTTP 500", False)
    assert not phase_result(4, [], ["timeout"], 1.0, plan).within_threshold


def _phase(concurrency, rps, within, after_stop=False):
    return PhaseResult(concurrency, 100, 0, 1.0, rps, 10.0, 20.0, within, after_stop)


def test_phases_stop_at_the_first_miss_but_still_measure_must_reach():
    plan = PhasePlan(concurrencies=(1, 2, 4, 8, 16, 32), must_reach=16)
    verdicts = {1: True, 2: True, 4: False, 8: True, 16: True, 32: True}
    seen = []
    results = phases_until_stop(plan, lambda c: seen.append(c) or _phase(c, c * 10.0, verdicts[c]), lambda line: None)
    assert seen == [1, 2, 4, 16]
    assert [(r.concurrency, r.after_stop) for r in results] == [(1, False), (2, False), (4, False), (16, True)]
    # The best phase is the fastest one that met the threshold before the stop (16 is after it).
    assert best_within_threshold(results).concurrency == 2
    assert best_within_threshold([_phase(1, 5.0, False)]) is None


def test_dynamic_batching_gain_and_best_configuration():
    def summary(rps_at_16, best):
        return {"phases": [{"concurrency": 16, "rps": rps_at_16}], "max_rps_within_threshold": best}

    configs = {"pt-base": summary(10.0, 9.0), "pt-db": summary(30.0, 28.0), "pt-ig": summary(12.0, None)}
    assert _gains(configs) == [{"baseline": "pt-base", "batched": "pt-db", "concurrency": 16,
                                "baseline_rps": 10.0, "batched_rps": 30.0, "gain": 3.0}]
    assert best_config({"configs": configs}) == "pt-db"


def test_targets_need_both_ratios():
    cells = [{"model": "bert", "recipe": "bert-base", "engine": "onnxruntime-fp32", "batch": 1,
              "speedup": 1.5, "paired_speedup": 1.1},
             {"model": "bert", "recipe": "bert-base", "engine": "onnxruntime-int8", "batch": 1,
              "speedup": 2.0, "paired_speedup": 1.9},
             {"model": "bert", "recipe": "bert-base", "engine": "onnxruntime-int8", "batch": 8,
              "speedup": 0.5, "paired_speedup": 0.5}]
    found = check_targets({"models": [{"cells": cells}]})
    assert [(t["engine"], t["target"], t["met"]) for t in found] == [
        ("onnxruntime-fp32", 1.2, False), ("onnxruntime-int8", 1.8, True)]
