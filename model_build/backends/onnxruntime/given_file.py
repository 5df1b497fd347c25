"""A user's ONNX file (``source: {onnx: ...}``) run where it will be served and in this machine's runtime.

There is no PyTorch model to compare it with, so the reference is the same file in this machine's
ONNX Runtime (the build's venv), on the serving cases (model_build/verification/file_check.py). A
file the image's release cannot load or run is refused with that release's reason.
"""
from __future__ import annotations

import pathlib
from typing import Any, Callable, Sequence

from deployment_spec.builds.manifest import TensorSpec
from deployment_spec.sections.model import ModelSpec
from deployment_spec.facts.serving_runtimes import ServingRuntime
from model_build.backends.onnxruntime import verification
from model_build.backends.onnxruntime.settings import OnnxRuntimeBuild
from model_build.errors import BuildError
from model_build.recipes.contract import ExportableModel
from model_build.verification import cases, file_check, side_env, verify


def check(model: ModelSpec, settings: OnnxRuntimeBuild, made: ExportableModel, outputs: Sequence[TensorSpec],
          runtime: ServingRuntime, target: pathlib.Path, user_file: pathlib.Path, scratch: pathlib.Path,
          log: Callable[[str], None]) -> dict[str, Any]:
    """The verification record of ``target`` (a copy of ``user_file``), or a BuildError naming the user's file."""
    plan = cases.plan(made, model)
    image = side_env.ensure("onnxruntime", runtime.onnxruntime_wheel, log)
    here = file_check.this_machines("onnxruntime")
    image_label = f"ONNX Runtime {image.version} (Triton {runtime.triton_version}'s)"
    here_label = f"ONNX Runtime {here.version} (this machine's)"
    got = file_check.run_in(model, image, image_label, "onnx", made, plan, target, user_file, scratch,
                            settings.graph_level,
                            "export it with an opset and operators that release supports, or pick a newer "
                            "triton_version")
    want = file_check.run_in(model, here, here_label, "onnx", made, plan, target, user_file, scratch,
                             settings.graph_level,
                             "the file itself is broken, or the declared tensors are not what it takes")
    file_check.check_declared(model, outputs, made, want, plan, user_file, here_label)
    verdict = verify.judge(file_check.LABEL, got, want, plan, made.output_names, settings.tolerance,
                           against=here_label)
    if not verdict.ok:
        problem = verdict.problems[0]
        fix = (f"raise models.{model.name}.tolerance (atol {model.tolerance.atol:g}, rtol {model.tolerance.rtol:g}) "
               "if that error is acceptable, or pick a triton_version whose runtime agrees"
               if problem.reason.startswith("differs") else
               "pick a triton_version whose runtime runs it right, or export the file without the operators "
               "that release gets wrong (e.g. without ONNX Runtime's transformer fusions)")
        raise BuildError(f"models.{model.name}.source.onnx: {user_file} in {image_label}: it {problem}; {fix}")
    log(f"  {model.name}: {user_file.name} answers in {image_label} as in {here_label} on {len(plan.cases)} cases "
        f"(max abs error {verdict.max_abs_error:.2e})")
    result = verify.record(runtime, "onnxruntime", image.version, file_check.DEVICE, verdict, [verdict],
                           len(plan.cases))
    result["reference"] = {"runtime": "onnxruntime", "version": here.version, "device": file_check.DEVICE,
                           "what": "the same file in this machine's runtime"}
    if settings.int8 is not None:
        result.update(verification.int8_gate(settings, settings.int8, made, image, plan, target, scratch, log))
    return result
