"""The arithmetic behind the benchmark figures, on fixed inputs with exact expected values."""
import math

import pytest

from tritonsm.benchmarking import stats
from tritonsm.benchmarking.load_compare import _gains, best_config, interleaved_phases, median_phase
from tritonsm.benchmarking.load_phases import PhasePlan, PhaseResult, best_within_threshold, phase_result, phases_until_stop
from tritonsm.benchmarking.runtime_compare import check_targets


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
    # One round (no "rounds" recorded): the paired and quieter-half gains are that round's ratio.
    (gain,) = _gains(configs)
    loads = gain.pop("round_loads")
    assert gain == {"baseline": "pt-base", "batched": "pt-db", "concurrency": 16, "baseline_rps": 10.0,
                    "batched_rps": 30.0, "gain": 3.0, "paired_gain": 3.0, "quieter_half_gain": 3.0}
    assert len(loads) == 1 and math.isnan(loads[0])  # no load recorded in this summary
    assert best_config({"configs": configs}) == "pt-db"


def test_quieter_half_keeps_the_lower_loads_in_run_order():
    assert stats.quieter_half([2.0, 0.5, 3.0, 0.5, 1.0]) == [1, 3, 4]  # ceil(5 / 2) = 3, ties to the earlier
    assert stats.quieter_half([1.0, 1.0, 1.0, 1.0]) == [0, 1]
    assert stats.quieter_half([4.0]) == [0] and stats.quieter_half([]) == []
    assert stats.quieter_half([math.nan, 1.0, 2.0]) == [1, 2]  # an unknown load counts as the loudest
    assert stats.loudest([0.5, math.nan, 1.5]) == 1.5 and math.isnan(stats.loudest([math.nan]))


def test_paired_and_quieter_half_ratios():
    # Rounds 2 and 4 shared the machine (load 3.0): their ratios are off; the quieter half drops them.
    ratios = [2.0, 1.2, 2.1, 1.0, 1.9]
    loads = [0.4, 3.0, 0.6, 3.0, 0.5]
    assert stats.paired_and_quieter(ratios, loads) == (1.9, 2.0)
    with pytest.raises(ValueError, match="2 ratios but 1 loads"):
        stats.paired_and_quieter([1.0, 2.0], [0.1])


def _loaded(concurrency, rps, within=True, load=1.0):
    return PhaseResult(concurrency, 100, 0, 1.0, rps, 10.0, 20.0, within, load_average=[load, 0.0, 0.0])


def test_load_configurations_take_turns_in_a_rotated_order():
    plan = PhasePlan(concurrencies=(1, 2, 16), must_reach=16)
    calls = []

    def measure(name, concurrency):
        calls.append((name, concurrency))
        return _loaded(concurrency, 10.0, within=not (name == "b" and concurrency == 1))

    rounds = interleaved_phases(["a", "b", "c"], plan, 2, measure, lambda line: None)
    # Concurrency 1: rounds start at a, then b. b misses the threshold there, so at 2 only a and c
    # run (starting at index (1 + r) mod 2); at 16 (must_reach) b runs again, flagged after the stop.
    assert calls == [("a", 1), ("b", 1), ("c", 1), ("b", 1), ("c", 1), ("a", 1),
                     ("c", 2), ("a", 2), ("a", 2), ("c", 2),
                     ("c", 16), ("a", 16), ("b", 16), ("a", 16), ("b", 16), ("c", 16)]
    assert [len(per) for per in rounds["b"]] == [2, 2] and [r.after_stop for r in rounds["b"][1]] == [True, True]
    assert [[r.concurrency for r in per] for per in rounds["a"]] == [[1, 1], [2, 2], [16, 16]]


def test_rounds_merge_into_one_phase_by_medians():
    runs = [_loaded(16, 100.0, load=0.5), _loaded(16, 300.0, within=False, load=2.5), _loaded(16, 200.0, load=1.0)]
    merged = median_phase(runs)
    assert (merged.rps, merged.requests, merged.within_threshold, merged.load_average) == (
        200.0, 300, False, [2.5, 0.0, 0.0])


