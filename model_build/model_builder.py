"""Builds one spec model into a cached Triton model directory, verified before it is kept.

Cache layout: ``<work>/models/<name>-<build hash[:16]>/{<name>/, entry.json}``. The directory is
assembled in a temporary folder and renamed into place only after every check passed, so a
failed build leaves nothing that a later build could mistake for a result.
"""
from __future__ import annotations

import dataclasses
import json
import pathlib
import shutil
import tempfile
from typing import Callable, Mapping, Optional

from deployment_spec import Spec
from deployment_spec.manifest import BuilderFacts, ModelEntry, _model as entry_from_json
from deployment_spec.model import Backend, ModelSpec, Precision
from model_build import checks, ensemble, layout, model_config, python_backend
from model_build.errors import BuildError, ToolUnavailable
from model_build.hashing import tool_versions
from model_build.progress import Step
from model_build.tensorrt import targets

ENTRY = "entry.json"


@dataclasses.dataclass
class Context:
    spec: Spec
    work: pathlib.Path
    log: Callable[[str], None]
    toolchain: Callable[[], object]  # lazily probes GPU/Docker (model_build.tensorrt.gpu.detect)


def cache_dir(work: pathlib.Path, name: str, build_hash: str) -> pathlib.Path:
    return work / "models" / f"{name}-{build_hash[:16]}"


