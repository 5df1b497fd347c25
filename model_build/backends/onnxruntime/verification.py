"""The onnxruntime backend's verification: candidate graphs, verified in the target image's ONNX Runtime.

Candidates, best first: transformer-fused (com.microsoft Attention and friends), plain graph
optimizations, the graph as exported. Each is stripped of host metadata first, so the bytes
verified are the bytes shipped. int8 (opt-in) is quantized from the graph that verified and
shipped only if it runs in the target runtime too and its outputs agree with the fp32 graph's
there within the spec's bounds (``models.<name>.int8``); otherwise fp32 ships, and the manifest's
``verification.details["int8"]`` holds the measured agreement, the bounds and the reason.
"""
from __future__ import annotations

import pathlib
import shutil
from typing import Any, Callable, Sequence

from deployment_spec.sections.model import Int8Gate, ModelSpec
from deployment_spec.facts.serving_runtimes import ServingRuntime
from model_build import reproducible
from model_build.backends.onnxruntime.settings import OnnxRuntimeBuild
from model_build.errors import BuildError
from model_build.recipes import ExportableModel
from model_build.verification import cases, side_env, verify

DEVICE = "cpu"  # the CPU execution provider: the registry's onnxruntime wheels have no CUDA one


def candidates(settings: OnnxRuntimeBuild, hints: dict[str, Any], exported: pathlib.Path, scratch: pathlib.Path,
               log: Callable[[str], None]) -> list[verify.Candidate]:
    """The candidate files, best first, each made in a process of its own (optimize_worker.py).

    ``hints``: optimize.transformer_hints of the model; ``exported``: the exported graph, its weights
    inline or in a file beside it (model_build/onnx_graph/weights.py).
    """
    from model_build.backends.onnxruntime import optimize_worker
    from model_build.backends.onnxruntime.optimize import OrtOptimizeError

    out: list[verify.Candidate] = []
    if settings.optimize_at_build:
        fallback = ""
        if settings.fuse_transformers and hints["model_type"]:
            fused = scratch / "fused.onnx"
            try:
                report = optimize_worker.make("fused", exported, fused, hints, log,
                                              limit=optimize_worker.fusion_limit(exported))
            except OrtOptimizeError as exc:
                # The fusions only make the graph faster: the unfused graph serves the same answers.
                fallback = f"no transformer-fused graph: {exc}"
                log(f"  {settings.name}: {fallback}; trying the graph with basic optimizations instead")
            else:
                log(f"  {settings.name}: transformer fusions ({report.fuser}): "
                    f"{dict(report.fused_ops) or 'nothing fused'}")
                if report.fused_ops:
                    out.append(verify.Candidate("transformer-fused graph", fused, report))
        optimized = scratch / "optimized.onnx"
        report = optimize_worker.make("basic", exported, optimized, {}, log)
        out.append(verify.Candidate("graph with basic optimizations", optimized, report, fallback))
    as_exported = scratch / "exported.onnx"
    optimize_worker.make("as-exported", exported, as_exported, {}, log)
    out.append(verify.Candidate("graph as exported", as_exported))
    return out


def reference(made: ExportableModel, model: ModelSpec) -> tuple[cases.Plan, dict[str, list]]:
    """The serving cases and eager PyTorch's outputs on them: all the check needs of the torch module."""
    plan = cases.plan(made, model)
    try:
        return plan, verify.reference(made.module, plan, made.input_names)
    except verify.EagerFailed as failed:  # the model itself, before any export: say where, in one line
        raise BuildError(f"model {model.name}: eager PyTorch itself fails at the serving case {failed.case} "
                         f"({failed.reason}), so nothing can be verified there and requests of that shape would fail "
                         "when served (the cases are batch 1, the preferred batch sizes and max_batch_size, at the full "
                         "and a short sequence length); fix: this architecture's own code refuses that shape, so serve "
                         "another architecture, or a recipe of your own that handles it") from None


