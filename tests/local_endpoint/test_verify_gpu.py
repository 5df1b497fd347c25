"""`tritonsm verify --gpu`: on this machine (no CUDA) it says so and exits 3; its checks run for real where they can.

The Python-stub check is device-independent up to the GPU: here it serves a model built for the Triton 25.09
image (CPython 3.12 environment) with nvidia-pytriton's 3.12 stub, inside the shipped environment re-pointed at
a CPython 3.12 of this machine (skipped, with the reason, where there is none). The TorchScript check's
comparison runs with the CPU standing in for cuda:0. tests/gpu/test_verify_gpu_run.py runs it all on a GPU.
"""
from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest
import torch

from tritonsm.checks.gpu import interpreters, python_stub, torchscript
from tritonsm.checks.gpu.agreement import Agreement
from tritonsm.checks.gpu.inputs import batches, case_for
from tritonsm.checks.gpu.report import FAILED, NOT_RUN, PASSED
from deployment_spec.builds.manifest import ModelEntry, TensorSpec, load_manifest
from tritonsm.cli import main as tritonsm_main
from image_fixtures import write_built_spec

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import probe_wheels  # noqa: E402


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: tests/gpu runs the checks")
def test_without_cuda_verify_says_so_writes_the_report_and_exits_3(tmp_path, tarballs, capsys):
    built = write_built_spec(tmp_path / "project", tarballs)
    assert tritonsm_main(["verify", "--gpu", *built.flags()]) == 3
    out = capsys.readouterr().out.splitlines()
    report_path = built.manifest.parent / "verify-gpu.json"
    assert out[0] == "tritonsm verify --gpu: the artifacts of Triton 25.09"
    assert out[2].startswith("NO CUDA DEVICE HERE: torch ") and out[2].endswith("; nothing could run on a GPU")
    stub = "served by the Triton Python stub for CPython 3.12 in its shipped environment, GPUs visible"
    assert [line.split(" (")[0] for line in out[3:5]] == ["  NOT RUN  add", "  NOT RUN  times2"]
    assert out[3].endswith(f": {stub}: no CUDA device here")
    assert out[5:] == [f"0 passed, 0 failed, 2 not run; report: {report_path}",
                       "exit 3: no CUDA device; run `tritonsm verify --gpu` on a host with an NVIDIA GPU, its driver "
                       "and a CUDA build of torch (PyPI's Linux torch wheels are one)"]
    report = json.loads(report_path.read_text())
    assert (report["cuda"], report["exit_code"], report["counts"]) == (False, 3, {"passed": 0, "failed": 0,
                                                                                  "not run": 2})
    assert report["no_cuda_reason"].startswith(f"torch {torch.__version__}")
    assert [(c["model"], c["backend"], c["status"]) for c in report["checks"]] == [
        ("add", "python", "not run"), ("times2", "python", "not run")]  # add is shared by both endpoints: once


def test_verify_needs_gpu(capsys):
    assert tritonsm_main(["verify"]) == 2
    assert capsys.readouterr().err == ("error: tritonsm verify needs one kind of check: --signatures (the tarballs "
                                       "against the manifest and the signing key) or --gpu (the artifacts on this "
                                       "host's GPU)\n")


class _Positions(torch.nn.Module):
    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return (ids * mask).float() + torch.arange(ids.shape[1], device=ids.device)


def test_the_torchscript_comparison_with_the_cpu_standing_in_for_cuda(tmp_path):
    path = tmp_path / "model.pt"
    torch.jit.save(torch.jit.script(_Positions()), str(path))
    ints = (TensorSpec("ids", "TYPE_INT64", (-1,)), TensorSpec("mask", "TYPE_INT64", (-1,)))
    entry = ModelEntry("pos", "pos", "pytorch", 8, ints, (TensorSpec("out", "TYPE_FP32", (-1,)),), "0" * 64)
    case = case_for(entry, None)
    assert [[t.array.shape for t in b] for b in batches(case, 8)] == [[(1, 1), (1, 1)], [(4, 1), (4, 1)]]
    status, detail, facts = torchscript.check(path, case, 8, device="cpu")
    assert (status, detail) == (PASSED, "batches [1, 4]: the CPU's answers within atol 0.001, rtol 0.001 "
                                        "(max abs error 0)")
    assert facts["max_abs_error"] == 0.0 and facts["device"] == "cpu"