def load_cached(work: pathlib.Path, name: str, build_hash: str) -> Optional[tuple[pathlib.Path, ModelEntry]]:
    folder = cache_dir(work, name, build_hash)
    try:
        entry = entry_from_json(json.loads((folder / ENTRY).read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if entry.build_hash != build_hash or not (folder / name / layout.CONFIG).is_file():
        return None
    return folder / name, entry


def build_model(ctx: Context, model: ModelSpec, build_hash: str,
                steps: Mapping[str, ModelEntry]) -> tuple[pathlib.Path, ModelEntry]:
    final = cache_dir(ctx.work, model.name, build_hash)
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = pathlib.Path(tempfile.mkdtemp(prefix=f".{model.name}.", dir=final.parent))
    try:
        scratch = staging / "scratch"
        scratch.mkdir()
        model_dir = staging / model.name
        entry = _build(ctx, model, build_hash, steps, model_dir, scratch)
        checks.check_model_dir(model_dir)
        shutil.rmtree(scratch)
        (staging / ENTRY).write_text(json.dumps(dataclasses.asdict(entry), indent=2, sort_keys=True) + "\n")
        if final.exists():  # --force: replace the earlier result
            shutil.rmtree(final)
        staging.rename(final)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return final / model.name, entry


def _build(ctx: Context, model: ModelSpec, build_hash: str, steps: Mapping[str, ModelEntry],
           model_dir: pathlib.Path, scratch: pathlib.Path) -> ModelEntry:
    versions = {"triton": ctx.spec.triton_version, **tool_versions()}
    params: dict[str, str] = {}
    model_files: dict = {}
    parity = None
    gpu_name = gpu_cc = None
    step_configs: list = []
    kind = model.source.kind() if model.source else "ensemble"
    if model.backend is Backend.TENSORRT:
        tools = ctx.toolchain()
        if not tools.usable:  # before the export: no point spending minutes on an ONNX we cannot convert
            raise ToolUnavailable(f"model {model.name}: a TensorRT plan needs an NVIDIA GPU and a Docker engine "
                                  f"(or a local trtexec): {tools.reason}")
        targets.check_target_gpus(ctx.spec, model, tools.gpu.compute_capability)
    if model.backend is Backend.ENSEMBLE:
        inputs, outputs, step_configs = ensemble.wire(model, steps)
        files: dict = {}
    elif model.backend is Backend.PYTHON:
        inputs, outputs, files, params, model_files = python_backend.model_files(ctx, model)
    elif kind in ("recipe", "onnx") and model.backend in (Backend.ONNXRUNTIME, Backend.TENSORRT):
        inputs, outputs, parity = _onnx(ctx, model, scratch)
        versions["onnx_opset"] = _opset(scratch / "model.onnx")
        if model.backend is Backend.TENSORRT:
            from model_build.tensorrt import runner
            tools = ctx.toolchain()
            step = Step(ctx, model.name, "build TensorRT plan (trtexec)")
            versions.update(runner.build_plan(model, inputs, scratch, ctx.work / "trt-timing-cache",
                                              ctx.spec.triton_version, tools, ctx.log))
            step.done()
            gpu_name, gpu_cc = tools.gpu.name, tools.gpu.compute_capability
            files = {"model.plan": scratch / "model.plan"}
        else:
            files = {"model.onnx": scratch / "model.onnx"}
    elif model.backend is Backend.PYTORCH:
        inputs, outputs, parity = _torchscript(ctx, model, scratch)
        files = {"model.pt": scratch / "model.pt"}
    else:
        raise BuildError(f"models.{model.name}: backend {model.backend.value} with a {kind} source is not buildable")
    config = model_config.build_config(model, name=model.name, inputs=inputs, outputs=outputs,
                                       triton_version=ctx.spec.triton_version, parameters=params,
                                       ensemble_steps=step_configs)
    layout.write_model_dir(model_dir, model_config.render(config), files, model_files)
    if model.backend is Backend.ONNXRUNTIME:
        from model_build.onnx_export import graph_io
        graph_inputs, _ = graph_io(layout.version_dir(model_dir) / "model.onnx", model.max_batch_size, model.name)
        checks.check_onnx_matches_config(model.name, inputs, graph_inputs)
    return ModelEntry(name=model.name, spec_model=model.name, backend=model.backend.value,
                      max_batch_size=model.max_batch_size, inputs=tuple(inputs), outputs=tuple(outputs),
                      build_hash=build_hash, parity=parity,
                      builder=BuilderFacts(versions, gpu_name, gpu_cc))


def _onnx(ctx: Context, model: ModelSpec, scratch: pathlib.Path):
    from model_build import onnx_export, parity as parity_check
    from model_build.recipes import load_exportable

    target = scratch / "model.onnx"
    if model.source.kind() == "onnx":
        src = (ctx.spec.root / model.source.onnx).resolve()
        if not src.is_file():
            raise BuildError(f"models.{model.name}.source.onnx: {src} does not exist; give the path of an .onnx "
                             "file, relative to the spec's folder")
        onnx_export.check_file(src, f"models.{model.name}.source.onnx")
        shutil.copyfile(src, target)
        inputs, outputs = onnx_export.graph_io(target, model.max_batch_size, model.name)
        return inputs, outputs, None
    step = Step(ctx, model.name, "load recipe")
    made = load_exportable(model, ctx.spec.root, batch_axis_only=model.backend is Backend.TENSORRT)
    step.done()
    if made.note:
        ctx.log(f"  {model.name}: {made.note}")
    optimize = model.onnxruntime.optimize_at_build if model.onnxruntime else True
    step = Step(ctx, model.name, f"export ONNX (opset {onnx_export.OPSET})")
    onnx_export.export(model.name, made, target, optimize=optimize)
    step.done()
    ort_backend = model.backend is Backend.ONNXRUNTIME
    # The TensorRT execution provider lacks the contrib ops the fusions emit, so it gets the plain graph.
    if optimize and ort_backend and not (model.onnxruntime and model.onnxruntime.tensorrt_accelerator):
        from model_build import ort_optimize
        step = Step(ctx, model.name, "ONNX Runtime graph optimizations and transformer fusions")
        report = ort_optimize.optimize_for_ort(target, target, **ort_optimize.transformer_hints(made.module))
        step.done(f" ({report.fuser}; fused {dict(report.fused_ops) or 'nothing'})")
    inputs, outputs = onnx_export.graph_io(target, model.max_batch_size, model.name)
    step = Step(ctx, model.name, "check ONNX Runtime against PyTorch")
    result = parity_check.check_onnx(model.name, made, target, model.tolerance)
    step.done(f" (max abs error {result['max_abs_error']:.2e}, max rel error {result['max_rel_error']:.2e})")
    if model.precision is Precision.INT8 and ort_backend:
        result = {**result, **_quantize_int8(ctx, model, made, target, scratch)}
    return inputs, outputs, result


def _quantize_int8(ctx: Context, model: ModelSpec, made, target: pathlib.Path, scratch: pathlib.Path) -> dict:
    """int8 dynamic quantization of the verified fp32 graph; its agreement with fp32 is recorded, not gated
    (int8 cannot meet an fp32 tolerance; the numbers tell whether it is acceptable)."""
    from model_build import ort_optimize, parity as parity_check

    step = Step(ctx, model.name, "int8 dynamic quantization")
    fp32 = scratch / "model.fp32.onnx"
    shutil.copyfile(target, fp32)
    quantized = ort_optimize.quantize_int8_dynamic(fp32, target)
    feeds = {k: v.numpy() for k, v in parity_check.parity_inputs(made).items()}
    agree = ort_optimize.agreement(fp32, target, feeds)
    fp32.unlink()
    step.done(f" ({quantized.bytes_before / 2**20:.0f} -> {quantized.bytes_after / 2**20:.0f} MB; vs fp32: top-1 "
              f"agreement {agree['top1_agreement']:.0%}, max abs error {agree['max_abs_error']:.2e})")
    return {"int8_top1_agreement": agree["top1_agreement"], "int8_max_abs_error": agree["max_abs_error"],
            "int8_min_cosine_similarity": agree["min_cosine_similarity"]}


def _torchscript(ctx: Context, model: ModelSpec, scratch: pathlib.Path):
    from model_build import torchscript

    target = scratch / "model.pt"
    if model.source.kind() == "torchscript":
        src = (ctx.spec.root / model.source.torchscript).resolve()
        if not src.is_file():
            raise BuildError(f"models.{model.name}.source.torchscript: {src} does not exist; give the path of a "
                             "TorchScript file, relative to the spec's folder")
        shutil.copyfile(src, target)
        inputs, outputs = torchscript.read_io(model.name, target)
        return inputs, outputs, None
    step = Step(ctx, model.name, "trace TorchScript and check it against eager PyTorch")
    result = _run_trace_worker(ctx, model, scratch)
    step.done(f" (max abs error {result['max_abs_error']:.2e})")
    inputs, outputs = torchscript.read_io(model.name, target)
    return inputs, outputs, result


def _run_trace_worker(ctx: Context, model: ModelSpec, scratch: pathlib.Path) -> dict:
    import os
    import subprocess
    import sys

    from model_build import trace_worker

    cmd = [sys.executable, "-m", "model_build.trace_worker", str(ctx.spec.path), model.name, str(scratch)]
    ctx.log("  $ " + " ".join(cmd))
    # The child sees the same import path (user recipe modules, this checkout).
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    for line in proc.stdout.splitlines():
        ctx.log(line)
    if proc.returncode == trace_worker.FAILED:
        message = proc.stderr.rsplit(trace_worker.MARKER, 1)[-1].strip()
        raise BuildError(message)
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-10:])
        raise BuildError(f"model {model.name}: the TorchScript trace process failed (exit {proc.returncode}):\n{tail}")
    return json.loads((scratch / "parity.json").read_text())


def _opset(path: pathlib.Path) -> str:
    import onnx
    model = onnx.load(str(path), load_external_data=False)
    return str(next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), "?"))
