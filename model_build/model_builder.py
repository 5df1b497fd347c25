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
    serving_torch: bool = False      # opt-in: run TorchScript in the torch release nearest the image's libtorch
    python_env_for: str = "image"    # Python-backend environments for the image, or "local" (tritonsm serve only)


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
    parity = serving = python_env = None
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
        inputs, outputs, files, params, model_files, python_env = python_backend.model_files(ctx, model)
    elif model.backend is Backend.DALI:
        from model_build.dali import build as dali_build
        inputs, outputs, files, params, serving, versions["dali"] = dali_build.model_files(
            ctx, model, serving_devices(ctx.spec, model), scratch)
    elif kind in ("recipe", "onnx") and model.backend in (Backend.ONNXRUNTIME, Backend.TENSORRT):
        inputs, outputs, parity, serving = _onnx(ctx, model, scratch)
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
        inputs, outputs, parity, serving = _torchscript(ctx, model, scratch)
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
                      builder=BuilderFacts(versions, gpu_name, gpu_cc),
                      serving_check=serving or _not_checked(ctx, model), python_env=python_env)


def _not_checked(ctx: Context, model: ModelSpec) -> dict:
    """Why a model has no serving-runtime check, in the manifest next to the ones that ran."""
    why = {
        Backend.TENSORRT: "a TensorRT plan runs only on the GPU it was built for; tests/gpu checks it on a GPU host",
        Backend.PYTHON: "Python-backend code runs in the image's Python; the local endpoint (tritonsm serve) runs it",
        Backend.ENSEMBLE: "an ensemble has no file of its own; its steps are checked",
    }.get(model.backend, "not checked")
    return {"ran": False, "triton_version": ctx.spec.triton_version, "why": why}


def _onnx(ctx: Context, model: ModelSpec, scratch: pathlib.Path):
    """model.onnx in ``scratch``; for backend onnxruntime, proven in the target image's ONNX Runtime."""
    from model_build import memory_budget, onnx_export, onnx_weights, ort_optimize, parity as parity_check, reproducible
    from model_build.recipes import load_exportable

    target = scratch / "model.onnx"
    if model.source.kind() == "onnx":
        from model_build import given_files
        return given_files.onnx_source(ctx, model, target, scratch)
    step = Step(ctx, model.name, "load recipe")
    made = load_exportable(model, ctx.spec.root, batch_axis_only=model.backend is Backend.TENSORRT)
    step.done()
    if made.note:
        ctx.log(f"  {model.name}: {made.note}")
    exported = scratch / "export" / "exported.onnx"  # its weights in a file beside it (onnx_weights)
    exported.parent.mkdir()
    optimize = model.onnxruntime.optimize_at_build if model.onnxruntime else True
    step = Step(ctx, model.name, f"export ONNX (opset {onnx_export.OPSET})")
    onnx_export.export_graph(model.name, made, exported, optimize=optimize)
    step.done()
    if model.backend is Backend.TENSORRT:
        # The ONNX graph only feeds trtexec here; the plan itself is checked on the GPU host.
        reproducible.strip_onnx(exported)
        onnx_weights.inline(exported, target)
        inputs, outputs = onnx_export.graph_io(target, model.max_batch_size, model.name)
        step = Step(ctx, model.name, "check ONNX Runtime against PyTorch (the graph trtexec converts)")
        result = parity_check.check_onnx(model.name, made, target, model.tolerance)
        step.done(f" (max abs error {result['max_abs_error']:.2e}, max rel error {result['max_rel_error']:.2e})")
        return inputs, outputs, result, None
    from model_build.serving import onnx_check
    from deployment_spec.serving_runtimes import runtime

    serving_runtime = runtime(ctx.spec.triton_version)
    onnx_export.graph_io(exported, model.max_batch_size, model.name)  # a lost batch axis fails here, by name
    step = Step(ctx, model.name, "eager PyTorch on the serving cases")
    reference = onnx_check.reference(made, model)
    step.done(f" ({len(reference[0].cases)} cases)")
    hints = ort_optimize.transformer_hints(made.module)
    # From here on child processes make and run the graphs: the eager weights are not needed any more.
    made.module = None
    memory_budget.give_back()
    step = Step(ctx, model.name, "ONNX Runtime graph optimizations and transformer fusions")
    found = onnx_check.candidates(model, hints, exported, scratch, ctx.log)
    step.done()
    step = Step(ctx, model.name, f"verify in ONNX Runtime {serving_runtime.onnxruntime_wheel} (Triton "
                                 f"{serving_runtime.triton_version}'s) against eager PyTorch")
    serving = onnx_check.verify_and_pick(model, made, serving_runtime, found, target, scratch, ctx.log, reference)
    step.done(f" ({serving['graph']}, {serving['cases']} cases, max abs error {serving['max_abs_error']:.2e})")
    inputs, outputs = onnx_export.graph_io(target, model.max_batch_size, model.name)
    parity = {"max_abs_error": serving["max_abs_error"], "max_rel_error": serving["max_rel_error"],
              "atol": model.tolerance.atol, "rtol": model.tolerance.rtol, **onnx_check.int8_parity(serving)}
    return inputs, outputs, parity, serving


