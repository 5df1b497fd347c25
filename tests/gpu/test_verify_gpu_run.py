"""`tritonsm verify --gpu` on a CUDA host: a TorchScript model compared on cuda:0 with the CPU, and a
Python-backend model served by the image Python's stub with its KIND_GPU instance on the GPU.

Skipped where torch sees no CUDA device (tests/local_endpoint/test_verify_gpu.py covers that case).
"""
from __future__ import annotations

import json
import pathlib
import sys

import pytest
import torch

from tritonsm.checks.gpu import interpreters
from tritonsm.cli import main as tritonsm_main

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import probe_wheels  # noqa: E402

pytestmark = pytest.mark.gpu

SPEC = """\
project: VerifyGpu
triton_version: "25.09"
models:
  bert: {backend: pytorch, source: {recipe: tiny-bert}, sequence_length: 16, max_batch_size: 4,
         instance_groups: [{kind: gpu, count: 1}]}
  probe:
    backend: python
    source: {python_dir: probe}
    max_batch_size: 4
    instance_groups: [{kind: gpu, count: 1}]
    python: {requirements: ["tritonsm-probe==1.0", "numpy==1.26.4"]}
endpoints:
  ep: {kind: multi-model, models: [bert, probe], instance_type: ml.g5.xlarge}
environments:
  dev: {region: us-east-1}
"""


def test_verify_gpu_runs_the_torchscript_and_python_checks(tmp_path, monkeypatch, capsys):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device visible to torch (torch.cuda.is_available() is False here)")
    probe_wheels.make_wheel(tmp_path / "wheels")
    probe_wheels.write_probe_model(tmp_path / "probe")
    (tmp_path / "spec.yaml").write_text(SPEC)
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "wheels"))
    monkeypatch.setenv("TRITONSM_CACHE_DIR", str(tmp_path / "cache"))
    flags = ["--spec", str(tmp_path / "spec.yaml")]
    assert tritonsm_main(["build", *flags, "--out", str(tmp_path / "assets"), "--work-dir", str(tmp_path / "w")]) == 0
    code = tritonsm_main(["verify", "--gpu", *flags, "--manifest", str(tmp_path / "assets" / "manifest.json")])
    print(capsys.readouterr().out)
    report = json.loads((tmp_path / "assets" / "verify-gpu.json").read_text())
    status = {c["model"]: c["status"] for c in report["checks"]}
    assert code == 0 and status["bert"] == "passed", report
    if interpreters.find("3.12")[0] is None:
        assert status["probe"] == "not run"
    else:
        assert status["probe"] == "passed", report
