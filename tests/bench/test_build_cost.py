"""The arithmetic and tables of benchmarks/build_cost.py, on fixed inputs; the sampler on a real child process."""
import subprocess
import sys

from model_build import memory_budget
from benchmarks.tooling import build_cost

TIME_OUTPUT = """\
\tCommand being timed: "python -m tritonsm build"
\tUser time (seconds): 101.20
\tMaximum resident set size (kbytes): 2441216
\tExit status: 0
"""


def test_peak_keeps_the_largest_sample_its_step_and_each_steps_own_peak():
    peak = build_cost.Peak()
    peak.add(1_000, 0.2, "load recipe ...", 1)
    peak.add(3_000, 0.4, "export ONNX ...", 2)
    peak.add(2_000, 0.6, "export ONNX ...", 2)
    peak.add(2_500, 0.8, "verify ...", 3)
    assert (peak.rss_bytes, peak.at_s, peak.step, peak.processes, peak.samples) == (3_000, 0.4, "export ONNX ...", 2, 4)
    assert peak.by_step == {"load recipe ...": 1_000, "export ONNX ...": 3_000, "verify ...": 2_500}


def test_time_max_rss_is_read_in_kibibytes():
    assert build_cost.time_maxrss_bytes(TIME_OUTPUT) == 2441216 * 1024
    assert build_cost.time_maxrss_bytes("Command exited with non-zero status 1") is None


def test_step_lines_are_the_build_log_lines_that_start_work():
    assert build_cost.is_step_line("[2/4] bert: building (onnxruntime)")
    assert build_cost.is_step_line("  bert: export ONNX (opset 18) ...")
    assert build_cost.is_step_line("  $ python -m model_build.backends.pytorch.trace_worker spec.yaml bert-large-pt /tmp/x")
    assert not build_cost.is_step_line("  bert: export ONNX (opset 18) done in 3.8 s")
    assert not build_cost.is_step_line("")


def test_step_durations_from_the_build_log():
    log = ["  bert: export ONNX (opset 18) ...", "  bert: export ONNX (opset 18) done in 13.8 s",
           "  bert: verify in ONNX Runtime 1.23.0 done in 24.0 s (graph, 11 cases, max abs error 5.07e-07)",
           "  bert-large-pt: tracing TorchScript took 21.5 s", "[2/4] bert: built in 89.3 s"]
    assert build_cost.durations(log) == {"bert: export ONNX (opset 18)": 13.8,
                                         "bert: verify in ONNX Runtime 1.23.0": 24.0,
                                         "bert-large-pt: tracing TorchScript": 21.5}


def test_budget_and_verdict():
    # RoBERTa-large: 355,361,794 parameters x 4 bytes.
    budget = memory_budget.need_bytes(1_421_447_176)  # the bound the table holds builds to
    assert budget == 5_764_341_528
    half = 12_000_000_000
    assert build_cost.verdict(5_000_000_000, budget, half) == "yes"
    assert build_cost.verdict(16_700_000_000, budget, half) == "no (> 5.76 GB budget, > half the machine, 12.0 GB)"
    assert build_cost.verdict(6_000_000_000, budget, half) == "no (> 5.76 GB budget)"
    assert build_cost.verdict(100, None, half) == "yes (half the machine; no weights to bound by)"


def test_table_row():
    row = {"spec": "examples/onnx-vision-nlp-mme.yaml", "exit_code": 0, "wall_s": 424.04, "load_start": 1.234,
           "load_end": 2.0, "peak_tree_rss_bytes": 16_700_000_000, "time_maxrss_bytes": 16_100_000_000,
           "weights": {"model": "roberta", "bytes": 1_421_447_176}, "budget_bytes": 5_764_341_528,
           "met": "no (> 5.76 GB budget)", "peak_step": "roberta: verify | x ...", "cache": "warm",
           "notes": ["a", "b"]}
    lines = build_cost.table([row]).splitlines()
    assert len(lines) == 3 and lines[0].startswith("| spec | exit | wall s |")
    assert lines[2] == ("| examples/onnx-vision-nlp-mme.yaml | 0 | 424.0 | 1.23-2.00 | 16.70 | 16.10 | roberta 1.42 | "
                        "5.76 | no (> 5.76 GB budget) | roberta: verify \\| x ... | warm | a; b |")


def test_cache_note_names_what_a_build_installed(tmp_path):
    runtimes = tmp_path / "serving-runtimes"
    (runtimes / "onnxruntime-1.23.0-py3.11-abc").mkdir(parents=True)
    (runtimes / ".onnxruntime-1.21.0.partial").mkdir()  # an install in progress is not in the cache
    (tmp_path / "python-envs" / "wheels").mkdir(parents=True)  # downloads, not environments
    before = build_cost.cache_entries([runtimes, tmp_path / "python-envs", tmp_path / "absent"])
    assert before == {"serving-runtimes/onnxruntime-1.23.0-py3.11-abc"}
    assert build_cost.cache_note(before, before) == "warm"
    after = before | {"python-envs/0123abcd"}
    assert build_cost.cache_note(before, after) == "cold: installed python-envs/0123abcd"


def test_merge_replaces_rows_of_the_same_spec_and_keeps_the_order():
    earlier = [{"spec": "a", "v": 1}, {"spec": "b", "v": 1}]
    new = [{"spec": "b", "v": 2}, {"spec": "c", "v": 2}]
    assert build_cost.merge_runs(earlier, new) == [{"spec": "a", "v": 1}, {"spec": "b", "v": 2}, {"spec": "c", "v": 2}]


def test_sampler_sums_a_process_and_its_children():
    # A parent holding ~30 MB that starts a child holding ~200 MB: the tree peak counts both.
    child = "import time; b = bytearray(200_000_000); b[::4096] = b'x' * len(b[::4096]); time.sleep(2)"
    parent = (f"import subprocess, sys, time; a = bytearray(30_000_000); a[::4096] = b'x' * len(a[::4096]); "
              f"subprocess.run([sys.executable, '-c', {child!r}])")
    proc = subprocess.Popen([sys.executable, "-c", parent])
    with build_cost.TreeSampler(proc.pid, interval=0.05) as sampler:
        sampler.step("allocating")
        proc.wait()
    assert sampler.peak.processes == 2 and sampler.peak.step == "allocating"
    assert 230_000_000 < sampler.peak.rss_bytes < 400_000_000