def verify_and_pick(settings: OnnxRuntimeBuild, made: ExportableModel, runtime: ServingRuntime,
                    found: list[verify.Candidate], target: pathlib.Path, scratch: pathlib.Path,
                    log: Callable[[str], None], eager: tuple[cases.Plan, dict[str, list]],
                    exported_by: Sequence[str] = ()) -> dict[str, Any]:
    """Copies the first candidate that verifies to ``target``; returns the manifest's verification record.

    ``eager``: what ``reference`` returned (the caller may have let go of the torch module since);
    ``exported_by``: fallbacks taken before the candidates were made (the TorchScript-based exporter).
    """
    env = side_env.ensure("onnxruntime", runtime.onnxruntime_wheel, log)
    label = f"ONNX Runtime {runtime.onnxruntime_wheel}"
    plan, want = eager
    verdicts: list[verify.Verdict] = []
    for candidate in found:
        got = verify.run_candidates(env, "onnx", [candidate], plan, made.input_names, made.output_names, scratch,
                                    graph_level=settings.graph_level)
        verdicts.append(verify.judge(candidate.label, got[candidate.label], want, plan, made.output_names,
                                     settings.tolerance, model_reference=True))
        if verdicts[-1].ok:
            break
    chosen = verify.choose(settings.name, runtime, label, verdicts, found, settings.tolerance, log)
    shutil.copyfile(chosen.path, target)
    result = verify.record(runtime, "onnxruntime", runtime.onnxruntime_wheel, DEVICE, verdicts[-1], verdicts,
                           len(plan.cases))
    fallbacks = [*exported_by, *(candidate.fallback for candidate in found if candidate.fallback)]
    if fallbacks:
        result["fallbacks"] = fallbacks
    if settings.int8 is not None:
        result.update(int8_gate(settings, settings.int8, made, env, plan, target, scratch, log))
    return result


def int8_gate(settings: OnnxRuntimeBuild, gate: Int8Gate, made: ExportableModel, env: side_env.SideEnv,
              plan: cases.Plan, target: pathlib.Path, scratch: pathlib.Path,
              log: Callable[[str], None]) -> dict[str, Any]:
    """Quantizes the verified graph; ships int8 only if it meets ``models.<name>.int8`` against fp32.

    Both graphs run in the serving runtime on the recipe's real inputs (``agreement_inputs``),
    else on the parity cases; the fp32 graph is the reference because it is what ships instead.
    """
    from model_build.backends.onnxruntime import optimize as ort_optimize

    quantized = scratch / "int8.onnx"
    report = ort_optimize.quantize_int8_dynamic(target, quantized)
    reproducible.strip_onnx(quantized)
    if made.agreement_inputs is not None:
        on = cases.Plan((cases.Case("real inputs", dict(made.agreement_inputs)),), (), None)
        inputs = f"{made.agreement_from} ({int(next(iter(made.agreement_inputs.values())).shape[0])} rows)"
    else:
        on, inputs = plan, "the parity cases (the recipe's sample inputs)"
    fp32, int8 = verify.Candidate("fp32 graph", target), verify.Candidate("int8 graph", quantized)
    got = verify.run_candidates(env, "onnx", [fp32, int8], on, made.input_names, made.output_names, scratch,
                                graph_level=settings.graph_level)
    for label in (int8.label, fp32.label):
        if isinstance(got[label], str):
            log(f"  {settings.name}: the {label} does not run in ONNX Runtime {env.version}: {got[label]}; "
                "shipping fp32")
            return {"int8": {"shipped": False, "rejected": got[label]}}
    agree = agreement([got[int8.label][c.name][0] for c in on.cases], [got[fp32.label][c.name][0] for c in on.cases])
    record = {"inputs": inputs, "reference": f"the fp32 graph in ONNX Runtime {env.version}", **agree,
              "required": {"min_cosine_similarity": gate.min_cosine_similarity,
                           "min_top1_agreement": gate.min_top1_agreement},
              "bytes_fp32": report.bytes_before, "bytes_int8": report.bytes_after}
    refused = refusal(settings.name, agree, gate, inputs)
    if refused:
        log(f"  {settings.name}: int8 not shipped, fp32 shipped instead: {refused}")
        return {"int8": {"shipped": False, "refused": refused, **record}}
    shutil.copyfile(quantized, target)
    log(f"  {settings.name}: int8 in ONNX Runtime {env.version} ({report.bytes_before / 2**20:.0f} -> "
        f"{report.bytes_after / 2**20:.0f} MB) on {inputs}: min cosine with fp32 "
        f"{agree['min_cosine_similarity']:.6f} (>= {gate.min_cosine_similarity:g}), top-1 agreement "
        f"{agree['top1_agreement']:.4f} (>= {gate.min_top1_agreement:g}), max abs error {agree['max_abs_error']:.2e}")
    return {"int8": {"shipped": True, **record}}


