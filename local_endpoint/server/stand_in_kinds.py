"""Which backends `--cpu-stand-in` can stand in for, and which it cannot (with what to do instead).

Its own module so that both the backend checks (local_endpoint.server.backends) and the stand-in
rewriting (local_endpoint.stand_in.cpu_stand_in) read it without importing each other.
"""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class StandInKind:
    model_file: str  # Triton's default file name for the backend
    runtime: str  # what actually runs, as the start-up note names it


STAND_INS = {
    "onnxruntime": StandInKind("model.onnx", "ONNX Runtime"),
    "pytorch": StandInKind("model.pt", "TorchScript (torch.jit.load)"),
    "dali": StandInKind("model.dali", "DALI's CPU operators"),
}

# Backends that cannot be stood in, and what to do instead.
NO_STAND_IN = {
    "tensorrt": "a TensorRT plan (model.plan) is GPU-only and cannot be stood in on the CPU; serve the ONNX "
                "variant of the model (backend: onnxruntime) with --cpu-stand-in, or test it on a deployed endpoint",
}
