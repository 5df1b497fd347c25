"""TorchScript built here, loaded the way Triton's libtorch backend loads a KIND_GPU instance.

The backend calls ``torch::jit::load(path, device)`` with the instance's CUDA device and moves the
inputs there (pytorch_backend, src/libtorch.cc, LoadModel / SetInputTensors). A graph traced on the
CPU that fixed "cpu" as a constant fails there (the issue's defect 2); the build's device-agnostic
graph must give the CPU's answers on cuda. Skipped where torch sees no CUDA device.
"""
from __future__ import annotations

import pytest
import torch

from deployment_spec import load_spec
from deployment_spec.builds.manifest import load_manifest

pytestmark = pytest.mark.gpu

SPEC = """\
project: GpuCheck
triton_version: "25.09"
models:
  bert: {backend: pytorch, source: {recipe: tiny-bert}, sequence_length: 16, max_batch_size: 4,
         instance_groups: [{kind: gpu, count: 2}]}
endpoints:
  ep: {kind: single-model, models: [bert], instance_type: ml.g5.xlarge}
environments:
  dev: {region: us-east-1}
"""


def _need_cuda() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device visible to torch (torch.cuda.is_available() is False here)")


class _Positions(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.arange(x.shape[1], device=x.device)


def test_a_cpu_trace_with_a_fixed_device_fails_on_cuda():
    _need_cuda()
    traced = torch.jit.trace(_Positions(), (torch.zeros(1, 4),))
    with pytest.raises(RuntimeError, match="same device"):
        traced(torch.zeros(1, 4, device="cuda:0"))


def test_the_built_torchscript_runs_on_cuda_with_the_cpu_answers(tmp_path):
    _need_cuda()
    from model_build import build

    (tmp_path / "spec.yaml").write_text(SPEC)
    spec = load_spec(tmp_path / "spec.yaml")
    report = build.run(spec, tmp_path / "assets", tmp_path / "work", log=lambda line: None)
    assert report.exit_code() == 0, report.failed
    entry = load_manifest(tmp_path / "assets" / "manifest.json").models["bert"]
    path = str(next((tmp_path / "work").rglob("bert/1/model.pt")))
    on_cpu = torch.jit.load(path, map_location="cpu").eval()
    on_gpu = torch.jit.load(path, map_location="cuda:0").eval()
    generator = torch.Generator().manual_seed(0)
    for batch, length in ((1, 16), (3, 16), (4, 7)):
        ids = torch.randint(1, 100, (batch, length), generator=generator)
        mask = torch.ones(batch, length, dtype=torch.int64)
        mask[1:, length // 2:] = 0
        inputs = [ids, mask][:len(entry.inputs)]
        with torch.no_grad():
            want = on_cpu(*inputs)
            got = on_gpu(*[t.to("cuda:0") for t in inputs])
        want = want if isinstance(want, (tuple, list)) else (want,)
        got = got if isinstance(got, (tuple, list)) else (got,)
        for w, g in zip(want, got):
            assert g.device.type == "cuda"
            torch.testing.assert_close(g.cpu(), w, rtol=1e-3, atol=1e-3)
