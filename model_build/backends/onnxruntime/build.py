"""``backend: onnxruntime`` models: a recipe exported to ONNX, or the user's ONNX file, verified where it is served.

A recipe's graph (model_build/onnx_graph/) becomes candidates, best first (optimize.py, run by
optimize_worker.py), and the first that verifies in the target image's ONNX Runtime against eager
PyTorch ships (verification.py); int8 only where it passes its gate. A user's file is compared
with itself in this machine's ONNX Runtime (given_file.py).
"""
from __future__ import annotations

import pathlib
from typing import Mapping

from deployment_spec.builds.manifest import ModelEntry, TensorSpec
from deployment_spec.sections.model import ModelSpec
from deployment_spec.facts.serving_runtimes import runtime
from model_build import checks, given_files, memory_budget
from model_build.backends.onnxruntime import given_file, verification
from model_build.backends.onnxruntime.settings import OnnxRuntimeBuild
from model_build.backends.result import BackendResult
from model_build.build_context import BuildContext
from model_build.onnx_graph import export as onnx_export
from model_build.onnx_graph.from_recipe import export_recipe, opset
from model_build.progress import Step
from model_build.verification import file_check
from model_build.verification.record import typed

MODEL_FILE = "model.onnx"


def build(ctx: BuildContext, model: ModelSpec, scratch: pathlib.Path, built: Mapping[str, ModelEntry]) -> BackendResult:
    settings = OnnxRuntimeBuild.of(model)
    target = scratch / MODEL_FILE
    if model.source.kind() == "onnx":
        inputs, outputs, check, parity = _given(ctx, model, settings, target, scratch)
    else:
        inputs, outputs, check, parity = _from_recipe(ctx, model, settings, target, scratch)
    # What config.pbtxt will declare, against the graph that ships (Triton refuses a mismatch at load).
    graph_inputs, _ = onnx_export.graph_io(target, model.max_batch_size, model.name)
    checks.check_onnx_matches_config(model.name, inputs, graph_inputs)
    return BackendResult(inputs, outputs, {MODEL_FILE: target}, typed(check), parity=parity,
                         versions={"onnx_opset": opset(target)})


def _given(ctx: BuildContext, model: ModelSpec, settings: OnnxRuntimeBuild, target: pathlib.Path,
           scratch: pathlib.Path) -> tuple[tuple[TensorSpec, ...], tuple[TensorSpec, ...], dict, dict | None]:
    src, inputs, outputs = given_files.onnx_file(ctx, model, target)
    made = given_files.exportable(model, inputs, outputs, ctx.spec.root)
    serving_runtime = runtime(ctx.spec.triton_version)
    step = Step(ctx, model.name, f"run {src.name} in ONNX Runtime {serving_runtime.onnxruntime_wheel} (Triton "
                                 f"{serving_runtime.triton_version}'s) and in this machine's")
    check = given_file.check(model, settings, made, outputs, serving_runtime, target, src, scratch, ctx.log)
    step.done()
    parity = file_check.parity(model, check)
    return inputs, outputs, check, (parity and {**parity, **verification.int8_parity(check)})


def _from_recipe(ctx: BuildContext, model: ModelSpec, settings: OnnxRuntimeBuild, target: pathlib.Path,
                 scratch: pathlib.Path) -> tuple[tuple[TensorSpec, ...], tuple[TensorSpec, ...], dict, dict]:
    from model_build.backends.onnxruntime import optimize

    made, exported, exporter_fallback = export_recipe(ctx, model, scratch, batch_axis_only=False,
                                                      optimize=settings.optimize_at_build)
    serving_runtime = runtime(ctx.spec.triton_version)
    onnx_export.graph_io(exported, model.max_batch_size, model.name)  # a lost batch axis fails here, by name
    step = Step(ctx, model.name, "eager PyTorch on the serving cases")
    reference = verification.reference(made, model)
    step.done(f" ({len(reference[0].cases)} cases)")
    hints = optimize.transformer_hints(made.module)
    # From here on child processes make and run the graphs: the eager weights are not needed any more.
    made.module = None
    memory_budget.give_back()
    step = Step(ctx, model.name, "ONNX Runtime graph optimizations and transformer fusions")
    found = verification.candidates(settings, hints, exported, scratch, ctx.log)
    step.done()
    step = Step(ctx, model.name, f"verify in ONNX Runtime {serving_runtime.onnxruntime_wheel} (Triton "
                                 f"{serving_runtime.triton_version}'s) against eager PyTorch")
    check = verification.verify_and_pick(settings, made, serving_runtime, found, target, scratch, ctx.log, reference,
                                         [exporter_fallback] if exporter_fallback else [])
    step.done(f" ({check['graph']}, {check['cases']} cases, max abs error {check['max_abs_error']:.2e})")
    inputs, outputs = onnx_export.graph_io(target, model.max_batch_size, model.name)
    parity = {"max_abs_error": check["max_abs_error"], "max_rel_error": check["max_rel_error"],
              "atol": model.tolerance.atol, "rtol": model.tolerance.rtol, **verification.int8_parity(check)}
    return inputs, outputs, check, parity