def test_an_answer_outside_the_tolerance_fails_naming_the_output_the_batch_and_the_difference():
    ints = (TensorSpec("ids", "TYPE_INT64", (-1,)),)
    entry = ModelEntry("pos", "pos", "pytorch", 8, ints, (TensorSpec("out", "TYPE_FP32", (-1,)),), "0" * 64)
    agreement = Agreement(case_for(entry, None), "the CPU provider", {"onnxruntime": "1.23.0"})
    agreement.batches.append(1)
    assert agreement.differs("logits", np.zeros((1, 3)), np.full((1, 3), 5e-4)) is None  # inside atol 1e-3
    agreement.batches.append(4)
    assert agreement.differs("logits", np.zeros((4, 3)), np.array([[0, 0, 0.25]] * 4)) == (
        FAILED, "output logits at batch 4 differs from the CPU provider by up to 0.25 (tolerance atol 0.001, "
                "rtol 0.001)", {"onnxruntime": "1.23.0", "max_abs_error": 0.25, "batches": [1, 4]})


@pytest.fixture(scope="module")
def probe_tarball(module_tmp):
    root = module_tmp.mktemp("probe-verify")
    probe_wheels.write_probe_project(root, "ProbeVerify")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PIP_FIND_LINKS", str(root / "wheels"))
        patch.setenv("TRITONSM_CACHE_DIR", str(root / "cache"))
        assert tritonsm_main(["build", "--spec", str(root / "spec.yaml"), "--out", str(root / "assets"),
                              "--work-dir", str(root / "work")]) == 0
    manifest = load_manifest(root / "assets" / "manifest.json")
    (artifact,) = manifest.endpoints["probe-sme"].artifacts
    return manifest.artifact_path(artifact), manifest.models["probe"]


@pytest.mark.triton
def test_the_stub_of_the_images_python_serves_the_model_in_its_shipped_environment(probe_tarball, tmp_path):
    found, tried = interpreters.find("3.12")
    if found is None:
        pytest.skip(f"needs a CPython 3.12 with a shared libpython, like the image's (tried: {tried})")
    tarball, entry = probe_tarball
    from local_endpoint.server import archive
    archive.extract_tarball(tarball, tmp_path / "repository")
    status, detail, facts = python_stub.check(tarball, tmp_path / "repository", case_for(entry, None),
                                              env={"SAGEMAKER_TRITON_LOG_VERBOSE": "false"}, python="3.12",
                                              gpu_count=0, work=tmp_path / "work", timeout=90)
    assert status == PASSED, detail
    assert facts["interpreter"] == found.executable and facts["stub python"] == "3.12"
    assert "Using Python execution env" in facts["server log says"][0] and "python-env-" in facts["server log says"][0]
    if pathlib.Path(facts["environment target"]["interpreter"]).resolve() != pathlib.Path(found.executable):
        assert facts["environment"].startswith(f"probe/{entry.execution_environment.file} unpacked into python-env-verify/ "
                                               f"with bin/python3 pointing at {found.executable}")


def test_without_the_stub_python_the_check_does_not_run_and_says_why(probe_tarball, tmp_path):
    tarball, entry = probe_tarball
    status, detail, _ = python_stub.check(tarball, tmp_path, case_for(entry, None), env={}, python="3.99",
                                          gpu_count=0, work=tmp_path / "work", timeout=5)
    assert status == NOT_RUN
    assert detail.startswith("nvidia-pytriton ships no stub for CPython 3.99 (it ships 3.10, 3.11, 3.12, 3.13, 3.8, 3.9")
