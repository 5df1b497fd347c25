"""Verification: ONNX Runtime against eager PyTorch on fixed-seed inputs (a TorchScript trace: model_build.verify).

The inputs use a batch size other than the export example's, so a lost dynamic axis fails here
instead of on the endpoint. Elementwise ``|a - b| <= atol + rtol * |b|`` decides (numpy.allclose);
the record keeps the max absolute error and the max relative error over elements with
``|b| > atol`` (relative error near zero says nothing).
"""
from __future__ import annotations

import pathlib
from typing import Any, Mapping

from deployment_spec.sections.model import Tolerance
from model_build.errors import BuildError
from model_build.recipes import ExportableModel

PARITY_BATCH, PARITY_SEED = 3, 1234


def parity_inputs(made: ExportableModel) -> Mapping[str, Any]:
    if made.sample_inputs is not None:
        return made.sample_inputs(PARITY_BATCH, PARITY_SEED)
    return made.example_inputs


def reference(made: ExportableModel, inputs: Mapping[str, Any]) -> list:
    import torch

    with torch.no_grad():
        out = made.module(**inputs)
    out = out if isinstance(out, (tuple, list)) else (out,)
    return [o.detach().cpu().numpy() for o in out]


def check_onnx(name: str, made: ExportableModel, onnx_path: pathlib.Path, tolerance: Tolerance) -> dict[str, float]:
    import onnxruntime

    inputs = parity_inputs(made)
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
    got = session.run(list(made.output_names), {k: v.cpu().numpy() for k, v in inputs.items()})
    return compare(name, "ONNX Runtime", made.output_names, got, reference(made, inputs), tolerance)


def compare(name: str, what: str, names, got: list, want: list, tolerance: Tolerance) -> dict[str, float]:
    import numpy as np

    max_abs = max_rel = 0.0
    for out_name, a, b in zip(names, got, want):
        if a.shape != b.shape:
            raise BuildError(f"model {name}: {what} output {out_name} has shape {list(a.shape)}, PyTorch "
                             f"{list(b.shape)}; check the dynamic axes of the export")
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        diff = np.abs(a64 - b64)
        worst = float(diff.max()) if diff.size else 0.0
        meaningful = np.abs(b64) > tolerance.atol
        rel = float((diff[meaningful] / np.abs(b64[meaningful])).max()) if meaningful.any() else 0.0
        max_abs, max_rel = max(max_abs, worst), max(max_rel, rel)
        if not np.all(diff <= tolerance.atol + tolerance.rtol * np.abs(b64)):
            raise BuildError(f"model {name}: {what} output {out_name} differs from PyTorch beyond tolerance "
                             f"(max abs error {worst:.3g}, max rel error {rel:.3g}; atol {tolerance.atol:g}, "
                             f"rtol {tolerance.rtol:g}); check the export or raise models.{name}.tolerance")
    return {"max_abs_error": max_abs, "max_rel_error": max_rel, "atol": tolerance.atol, "rtol": tolerance.rtol}
