"""The ONNX files a runtime comparison loads: exported, optimized, and (if asked) int8.

Uses the build's own recipe, exporter and parity check, so the benchmark measures what
`tritonsm build` ships, plus model_build.ort_optimize on top.
"""
from __future__ import annotations

import dataclasses
import pathlib
import time
from typing import Any, Callable, Mapping, Optional

from deployment_spec.model import ModelSpec

SEED = 20240


@dataclasses.dataclass
class Prepared:
    exported: pathlib.Path
    optimized: pathlib.Path
    int8: Optional[pathlib.Path]
    optimize_report: dict
    quantize_report: Optional[dict]
    parity: dict                           # optimized ONNX Runtime vs eager PyTorch (the build's check)
    feeds: Mapping[int, Mapping[str, Any]]  # batch size -> numpy inputs


def prepare(model: ModelSpec, root: pathlib.Path, work: pathlib.Path, batches: list[int], int8: bool,
            log: Callable[[str], None]) -> Prepared:
    from model_build import onnx_export, ort_optimize, parity
    from model_build.recipes import load_exportable

    work.mkdir(parents=True, exist_ok=True)
    made = load_exportable(model, root)
    if made.note:
        log(f"  {model.name}: {made.note}")
    exported, optimized = work / "exported.onnx", work / "optimized.onnx"
    started = time.monotonic()
    onnx_export.export(model.name, made, exported)
    log(f"  {model.name}: exported ONNX (opset {onnx_export.OPSET}) in {time.monotonic() - started:.0f} s")
    started = time.monotonic()
    report = ort_optimize.optimize_for_ort(exported, optimized, **ort_optimize.transformer_hints(made.module))
    log(f"  {model.name}: optimized ({report.fuser}; fused {dict(report.fused_ops) or 'nothing'}; "
        f"{report.nodes_before} -> {report.nodes_after} nodes) in {time.monotonic() - started:.0f} s")
    check = parity.check_onnx(model.name, made, optimized, model.tolerance)
    log(f"  {model.name}: optimized model matches PyTorch (max abs error {check['max_abs_error']:.1e})")
    quantized, quantize_report = None, None
    if int8:
        quantized = work / "int8.onnx"
        started = time.monotonic()
        quantize_report = ort_optimize.quantize_int8_dynamic(optimized, quantized).as_dict()
        log(f"  {model.name}: int8 dynamic quantization in {time.monotonic() - started:.0f} s "
            f"({quantize_report['bytes_before'] / 2**20:.0f} -> {quantize_report['bytes_after'] / 2**20:.0f} MiB)")
    feeds = {b: {k: v.cpu().numpy() for k, v in _sample(made, b).items()} for b in batches}
    return Prepared(exported, optimized, quantized, report.as_dict(), quantize_report, check, feeds)


def _sample(made, batch: int) -> Mapping[str, Any]:
    if made.sample_inputs is not None:
        return made.sample_inputs(batch, SEED + batch)
    # A recipe without a sampler: repeat its example along the batch axis.
    import torch
    return {k: torch.cat([v[:1]] * batch) for k, v in made.example_inputs.items()}