def _torchscript(ctx: Context, model: ModelSpec, scratch: pathlib.Path):
    from model_build import reproducible, torchscript

    target = scratch / "model.pt"
    if model.source.kind() == "torchscript":
        from model_build import given_files
        src = given_files.source_path(ctx.spec.root, model)
        shutil.copyfile(src, target)
        torchscript.check_devices(model.name, target, serving_devices(ctx.spec, model), shown=src)
        reproducible.strip_torchscript(target)
        return given_files.torchscript_source(ctx, model, src, target, scratch)
    step = Step(ctx, model.name, "trace TorchScript and check it against eager PyTorch")
    result = _run_trace_worker(ctx, model, scratch)
    step.done(f" (max abs error {result['parity']['max_abs_error']:.2e})")
    inputs, outputs = torchscript.read_io(target)
    return inputs, outputs, result["parity"], result["serving_check"]


def serving_devices(spec: Spec, model: ModelSpec) -> set[str]:
    """The devices the model's instances run on ("cuda", "cpu") over every endpoint and environment serving it."""
    from deployment_spec import instances
    from deployment_spec.model import InstanceKind

    endpoints = list(spec.endpoints.values()) + [ep for env in spec.environments.values()
                                                 for ep in env.endpoints.values()]
    kinds = {group.kind for group in model.instance_groups} or {InstanceKind.AUTO}
    out: set[str] = set()
    for endpoint in endpoints:
        if model.name not in {m.name for m in spec.served_models(endpoint)}:
            continue
        itype = instances.lookup(endpoint.instance_type)
        gpu = bool(itype and itype.is_gpu)
        for kind in kinds:
            out.add("cpu" if kind is InstanceKind.CPU or (kind is InstanceKind.AUTO and not gpu) else "cuda")
    return out


def _run_trace_worker(ctx: Context, model: ModelSpec, scratch: pathlib.Path) -> dict:
    import os
    import subprocess
    import sys
    import tempfile

    from model_build import trace_worker

    cmd = [sys.executable, "-m", "model_build.trace_worker", str(ctx.spec.path), model.name, str(scratch)]
    if ctx.serving_torch:
        from deployment_spec.serving_runtimes import runtime
        cmd += ["--serving-torch", runtime(ctx.spec.triton_version).torch_release]
    ctx.log("  $ " + " ".join(cmd))
    # The child sees the same import path (user recipe modules, this checkout).
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    # Its step lines are passed on as they come (a BERT-large trace takes minutes); stderr is read at the end.
    with tempfile.TemporaryFile("w+") as errors:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errors, text=True, env=env)
        for line in proc.stdout:
            ctx.log(line.rstrip("\n"))
        returncode = proc.wait()
        errors.seek(0)
        stderr = errors.read()
    if returncode == trace_worker.FAILED:
        message = stderr.rsplit(trace_worker.MARKER, 1)[-1].strip()
        raise BuildError(message)
    if returncode != 0:
        tail = "\n".join(stderr.strip().splitlines()[-10:])
        raise BuildError(f"model {model.name}: the TorchScript trace process failed (exit {returncode}):\n{tail}")
    return json.loads((scratch / "parity.json").read_text())


def _opset(path: pathlib.Path) -> str:
    from model_build import onnx_weights
    model = onnx_weights.load_graph(path)
    return str(next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), "?"))
