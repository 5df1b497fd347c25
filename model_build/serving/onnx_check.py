"""The onnxruntime-backend path: candidate graphs, verified in the target image's ONNX Runtime.

Candidates, best first: transformer-fused (com.microsoft Attention and friends), plain graph
optimizations, the graph as exported. Each is stripped of host metadata first, so the bytes
verified are the bytes shipped. int8 (opt-in) is quantized from the graph that verified and
shipped only if it loads and runs in the target runtime too; its agreement with eager PyTorch in
that runtime is recorded.
"""
from __future__ import annotations

import pathlib
import shutil
from typing import Any, Callable

from deployment_spec.model import ModelSpec, Precision
from deployment_spec.serving_runtimes import ServingRuntime
from model_build import reproducible
from model_build.recipes import ExportableModel
from model_build.serving import cases, side_env, verify

DEVICE = "cpu"  # the CPU execution provider: the registry's onnxruntime wheels have no CUDA one


def candidates(model: ModelSpec, made: ExportableModel, exported: pathlib.Path, scratch: pathlib.Path,
               log: Callable[[str], None]) -> list[verify.Candidate]:
    from model_build import ort_optimize

    out: list[verify.Candidate] = []
    settings = model.onnxruntime
    optimize = settings.optimize_at_build if settings else True
    # The TensorRT execution provider lacks the contrib ops the fusions emit, so it gets the plain graph.
    if optimize and not (settings and settings.tensorrt_accelerator):
        hints = ort_optimize.transformer_hints(made.module)
        if hints["model_type"]:
            fused = scratch / "fused.onnx"
            report = ort_optimize.optimize_for_ort(exported, fused, **hints)
            log(f"  {model.name}: transformer fusions ({report.fuser}): {dict(report.fused_ops) or 'nothing fused'}")
            if report.fused_ops:
                out.append(verify.Candidate("transformer-fused graph", fused, report))
        optimized = scratch / "optimized.onnx"
        report = ort_optimize.optimize_for_ort(exported, optimized, model_type=None)
        out.append(verify.Candidate("graph with basic optimizations", optimized, report))
    out.append(verify.Candidate("graph as exported", exported))
    for candidate in out:
        reproducible.strip_onnx(candidate.path)
    return out


def verify_and_pick(model: ModelSpec, made: ExportableModel, runtime: ServingRuntime, found: list[verify.Candidate],
                    target: pathlib.Path, scratch: pathlib.Path, log: Callable[[str], None]) -> dict[str, Any]:
    """Copies the first candidate that verifies to ``target``; returns the manifest's serving_check record."""
    env = side_env.ensure("onnxruntime", runtime.onnxruntime_wheel, log)
    label = f"ONNX Runtime {runtime.onnxruntime_wheel}"
    plan = cases.plan(made, model)
    want = verify.reference(made.module, plan, made.input_names)
    level = model.onnxruntime.graph_optimization_level.value if model.onnxruntime else "all"
    verdicts: list[verify.Verdict] = []
    for candidate in found:
        got = verify.run_candidates(env, "onnx", [candidate], plan, made.input_names, made.output_names, scratch,
                                    graph_level=level)
        verdicts.append(verify.judge(candidate.label, got[candidate.label], want, plan, made.output_names,
                                     model.tolerance))
        if verdicts[-1].ok:
            break
    chosen = verify.choose(model.name, runtime, label, verdicts, found, model.tolerance, log)
    shutil.copyfile(chosen.path, target)
    result = verify.record(runtime, "onnxruntime", runtime.onnxruntime_wheel, DEVICE, verdicts[-1], verdicts,
                           len(plan.cases))
    if model.precision is Precision.INT8:
        result.update(_int8(model, made, env, plan, want, target, scratch, log))
    return result


def _int8(model: ModelSpec, made: ExportableModel, env: side_env.SideEnv, plan: cases.Plan, want: dict,
          target: pathlib.Path, scratch: pathlib.Path, log: Callable[[str], None]) -> dict[str, Any]:
    from model_build import ort_optimize

    quantized = scratch / "int8.onnx"
    report = ort_optimize.quantize_int8_dynamic(target, quantized)
    reproducible.strip_onnx(quantized)
    candidate = verify.Candidate("int8 graph", quantized)
    got = verify.run_candidates(env, "onnx", [candidate], plan, made.input_names, made.output_names, scratch)
    outputs = got[candidate.label]
    if isinstance(outputs, str):
        log(f"  {model.name}: the int8 graph does not run in ONNX Runtime {env.version}: {outputs}; shipping fp32")
        return {"int8": {"shipped": False, "rejected": outputs}}
    agree = agreement([outputs[c.name][0] for c in plan.cases], [want[c.name][0] for c in plan.cases])
    shutil.copyfile(quantized, target)
    log(f"  {model.name}: int8 in ONNX Runtime {env.version} ({report.bytes_before / 2**20:.0f} -> "
        f"{report.bytes_after / 2**20:.0f} MB): top-1 agreement with fp32 PyTorch {agree['top1_agreement']:.0%}, "
        f"min cosine {agree['min_cosine_similarity']:.4f}, max abs error {agree['max_abs_error']:.2e}")
    return {"int8": {"shipped": True, **agree}}


def int8_parity(serving: dict[str, Any]) -> dict[str, float]:
    """The int8 figures the manifest's parity record carries beside the fp32 ones (not gated)."""
    int8 = serving.get("int8") or {}
    if not int8.get("shipped"):
        return {}
    return {f"int8_{key}": int8[key] for key in ("top1_agreement", "max_abs_error", "min_cosine_similarity")}


def agreement(got: list, want: list) -> dict[str, float]:
    """Top-1 agreement over rows (last axis), the lowest per-row cosine similarity and the max abs error."""
    import numpy as np

    rows_got = np.concatenate([g.reshape(g.shape[0], -1) for g in got]).astype(np.float64)
    rows_want = np.concatenate([w.reshape(w.shape[0], -1) for w in want]).astype(np.float64)
    cosine = (rows_got * rows_want).sum(1) / (np.linalg.norm(rows_got, axis=1) * np.linalg.norm(rows_want, axis=1)
                                              + 1e-12)
    return {"rows": int(rows_want.shape[0]),
            "top1_agreement": float((rows_got.argmax(1) == rows_want.argmax(1)).mean()),
            "min_cosine_similarity": float(cosine.min()),
            "max_abs_error": float(np.abs(rows_got - rows_want).max())}
