"""A user's model file, run where it will be served and compared with the same file elsewhere.

There is no PyTorch model to compare an ONNX or TorchScript file with, so the reference is the
file itself in another runtime release: the same inputs through the image's runtime and through
this machine's, within the model's tolerance (Polygraphy's way of comparing runtimes,
``polygraphy run --onnxrt`` against another backend). The inputs are serving/cases.py's: batch 1,
the preferred batch sizes and ``max_batch_size``, full and short lengths where a dimension is
variable, and for an ``attention_mask`` input the masked-token and padded-vs-unpadded invariance
checks the recipes get. Every output is also checked against its declared type and dims, which
Triton enforces at run time.

* ONNX: the image's ONNX Runtime (side environment) against this machine's (the build's venv),
  both run by serving/worker.py in a child process. A file the image's release cannot load or
  run is refused with that release's reason.
* TorchScript: this machine's torch, on every case, for the invariances and the declared outputs;
  with ``tritonsm build --check-serving-torch`` also the torch release nearest the image's
  libtorch, compared with this machine's (the registry's Linux torch is a multi-GB CUDA build).
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import pathlib
from typing import Any, Callable, Optional, Sequence

from deployment_spec.manifest import TensorSpec
from deployment_spec.model import ModelSpec, Precision
from deployment_spec.serving_runtimes import ServingRuntime
from model_build.errors import BuildError
from model_build.recipes.contract import ExportableModel
from model_build.serving import cases, side_env, verify

DEVICE = "cpu"
LABEL = "file as given"


def this_machines(package: str) -> side_env.SideEnv:
    """The build's own release of ``package``, run by the same worker as the side environments."""
    found = importlib.util.find_spec(package)
    site = pathlib.Path(found.origin).resolve().parent.parent
    return side_env.SideEnv(package, importlib.metadata.version(package).split("+")[0], site)


def onnx_file(model: ModelSpec, made: ExportableModel, outputs: Sequence[TensorSpec], runtime: ServingRuntime,
              target: pathlib.Path, user_file: pathlib.Path, scratch: pathlib.Path,
              log: Callable[[str], None]) -> dict[str, Any]:
    from model_build.serving import onnx_check

    plan = cases.plan(made, model)
    image = side_env.ensure("onnxruntime", runtime.onnxruntime_wheel, log)
    here = this_machines("onnxruntime")
    level = model.onnxruntime.graph_optimization_level.value if model.onnxruntime else "all"
    image_label = f"ONNX Runtime {image.version} (Triton {runtime.triton_version}'s)"
    here_label = f"ONNX Runtime {here.version} (this machine's)"
    got = _run(model, image, image_label, "onnx", made, plan, target, user_file, scratch, level,
               "export it with an opset and operators that release supports, or pick a newer triton_version")
    want = _run(model, here, here_label, "onnx", made, plan, target, user_file, scratch, level,
                "the file itself is broken, or the declared tensors are not what it takes")
    _check_declared(model, outputs, made, want, plan, user_file, here_label)
    verdict = verify.judge(LABEL, got, want, plan, made.output_names, model.tolerance, against=here_label)
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
    result = verify.record(runtime, "onnxruntime", image.version, DEVICE, verdict, [verdict], len(plan.cases))
    result["reference"] = {"runtime": "onnxruntime", "version": here.version, "device": DEVICE,
                           "what": "the same file in this machine's runtime"}
    if model.precision is Precision.INT8:
        result.update(onnx_check.int8_gate(model, made, image, plan, level, target, scratch, log))
    return result