# (measure in agreement(), its words, its format, the Int8Gate bound it must reach)
BOUNDS = (("min_cosine_similarity", "lowest cosine similarity", ".6f", "min_cosine_similarity"),
          ("top1_agreement", "top-1 agreement", ".4f", "min_top1_agreement"))


def refusal(name: str, agree: dict[str, float], gate: Int8Gate, inputs: str) -> str:
    """Why int8 may not ship (every bound it misses), or "" when it meets them all."""
    missed = [f"its {words} {agree[measure]:{fmt}} is below models.{name}.int8.{bound} {getattr(gate, bound):g}"
              for measure, words, fmt, bound in BOUNDS if agree[measure] < getattr(gate, bound)]
    if not missed:
        return ""
    return (f"on {inputs}, against the fp32 graph, {' and '.join(missed)}; lower the bound if that loss is "
            "acceptable, or set precision: fp32")


def int8_parity(serving: dict[str, Any]) -> dict[str, float]:
    """The int8 figures the manifest's parity record carries beside the fp32 ones, when int8 shipped."""
    int8 = serving.get("int8") or {}
    if not int8.get("shipped"):
        return {}
    return {f"int8_{key}": int8[key] for key in ("top1_agreement", "max_abs_error", "min_cosine_similarity")}


def agreement(got: list, want: list) -> dict[str, float]:
    """How closely ``got`` (int8 outputs) follows ``want`` (fp32), row by row; one array per case.

    Each case's array is cut into rows along axis 0 (one row per input example) and each row
    flattened; the rows of all cases are pooled, in float64. Returns:

    * ``min_cosine_similarity`` / ``mean_cosine_similarity``: the lowest / mean over rows of
      got.want / (|got| |want|); the measure for embeddings (1.0 = same direction).
    * ``top1_agreement``: the share of rows whose argmax (of the flattened row) is the same; the
      measure for a classifier's logits [batch, classes] (the predicted class). Meaningless for
      embeddings, hence the gate's default bound of 0 for it.
    * ``max_abs_error``: the largest elementwise difference; ``rows``: how many rows.
    """
    import numpy as np

    rows_got = np.concatenate([g.reshape(g.shape[0], -1) for g in got]).astype(np.float64)
    rows_want = np.concatenate([w.reshape(w.shape[0], -1) for w in want]).astype(np.float64)
    cosine = (rows_got * rows_want).sum(1) / (np.linalg.norm(rows_got, axis=1) * np.linalg.norm(rows_want, axis=1)
                                              + 1e-12)
    return {"rows": int(rows_want.shape[0]),
            "top1_agreement": float((rows_got.argmax(1) == rows_want.argmax(1)).mean()),
            "min_cosine_similarity": float(cosine.min()),
            "mean_cosine_similarity": float(cosine.mean()),
            "max_abs_error": float(np.abs(rows_got - rows_want).max())}
