"""The three defects of the serving-runtime fidelity issue, each shown first, then fixed by the build.

1. A transformer-fused BERT that ONNX Runtime 1.21 (Triton 25.04) runs without honouring the mask.
2. TorchScript traced on the CPU fixes the CPU as device and fails on every CUDA call.
3. Host paths in ONNX / TorchScript metadata make tarballs differ between checkout folders.
"""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import onnx
import pytest
import torch

from deployment_spec import load_spec
from deployment_spec.builds.manifest import load_manifest
from deployment_spec.sections.model import Tolerance
from mb_support import make_spec
from model_build import build, reproducible
from model_build.backends.onnxruntime import optimize as ort_optimize
from model_build.onnx_graph import export as onnx_export
from model_build.backends.pytorch import torchscript
from model_build.errors import BuildError
from model_build.recipes import load_exportable
from model_build.verification import cases, side_env, verify

ROOT = pathlib.Path(__file__).resolve().parents[2]
BERT = "m: {backend: onnxruntime, source: {recipe: tiny-bert}, sequence_length: 32, max_batch_size: 4}\n"


def _invariance_errors(tmp_path, model, onnx_file, version):
    """Mask-invariance and padded-vs-unpadded errors of one ONNX file in one ONNX Runtime release."""
    made = load_exportable(model, tmp_path)
    plan = cases.plan(made, model)
    env = side_env.ensure("onnxruntime", version, lambda line: None)
    candidate = verify.Candidate("file", onnx_file)
    got = verify.run_candidates(env, "onnx", [candidate], plan, made.input_names, made.output_names, tmp_path)
    want = verify.reference(made.module, plan, made.input_names)
    return verify.judge("file", got["file"], want, plan, made.output_names, Tolerance())


def test_defect_1_the_fused_graph_ignores_the_mask_in_onnxruntime_1_21_only(tmp_path):
    # The graph the build used to ship for Triton 25.04, run in that image's ONNX Runtime and in 25.09's.
    spec = make_spec(tmp_path, BERT)
    model = spec.models["m"]
    made = load_exportable(model, tmp_path)
    onnx_export.export("m", made, tmp_path / "exported.onnx")
    ort_optimize.optimize_for_ort(tmp_path / "exported.onnx", tmp_path / "fused.onnx",
                                  **ort_optimize.transformer_hints(made.module))
    in_1_21 = _invariance_errors(tmp_path, model, tmp_path / "fused.onnx", "1.21.0")
    in_1_23 = _invariance_errors(tmp_path, model, tmp_path / "fused.onnx", "1.23.0")
    assert [p.reason for p in in_1_21.problems][:2] == [
        "ignores the attention mask", "gives a padded row another answer than the same row unpadded"]
    # A runtime that honours the mask gives exactly the same numbers whatever sits under it.
    assert in_1_23.ok and in_1_23.invariance_error == 0.0


def test_defect_1_fixed_for_2504_the_build_ships_the_unfused_graph_and_says_why(tmp_path):
    spec = make_spec(tmp_path, BERT, version="25.04")
    lines = []
    report = build.run(spec, tmp_path / "assets", tmp_path / "work", log=lines.append)
    assert report.exit_code() == 0, report.failed
    check = load_manifest(tmp_path / "assets" / "manifest.json").models["m"].verification
    # Verified in the image's own ONNX Runtime; the fused graph was tried, refused and replaced.
    assert {k: getattr(check, k) for k in ("ran", "triton_version", "runtime", "version", "device", "graph", "rejected")} == {
        "ran": True, "triton_version": "25.04", "runtime": "onnxruntime", "version": "1.21.0", "device": "cpu",
        "graph": "graph with basic optimizations", "rejected": {"transformer-fused graph": "ignores the attention mask"}}
    assert any(line.startswith("  m: the transformer-fused graph is wrong in ONNX Runtime 1.21.0: it ignores the "
                               "attention mask (") and line.endswith("shipping the graph with basic optimizations "
                                                                     "instead, which verifies") for line in lines)
    shipped = next((tmp_path / "work").rglob("m/1/model.onnx"))
    assert "Attention" not in {node.op_type for node in onnx.load(str(shipped)).graph.node}
    assert _invariance_errors(tmp_path, spec.models["m"], shipped, "1.21.0").ok


def test_the_fused_graph_ships_where_the_target_runtime_runs_it_right(tmp_path):
    spec = make_spec(tmp_path, BERT, version="25.09")
    report = build.run(spec, tmp_path / "assets", tmp_path / "work", log=lambda line: None)
    assert report.exit_code() == 0, report.failed
    check = load_manifest(tmp_path / "assets" / "manifest.json").models["m"].verification
    assert (check.version, check.graph, bool(check.rejected)) == ("1.23.0", "transformer-fused graph", False)
    # Triton 25.09 serves the fused attention; exact mask invariance over the 7 cases of a spec without preferred sizes.
    assert check.invariance_error == 0.0 and check.cases == 7
    shipped = next((tmp_path / "work").rglob("m/1/model.onnx"))
    assert "Attention" in {node.op_type for node in onnx.load(str(shipped)).graph.node}


