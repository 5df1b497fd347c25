"""A TorchScript artifact on the GPU, loaded as Triton's libtorch backend loads a KIND_GPU instance.

The backend calls `torch::jit::load(model_stream, device)` with the instance's CUDA device, moves every
input there and runs the module without gradients (triton-inference-server/pytorch_backend
src/libtorch.cc at r25.09: lines 291-301 load, 1585-1609 run). Here the same file is loaded with `map_location="cuda:0"` and with the CPU,
given the same inputs, and the answers compared within the model's tolerance; an output that comes back
on another device, or a graph that fixed the CPU as a constant, fails.
"""
from __future__ import annotations

import pathlib

from tritonsm.checks.gpu.agreement import Agreement
from tritonsm.checks.gpu.inputs import batches
from tritonsm.checks.gpu.report import FAILED
from tritonsm.checks.smoke_requests import SmokeCase

WHAT = "TorchScript on cuda:0 (as a KIND_GPU instance loads it) vs the CPU"


def check(path: pathlib.Path, case: SmokeCase, max_batch_size: int, device: str = "cuda:0") -> tuple[str, str, dict]:
    import torch

    facts: dict = {"torch": torch.__version__, "device": device}
    cpu = torch.jit.load(str(path), map_location="cpu").eval()
    try:
        gpu = torch.jit.load(str(path), map_location=device).eval()
    except RuntimeError as error:
        return FAILED, f"torch.jit.load(map_location={device!r}) failed: {_first_line(error)}", facts
    agreement = Agreement(case, "the CPU", facts)
    for tensors in batches(case, max_batch_size):
        inputs = [torch.from_numpy(t.array) for t in tensors]
        agreement.batches.append(int(inputs[0].shape[0]) if case.batched else 1)
        with torch.no_grad():
            want = _outputs(cpu(*inputs))
            try:
                got = _outputs(gpu(*[t.to(device) for t in inputs]))
            except RuntimeError as error:
                return FAILED, f"running on {device} failed: {_first_line(error)}", facts
        for index, (w, g) in enumerate(zip(want, got)):
            if g.device.type != torch.device(device).type:
                return FAILED, f"output {index} came back on {g.device}, not {device}", facts
            if failed := agreement.differs(str(index), w.double().numpy(), g.cpu().double().numpy()):
                return failed
    return agreement.passed()


def _outputs(value) -> list:
    if isinstance(value, dict):
        return list(value.values())
    return list(value) if isinstance(value, (tuple, list)) else [value]


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]
