"""``backend: tensorrt`` models (``tensorrt_plan``): an ONNX graph converted by trtexec on a GPU build host.

The graph comes from a recipe (model_build/onnx_graph/, checked here in this machine's ONNX
Runtime against eager PyTorch: onnx_parity.py) or from the user's ONNX file. trtexec runs in the
TensorRT image of the spec's Triton release (runner.py, trtexec.py) on a GPU of the endpoints'
architecture (targets.py, gpu.py); the plan itself is checked on the GPU host (tests/gpu).
"""
from __future__ import annotations

import pathlib
from typing import Mapping, cast

from deployment_spec.builds.manifest import ModelEntry, TensorSpec
from deployment_spec.sections.model import ModelSpec
from model_build import given_files, reproducible
from model_build.backends.result import BackendResult, BuildGpu
from model_build.backends.tensorrt import onnx_parity, runner, targets
from model_build.backends.tensorrt.gpu import Toolchain
from model_build.build_context import BuildContext
from model_build.errors import ToolUnavailable
from model_build.onnx_graph import export as onnx_export
from model_build.onnx_graph import weights as onnx_weights
from model_build.onnx_graph.from_recipe import export_recipe, opset
from model_build.progress import Step
from model_build.verification.record import not_run

PLAN_FILE = "model.plan"
NOT_RUN = "a TensorRT plan runs only on the GPU it was built for; tests/gpu checks it on a GPU host"


def build(ctx: BuildContext, model: ModelSpec, scratch: pathlib.Path, built: Mapping[str, ModelEntry]) -> BackendResult:
    # The context holds the probe untyped, so the shared homes import no backend; it is gpu.detect.
    tools = cast(Toolchain, ctx.toolchain())
    gpu = tools.gpu
    if not tools.usable or gpu is None:  # before the export: no point spending minutes on an ONNX we cannot convert
        raise ToolUnavailable(f"model {model.name}: a TensorRT plan needs an NVIDIA GPU and a Docker engine "
                              f"(or a local trtexec): {tools.reason}")
    targets.check_target_gpus(ctx.spec, model, gpu.compute_capability)
    graph = scratch / "model.onnx"  # the file trtexec converts (runner.build_plan reads it there)
    if model.source.kind() == "onnx":
        _, inputs, outputs = given_files.onnx_file(ctx, model, graph)
        parity = None
    else:
        inputs, outputs, parity = _from_recipe(ctx, model, scratch, graph)
    versions = {"onnx_opset": opset(graph)}
    step = Step(ctx, model.name, "build TensorRT plan (trtexec)")
    versions.update(runner.build_plan(model, inputs, scratch, ctx.work / "trt-timing-cache",
                                      ctx.spec.triton_version, tools, ctx.log))
    step.done()
    return BackendResult(inputs, outputs, {PLAN_FILE: scratch / PLAN_FILE}, not_run(ctx.spec.triton_version, NOT_RUN),
                         parity=parity, versions=versions,
                         gpu=BuildGpu(gpu.name, gpu.compute_capability))


def _from_recipe(ctx: BuildContext, model: ModelSpec, scratch: pathlib.Path, graph: pathlib.Path) -> tuple[
        tuple[TensorSpec, ...], tuple[TensorSpec, ...], dict[str, float]]:
    # The plan's optimization profile fixes every axis but the batch (trtexec.py): the export says so. The
    # exporter's own optimizations stay on: optimize_at_build belongs to the onnxruntime section, which the
    # spec refuses for backend tensorrt (deployment_spec/sections/model.py).
    made, exported, _ = export_recipe(ctx, model, scratch, batch_axis_only=True, optimize=True)  # fallback logged
    # The ONNX graph only feeds trtexec here; the plan itself is checked on the GPU host.
    reproducible.strip_onnx(exported)
    onnx_weights.inline(exported, graph)
    inputs, outputs = onnx_export.graph_io(graph, model.max_batch_size, model.name)
    step = Step(ctx, model.name, "check ONNX Runtime against PyTorch (the graph trtexec converts)")
    result = onnx_parity.check_onnx(model.name, made, graph, model.tolerance)
    step.done(f" (max abs error {result['max_abs_error']:.2e}, max rel error {result['max_rel_error']:.2e})")
    return inputs, outputs, result
