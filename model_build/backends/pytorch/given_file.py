"""A user's TorchScript file (``source: {torchscript: ...}``): its tensors and its run on the spec's sizes.

A TorchScript file holds no tensor names, data types or shapes: the spec declares them, unless the
file carries the ``triton_io.json`` extra file the build's own traces write (torchscript.py). The
file runs in this machine's torch on the serving cases (model_build/verification/file_check.py),
and with ``tritonsm build --check-serving-torch`` in the torch release nearest the image's libtorch.
"""
from __future__ import annotations

import pathlib
from typing import Any, Callable, Sequence

from deployment_spec.builds.manifest import TensorSpec
from deployment_spec.sections.model import ModelSpec
from deployment_spec.facts.serving_runtimes import ServingRuntime
from model_build import given_files
from model_build.backends.pytorch import torchscript
from model_build.errors import BuildError
from model_build.recipes.contract import ExportableModel
from model_build.verification import cases, file_check, side_env, verify


def tensors(model: ModelSpec, src: pathlib.Path) -> tuple[tuple[TensorSpec, ...], tuple[TensorSpec, ...]]:
    """The spec's tensors, else the file's triton_io.json; a message naming the file and the fields otherwise."""
    if model.inputs:
        return (tuple(given_files.declared_tensor(t) for t in model.inputs),
                tuple(given_files.declared_tensor(t) for t in model.outputs))
    described = torchscript.read_io(src)
    if described is not None:
        return described
    arguments, results = torchscript.forward_signature(src)
    inputs = ", ".join(f"{{name: {a}__{i}, data_type: ..., dims: [...]}}" for i, a in enumerate(arguments))
    outputs = ", ".join(f"{{name: OUTPUT__{i}, data_type: ..., dims: [...]}}" for i in range(results or 1))
    returns = f"{results} tensor{'s' if results != 1 else ''}" if results else "its results"
    raise BuildError(
        f"models.{model.name}.source.torchscript: {src} does not say what its tensors are (a TorchScript file holds "
        f"no tensor names, data types or shapes); declare them in the spec, one per argument and result of its "
        f"forward({', '.join(arguments)}) -> {returns}: models.{model.name}.inputs: [{inputs}] and "
        f"models.{model.name}.outputs: [{outputs}{', ...' if not results else ''}] (data_type e.g. TYPE_FP32; "
        "dims without the batch axis, -1 for a variable size; names <name>__<index>, the pytorch backend's "
        "convention)")


def check(model: ModelSpec, made: ExportableModel, outputs: Sequence[TensorSpec], runtime: ServingRuntime,
          target: pathlib.Path, user_file: pathlib.Path, scratch: pathlib.Path, log: Callable[[str], None],
          serving_torch: bool) -> dict[str, Any]:
    """The verification record of ``target`` (a copy of ``user_file``), or a BuildError naming the user's file."""
    plan = cases.plan(made, model)
    here = file_check.this_machines("torch")
    here_label = f"torch {here.version} (this machine's, CPU)"
    got = file_check.run_in(model, here, here_label, "torchscript", made, plan, target, user_file, scratch, "all",
                            "fix the file, or the declared tensors if they are not what forward() takes")
    file_check.check_declared(model, outputs, made, got, plan, user_file, here_label)
    # Against itself: the mask invariances are what is left to check in a single runtime.
    verdict = verify.judge(file_check.LABEL, got, got, plan, made.output_names, model.tolerance)
    if not verdict.ok:
        raise BuildError(f"models.{model.name}.source.torchscript: {user_file} in {here_label}: it "
                         f"{verdict.problems[0]}; fix the model's masking")
    if not serving_torch:
        return {"ran": False, "triton_version": runtime.triton_version, "runtime": "torch",
                "version": runtime.torch_release, "cases": len(plan.cases), "graph": file_check.LABEL,
                "checked_in": {"runtime": "torch", "version": here.version, "device": file_check.DEVICE},
                "invariance_error": verdict.invariance_error,
                "why": f"opt-in (tritonsm build --check-serving-torch): the registry's torch {runtime.torch_release} "
                       "for Linux is a multi-GB CUDA build; the file ran in this machine's torch"}
    image = side_env.ensure("torch", runtime.torch_release, log)
    image_label = f"torch {image.version} (nearest Triton {runtime.triton_version}'s libtorch {runtime.pytorch})"
    theirs = file_check.run_in(model, image, image_label, "torchscript", made, plan, target, user_file, scratch,
                               "all", "pick the triton_version whose libtorch runs it")
    verdict = verify.judge(file_check.LABEL, theirs, got, plan, made.output_names, model.tolerance,
                           against=here_label)
    if not verdict.ok:
        raise BuildError(f"models.{model.name}.source.torchscript: {user_file} in {image_label}: it "
                         f"{verdict.problems[0]}; pick another triton_version or raise models.{model.name}.tolerance")
    result = verify.record(runtime, "torch", image.version, file_check.DEVICE, verdict, [verdict],
                           len(plan.cases))
    result["reference"] = {"runtime": "torch", "version": here.version, "device": file_check.DEVICE,
                           "what": "the same file in this machine's runtime"}
    return result
