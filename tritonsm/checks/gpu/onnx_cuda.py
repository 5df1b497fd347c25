"""An ONNX artifact on ONNX Runtime's CUDA execution provider, compared with its CPU provider.

Runs only where this Python's `onnxruntime` offers CUDAExecutionProvider (the `onnxruntime-gpu` wheel);
the PyPI `onnxruntime` wheel is CPU-only. The endpoint's image runs its own ONNX Runtime release
(deployment_spec.facts.serving_runtimes); the report names both.
"""
from __future__ import annotations

import pathlib

from tritonsm.checks.gpu.agreement import Agreement
from tritonsm.checks.gpu.inputs import batches
from tritonsm.checks.gpu.report import FAILED, NOT_RUN
from tritonsm.checks.smoke_requests import SmokeCase

WHAT = "ONNX Runtime's CUDA execution provider vs its CPU provider"
CUDA = "CUDAExecutionProvider"


def check(path: pathlib.Path, case: SmokeCase, max_batch_size: int, image_release: str) -> tuple[str, str, dict]:
    import onnxruntime

    facts = {"onnxruntime": onnxruntime.__version__, "image onnxruntime": image_release}
    if CUDA not in onnxruntime.get_available_providers():
        return NOT_RUN, (f"this onnxruntime {onnxruntime.__version__} has no {CUDA} (providers: "
                         f"{', '.join(onnxruntime.get_available_providers())}); install onnxruntime-gpu=="
                         f"{image_release}, the image's release, in place of onnxruntime"), facts
    if path.is_dir():  # a model with external data: the folder holds model.onnx
        path = path / "model.onnx"
    gpu = onnxruntime.InferenceSession(str(path), providers=[CUDA])
    if gpu.get_providers()[0] != CUDA:
        return FAILED, f"ONNX Runtime fell back to {gpu.get_providers()[0]} (CUDA provider not usable here)", facts
    cpu = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    agreement = Agreement(case, "the CPU provider", facts)
    for tensors in batches(case, max_batch_size):
        feed = {t.name: t.array for t in tensors}
        agreement.batches.append(int(tensors[0].array.shape[0]))
        want, got = cpu.run(None, feed), gpu.run(None, feed)
        for output, w, g in zip(gpu.get_outputs(), want, got):
            if failed := agreement.differs(output.name, w, g):
                return failed
    return agreement.passed()
