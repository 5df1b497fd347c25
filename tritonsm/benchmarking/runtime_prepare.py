"""The ONNX files a runtime comparison loads: exported, the graph the build ships, and int8.

Uses the build's own recipe, exporter, candidate graphs and serving-runtime check
(model_build.backends.onnxruntime.verification), so the benchmark times exactly the file `tritonsm build`
ships for the spec's triton_version, verified in that release's ONNX Runtime.
"""
from __future__ import annotations

import dataclasses
import pathlib
import time
from typing import Any, Callable, Mapping, Optional

from deployment_spec.sections.model import ModelSpec
from deployment_spec.facts.serving_runtimes import ServingRuntime

SEED = 20240


@dataclasses.dataclass
class Prepared:
    exported: pathlib.Path
    optimized: pathlib.Path                # the graph the build ships (first candidate that verifies)
    int8: Optional[pathlib.Path]
    optimize_report: dict                  # the transformer fusions tried (shipped only if they verify)
    quantize_report: Optional[dict]
    parity: dict                           # the build's serving check of the shipped graph
    feeds: Mapping[int, Mapping[str, Any]]  # batch size -> numpy inputs


def prepare(model: ModelSpec, root: pathlib.Path, work: pathlib.Path, batches: list[int], int8: bool,
            runtime: ServingRuntime, log: Callable[[str], None]) -> Prepared:
    from model_build import reproducible
    from model_build.onnx_graph import export as onnx_export
    from model_build.backends.onnxruntime import optimize as ort_optimize
    from model_build.recipes import load_exportable
    from model_build.backends.onnxruntime import verification as onnx_check
    from model_build.backends.onnxruntime.settings import OnnxRuntimeBuild

    work.mkdir(parents=True, exist_ok=True)
    made = load_exportable(model, root)
    if made.note:
        log(f"  {model.name}: {made.note}")
    exported, optimized = work / "exported.onnx", work / "shipped.onnx"
    started = time.monotonic()
    onnx_export.export(model.name, made, exported)
    log(f"  {model.name}: exported ONNX (opset {onnx_export.OPSET}) in {time.monotonic() - started:.0f} s")
    reproducible.strip_onnx(exported)
    settings = OnnxRuntimeBuild.of(model)
    eager = onnx_check.reference(made, model)
    found = onnx_check.candidates(settings, ort_optimize.transformer_hints(made.module), exported, work, log)
    # The rewrites tried: the transformer fusions where they fused something, else the basic ones.
    report = next((c.report.as_dict() for c in found if c.report is not None),
                  {"fuser": "none (optimize_at_build off)", "fused_ops": {}, "nodes_before": 0, "nodes_after": 0})
    fp32 = dataclasses.replace(settings, int8=None)  # int8 is quantized below, from the shipped graph
    check = onnx_check.verify_and_pick(fp32, made, runtime, found, optimized, work, log, eager)
    log(f"  {model.name}: ships the {check['graph']}, verified in ONNX Runtime {check['version']} "
        f"(max abs error {check['max_abs_error']:.1e})")
    quantized, quantize_report = None, None
    if int8:
        quantized = work / "int8.onnx"
        started = time.monotonic()
        quantize_report = ort_optimize.quantize_int8_dynamic(optimized, quantized).as_dict()
        log(f"  {model.name}: int8 dynamic quantization in {time.monotonic() - started:.0f} s "
            f"({quantize_report['bytes_before'] / 2**20:.0f} -> {quantize_report['bytes_after'] / 2**20:.0f} MiB)")
    feeds = {b: {k: v.cpu().numpy() for k, v in _sample(made, b).items()} for b in batches}
    return Prepared(exported, optimized, quantized, report, quantize_report, check, feeds)


def _sample(made, batch: int) -> Mapping[str, Any]:
    if made.sample_inputs is not None:
        return made.sample_inputs(batch, SEED + batch)
    # A recipe without a sampler: repeat its example along the batch axis.
    import torch
    return {k: torch.cat([v[:1]] * batch) for k, v in made.example_inputs.items()}