def torchscript_file(model: ModelSpec, made: ExportableModel, outputs: Sequence[TensorSpec],
                     runtime: ServingRuntime, target: pathlib.Path, user_file: pathlib.Path, scratch: pathlib.Path,
                     log: Callable[[str], None], serving_torch: bool) -> dict[str, Any]:
    plan = cases.plan(made, model)
    here = this_machines("torch")
    here_label = f"torch {here.version} (this machine's, CPU)"
    got = _run(model, here, here_label, "torchscript", made, plan, target, user_file, scratch, "all",
               "fix the file, or the declared tensors if they are not what forward() takes")
    _check_declared(model, outputs, made, got, plan, user_file, here_label)
    # Against itself: the mask invariances are what is left to check in a single runtime.
    verdict = verify.judge(LABEL, got, got, plan, made.output_names, model.tolerance)
    if not verdict.ok:
        raise BuildError(f"models.{model.name}.source.torchscript: {user_file} in {here_label}: it "
                         f"{verdict.problems[0]}; fix the model's masking")
    if not serving_torch:
        return {"ran": False, "triton_version": runtime.triton_version, "runtime": "torch",
                "version": runtime.torch_release, "cases": len(plan.cases), "graph": LABEL,
                "checked_in": {"runtime": "torch", "version": here.version, "device": DEVICE},
                "invariance_error": verdict.invariance_error,
                "why": f"opt-in (tritonsm build --check-serving-torch): the registry's torch {runtime.torch_release} "
                       "for Linux is a multi-GB CUDA build; the file ran in this machine's torch"}
    image = side_env.ensure("torch", runtime.torch_release, log)
    image_label = f"torch {image.version} (nearest Triton {runtime.triton_version}'s libtorch {runtime.pytorch})"
    theirs = _run(model, image, image_label, "torchscript", made, plan, target, user_file, scratch, "all",
                  "pick the triton_version whose libtorch runs it")
    verdict = verify.judge(LABEL, theirs, got, plan, made.output_names, model.tolerance, against=here_label)
    if not verdict.ok:
        raise BuildError(f"models.{model.name}.source.torchscript: {user_file} in {image_label}: it "
                         f"{verdict.problems[0]}; pick another triton_version or raise models.{model.name}.tolerance")
    result = verify.record(runtime, "torch", image.version, DEVICE, verdict, [verdict], len(plan.cases))
    result["reference"] = {"runtime": "torch", "version": here.version, "device": DEVICE,
                           "what": "the same file in this machine's runtime"}
    return result


def parity(model: ModelSpec, serving: dict[str, Any]) -> Optional[dict[str, float]]:
    """The manifest's parity record: the file in the serving runtime against this machine's, when both ran."""
    from model_build.serving import onnx_check

    if "reference" not in serving:
        return None
    return {"max_abs_error": serving["max_abs_error"], "max_rel_error": serving["max_rel_error"],
            "atol": model.tolerance.atol, "rtol": model.tolerance.rtol, **onnx_check.int8_parity(serving)}


def _run(model: ModelSpec, env: side_env.SideEnv, runtime: str, kind: str, made: ExportableModel, plan: cases.Plan,
         target: pathlib.Path, user_file: pathlib.Path, scratch: pathlib.Path, level: str, fix: str) -> dict:
    """Outputs per case in one runtime; a BuildError naming the file, the runtime, the case and the error."""
    candidate = verify.Candidate(LABEL, target)
    got = verify.run_candidates(env, kind, [candidate], plan, made.input_names, made.output_names, scratch,
                                graph_level=level)[LABEL]
    if isinstance(got, str):
        error = got.replace(str(target), str(user_file))
        raise BuildError(f"models.{model.name}.source.{'onnx' if kind == 'onnx' else 'torchscript'}: {user_file} does "
                         f"not run in {runtime}: {error}; {fix}")
    return got


def _check_declared(model: ModelSpec, outputs: Sequence[TensorSpec], made: ExportableModel, got: dict,
                    plan: cases.Plan, user_file: pathlib.Path, runtime: str) -> None:
    """Each output has the declared data type and dims on every case: Triton refuses other ones at run time."""
    from model_build.torchscript import TORCH_TO_TRITON

    declared = {t.name: (index, t) for index, t in enumerate(model.outputs)}
    kinds = {t.name: (t.data_type, t.dims) for t in outputs}
    for case in plan.cases:
        rows = int(next(iter(case.inputs.values())).shape[0])
        for name, array in zip(made.output_names, got[case.name]):
            data_type, dims = kinds[name]
            want = ([rows] if model.max_batch_size > 0 else []) + list(dims)
            have_type = TORCH_TO_TRITON.get(str(array.dtype), str(array.dtype))
            fits = len(array.shape) == len(want) and all(w == -1 or w == s for w, s in zip(want, array.shape))
            if have_type == data_type and fits:
                continue
            field = (f"models.{model.name}.outputs[{declared[name][0]}]" if name in declared
                     else f"{user_file.name}'s output")
            shape = list(array.shape[1:] if model.max_batch_size > 0 else array.shape)
            raise BuildError(f"{field} {name} is declared {data_type} with dims {list(dims)}, but {user_file} returns "
                             f"{have_type} of shape {list(array.shape)} on case {case.name} in {runtime}; declare "
                             f"data_type {have_type} and dims {shape} (-1 where the size varies)")