class _Positions(torch.nn.Module):
    """Builds a tensor on the input's device, as transformers' mask code does."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.arange(x.shape[1], device=x.device)


def test_defect_2_a_plain_trace_fixes_the_cpu_and_the_build_removes_it(tiny_build):
    # torch.jit.trace records x.device as the constant "cpu"; that graph fails on cuda.
    traced = torch.jit.trace(_Positions(), (torch.zeros(1, 4),))
    assert [(d, users) for _, d, users in torchscript.device_constants(traced)] == [("cpu", ("aten::arange",))]
    # The build's trace of a transformers model (tiny-roberta, backend pytorch) holds none.
    _, _, work, report, _ = tiny_build
    assert "traced" in report.built + report.cached
    packed = torch.jit.load(str(next(work.rglob("traced/1/model.pt"))), map_location="cpu")
    assert torchscript.device_constants(packed) == []


def test_a_torchscript_file_fixing_the_cpu_is_refused_for_gpu_instances(tmp_path):
    traced = torch.jit.trace(_Positions(), (torch.zeros(1, 4),))
    io = {"inputs": [{"name": "x__0", "data_type": "TYPE_FP32", "dims": [4]}],
          "outputs": [{"name": "y__0", "data_type": "TYPE_FP32", "dims": [4]}]}
    torch.jit.save(traced, str(tmp_path / "positions.pt"), _extra_files={"triton_io.json": json.dumps(io)})
    spec = make_spec(tmp_path, "p: {backend: pytorch, source: {torchscript: positions.pt}, "
                               "instance_groups: [{kind: gpu}]}\n")
    report = build.run(spec, tmp_path / "assets", tmp_path / "work", log=lambda line: None)
    assert report.failed == {"p": (
        "model p: positions.pt fixes the device 'cpu' in (top level) (used by aten::arange), but its instances run on "
        "cuda: every call would fail with tensors on two devices; trace it on that device, build it from a recipe "
        "(the build makes traced graphs device-agnostic), or set its instance_groups kind to match")}


def test_make_device_agnostic_keeps_the_answers(tmp_path):
    traced = torch.jit.trace(_Positions(), (torch.zeros(1, 4),))
    assert torchscript.make_device_agnostic("p", traced) == 1
    x = torch.randn(2, 6)
    assert torch.equal(traced(x), _Positions()(x))  # and the trace now follows the input's length too


SPEC = """\
project: Repro
triton_version: "25.09"
models:
  vision: {backend: onnxruntime, source: {recipe: tiny-resnet}, max_batch_size: 2}
  traced: {backend: pytorch, source: {recipe: tiny-bert}, sequence_length: 8, max_batch_size: 2}
endpoints:
  ep: {kind: multi-model, models: [vision, traced], instance_type: ml.g5.xlarge}
environments:
  dev: {region: us-east-1}
"""


def _build_from_checkout(folder: pathlib.Path) -> dict[str, str]:
    """Copies the code into ``folder`` (a fresh checkout) and builds SPEC there in a new process."""
    for package in ("deployment_spec", "model_build"):
        shutil.copytree(ROOT / package, folder / package, ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "spec.yaml").write_text(SPEC)
    code = textwrap.dedent("""\
        import sys
        from deployment_spec import load_spec
        from model_build import build
        report = build.run(load_spec("spec.yaml"), __import__("pathlib").Path("assets"),
                           __import__("pathlib").Path("work"), log=lambda line: None)
        sys.exit(report.exit_code())
    """)
    env = dict(os.environ, PYTHONPATH=str(folder))
    done = subprocess.run([sys.executable, "-c", code], cwd=folder, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    manifest = load_manifest(folder / "assets" / "manifest.json")
    return {a.file: a.sha256 for ep in manifest.endpoints.values() for a in ep.artifacts}


def test_defect_3_two_checkout_folders_build_byte_identical_tarballs(tmp_path):
    first = _build_from_checkout(tmp_path / "checkout-a")
    second = _build_from_checkout(tmp_path / "checkout-b-elsewhere")
    assert first == second and len(first) == 2
    # No trace of either checkout in what ships: neither in the ONNX graph nor in the TorchScript archive.
    shipped = list((tmp_path / "checkout-a" / "work").rglob("1/model.*"))
    assert {p.name for p in shipped} == {"model.onnx", "model.pt"}
    for path in shipped:
        assert reproducible.host_paths(path, (str(tmp_path), "site-packages")) == []


def test_a_missing_lock_file_says_how_to_write_it():
    with pytest.raises(BuildError) as caught:
        side_env.ensure("onnxruntime", "9.9.9")
    assert str(caught.value) == ("no lock file for onnxruntime==9.9.9 (model_build/verification/locks/onnxruntime-9.9.9.txt); "
                                 "write it with: .venv/bin/python scripts/gen_serving_locks.py onnxruntime==9.9.9")


def test_an_uninstallable_runtime_fails_with_the_reason_and_leaves_nothing(tmp_path, monkeypatch):
    # No index reachable: a clear error instead of a silent skip, and no half-installed folder in the cache.
    monkeypatch.setenv("TRITONSM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))
    with pytest.raises(side_env.ServingEnvError) as caught:
        side_env.ensure("onnxruntime", "1.21.0", log=lambda line: None)
    message = str(caught.value)
    assert message.startswith("cannot install onnxruntime==1.21.0, the runtime the endpoint serves with, for the "
                              "serving-runtime check (pip exit 1: ")
    assert message.endswith("); the build needs the package index once per runtime version (pip's PIP_INDEX_URL / "
                            "PIP_FIND_LINKS settings apply)")
    assert list((tmp_path / "cache" / "serving-runtimes").iterdir()) == []


def test_the_check_refuses_a_host_it_has_no_wheels_for(monkeypatch):
    monkeypatch.setattr(side_env.platform, "machine", lambda: "riscv64")
    with pytest.raises(side_env.ServingEnvError) as caught:
        side_env.ensure("onnxruntime", "1.21.0")
    assert str(caught.value) == (
        "the serving-runtime check installs Linux wheels for CPython 3.11 (x86_64, aarch64); this build runs "
        "CPython 3.11 on linux riscv64: run the build on Linux with the project's .venv (make)")