def test_the_batching_gain_is_paired_by_round_and_given_for_the_quieter_half():
    def summary(rounds):
        phase = {"concurrency": 16, "rps": stats.median([rps for rps, _ in rounds]),
                 "rounds": [{"rps": rps, "load_average": [load, 0, 0]} for rps, load in rounds]}
        return {"phases": [phase], "max_rps_within_threshold": 1.0}

    # Round 2 ran under load (2.0) and slowed the batched configuration most.
    base = summary([(100.0, 0.5), (80.0, 2.0), (110.0, 0.25)])
    batched = summary([(300.0, 0.75), (120.0, 1.5), (320.0, 0.25)])
    (gain,) = _gains({"pt-base": base, "pt-db": batched})
    assert gain == {"baseline": "pt-base", "batched": "pt-db", "concurrency": 16, "baseline_rps": 100.0,
                    "batched_rps": 300.0, "gain": 3.0, "paired_gain": 2.91, "quieter_half_gain": 2.95,
                    "round_loads": [0.75, 2.0, 0.25]}


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


def test_rounds_merge_tritons_figures_by_medians_and_drop_them_when_a_round_lacks_them():
    figures = [{"average_batch": b, "queue_share": q, "queue_ms": 1.0, "compute_ms": 2.0}
               for b, q in ((2.0, 0.1), (4.0, 0.5), (3.0, 0.3))]
    runs = [_loaded(16, 100.0) for _ in figures]
    for run, each in zip(runs, figures):
        run.triton = each
    assert median_phase(runs).triton == {"average_batch": 3.0, "queue_share": 0.3, "queue_ms": 1.0, "compute_ms": 2.0}
    runs[1].triton = None
    assert median_phase(runs).triton is None


def test_tritons_metrics_page_is_summed_over_versions_and_differenced():
    from local_endpoint.server.triton_metrics import parse, since

    page = """# HELP nv_inference_request_success Number of successful inference requests
nv_inference_request_success{model="bert",version="1"} 10
nv_inference_request_success{model="bert",version="2"} 2
nv_inference_count{model="bert",version="1"} 40
nv_inference_exec_count{model="bert",version="1"} 10
nv_inference_request_duration_us{model="bert",version="1"} 20000
nv_inference_queue_duration_us{model="bert",version="1"} 5000
nv_inference_compute_infer_duration_us{model="bert",version="1"} 12000
nv_gpu_utilization{gpu_uuid="GPU-0"} 0.5
"""
    before = parse(page.replace(" 10\n", " 2\n", 1))
    after = parse(page)
    assert after["bert"].requests == 12 and after["bert"].average_batch == 4.0
    assert since(after, before)["bert"].requests == 8
    assert after["bert"].queue_share == 0.25


# Triton 24.10's lines for an ensemble's Python step (python_be.cc, model_lifecycle.cc), as the local MME logs them.
STEP_LOG = """\
I1129 19:35:35.194449 31398 model_lifecycle.cc:472] "loading: /m/model::task-preprocess:1"
I1129 19:35:35.196358 31398 python_be.cc:1811] "Using Python execution env /m/model/task-preprocess/python-env-5.tar.gz"
I1129 19:35:36.466855 31398 python_be.cc:2249] "TRITONBACKEND_ModelInstanceInitialize: task-model_0 (CPU device 0)"
I1129 19:35:36.616419 31398 model_lifecycle.cc:839] "successfully loaded '/m/model::task-model'"
I1129 19:35:40.051705 31398 python_be.cc:2249] "TRITONBACKEND_ModelInstanceInitialize: task-preprocess_0 (CPU device 0)"
I1129 19:35:41.637470 31398 model_lifecycle.cc:839] "successfully loaded '/m/model::task-preprocess'"
"""


def test_a_steps_load_is_split_into_its_environment_and_its_initialize():
    from benchmarks.task_env_size import _step_times

    assert _step_times(STEP_LOG, "task-preprocess") == {"env_s": 4.86, "initialize_s": 1.59}
    # Twin: a log without the step's environment line is refused, not read as 0 s.
    with pytest.raises(RuntimeError) as refused:
        _step_times(STEP_LOG.replace("Using Python execution env", "Using env"), "task-preprocess")
    assert str(refused.value) == "the server log does not show task-preprocess's load (found ['instance', 'loaded'])"
