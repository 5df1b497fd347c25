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
import time
from typing import Callable, Mapping, Optional

from deployment_spec import Spec
from deployment_spec.manifest import BuilderFacts, ModelEntry, TensorSpec, _model as entry_from_json
from deployment_spec.model import Backend, ModelSpec, Precision
from model_build import checks, ensemble, layout, model_config
from model_build.errors import BuildError, ToolUnavailable
from model_build.hashing import tool_versions

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
        _check_target_gpus(ctx.spec, model, tools.gpu.compute_capability)
    if model.backend is Backend.ENSEMBLE:
        inputs, outputs, step_configs = ensemble.wire(model, steps)
        files: dict = {}
    elif model.backend is Backend.PYTHON:
        inputs, outputs, files, params, model_files = _python(ctx, model)
    elif kind in ("recipe", "onnx") and model.backend in (Backend.ONNXRUNTIME, Backend.TENSORRT):
        inputs, outputs, parity = _onnx(ctx, model, scratch)
        versions["onnx_opset"] = _opset(scratch / "model.onnx")
        if model.backend is Backend.TENSORRT:
            from model_build.tensorrt import runner
            tools = ctx.toolchain()
            step = _Step(ctx, model.name, "build TensorRT plan (trtexec)")
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


class _Step:
    """One line when a long step starts and one with its duration when it ends."""

    def __init__(self, ctx: Context, name: str, what: str) -> None:
        self.ctx, self.name, self.what, self.start = ctx, name, what, time.monotonic()
        ctx.log(f"  {name}: {what} ...")

    def done(self, extra: str = "") -> None:
        self.ctx.log(f"  {self.name}: {self.what} done in {time.monotonic() - self.start:.1f} s{extra}")


def _onnx(ctx: Context, model: ModelSpec, scratch: pathlib.Path):
    from model_build import onnx_export, parity as parity_check
    from model_build.recipes import load_exportable

    target = scratch / "model.onnx"
    if model.source.kind() == "onnx":
        src = (ctx.spec.root / model.source.onnx).resolve()
        if not src.is_file():
            raise BuildError(f"models.{model.name}.source.onnx: {src} does not exist; give the path of an .onnx "
                             "file, relative to the spec's folder")
        shutil.copyfile(src, target)
        import onnx
        try:
            onnx.checker.check_model(str(target), full_check=True)
        except onnx.checker.ValidationError as exc:
            raise BuildError(f"models.{model.name}.source.onnx: {src} fails onnx.checker: "
                             f"{str(exc).splitlines()[0]}") from None
        inputs, outputs = onnx_export.graph_io(target, model.max_batch_size, model.name)
        return inputs, outputs, None
    if model.precision is Precision.INT8 and model.backend is Backend.ONNXRUNTIME:
        raise BuildError(f"models.{model.name}.precision: int8 from a recipe needs quantization, which this builder "
                         "does not do; quantize the ONNX yourself and give it as source: {onnx: ...}, or use fp32")
    step = _Step(ctx, model.name, "load recipe")
    made = load_exportable(model, ctx.spec.root, batch_axis_only=model.backend is Backend.TENSORRT)
    step.done()
    if made.note:
        ctx.log(f"  {model.name}: {made.note}")
    optimize = model.onnxruntime.optimize_at_build if model.onnxruntime else True
    step = _Step(ctx, model.name, f"export ONNX (opset {onnx_export.OPSET})")
    onnx_export.export(model.name, made, target, optimize=optimize)
    step.done()
    inputs, outputs = onnx_export.graph_io(target, model.max_batch_size, model.name)
    step = _Step(ctx, model.name, "check ONNX Runtime against PyTorch")
    result = parity_check.check_onnx(model.name, made, target, model.tolerance)
    step.done(f" (max abs error {result['max_abs_error']:.2e}, max rel error {result['max_rel_error']:.2e})")
    return inputs, outputs, result


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
    step = _Step(ctx, model.name, "trace TorchScript and check it against eager PyTorch")
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


def _python(ctx: Context, model: ModelSpec):
    """Files, tensors and parameters of a Python-backend model (built-in recipe or python_dir)."""
    from model_build.recipes import load_python

    model_files: dict = {}
    params: dict[str, str] = {}
    if model.source.kind() == "python_dir":
        inputs, outputs, files, params = _python_dir(ctx, model)
    else:
        step = _Step(ctx, model.name, "prepare Python-backend files")
        made = load_python(model, ctx.spec.root, consumer_int32=_feeds_tensorrt(ctx.spec, model.name))
        step.done()
        if made.note:
            ctx.log(f"  {model.name}: {made.note}")
        inputs, outputs, files, params = made.inputs, made.outputs, dict(made.files), dict(made.parameters)
    if model.python and model.python.execution_env:
        env = (ctx.spec.root / model.python.execution_env).resolve()
        if not env.is_file() or not env.name.endswith(".tar.gz"):
            raise BuildError(f"models.{model.name}.python.execution_env: {env} is not a .tar.gz file; give a "
                             "conda-pack archive (conda pack -n <env> -o env.tar.gz)")
        # Shipped inside the model directory, resolved by the Python backend at load (FACTS §4.1).
        model_files[env.name] = env
        params["EXECUTION_ENV_PATH"] = f"$$TRITON_MODEL_DIRECTORY/{env.name}"
    return tuple(inputs), tuple(outputs), files, params, model_files


def _python_dir(ctx: Context, model: ModelSpec):
    src = (ctx.spec.root / model.source.python_dir).resolve()
    where = f"models.{model.name}.source.python_dir"
    if not (src / "model.py").is_file():
        raise BuildError(f"{where}: {src} has no model.py; the Python backend loads <version>/model.py")
    if not (src / layout.CONFIG).is_file():
        raise BuildError(f"{where}: {src} has no {layout.CONFIG} declaring the model's input and output tensors")
    declared = model_config.parse((src / layout.CONFIG).read_text(), f"{src / layout.CONFIG}")
    tensors = [[TensorSpec(t.name, model_config.model_config_pb2.DataType.Name(t.data_type), tuple(t.dims))
                for t in group] for group in (declared.input, declared.output)]
    params = {k: v.string_value for k, v in declared.parameters.items()}
    files = {p.name: p for p in sorted(src.iterdir()) if p.name != layout.CONFIG and p.name != "__pycache__"}
    return tensors[0], tensors[1], files, params


def _feeds_tensorrt(spec: Spec, name: str) -> bool:
    """True when an ensemble passes this model's outputs to a TensorRT model (int32 token ids)."""
    for other in spec.models.values():
        if other.ensemble and any(s.model == name for s in other.ensemble.steps):
            if any(spec.models[s.model].backend is Backend.TENSORRT for s in other.ensemble.steps
                   if s.model in spec.models):
                return True
    return False


def _check_target_gpus(spec: Spec, model: ModelSpec, local_cc: str) -> None:
    """A plan runs only on the GPU architecture it was built on (FACTS §6.2): refuse a mismatch early."""
    from deployment_spec import instances
    from deployment_spec.model import HardwareCompatibility, TensorRTSettings

    level = (model.tensorrt or TensorRTSettings()).hardware_compatibility
    for ep in spec.endpoints.values():
        if model.name not in {m.name for m in spec.served_models(ep)}:
            continue
        itype = instances.lookup(ep.instance_type)
        target = itype.family.compute_capability if itype else None
        if target is None:
            continue
        if level is HardwareCompatibility.AMPERE_PLUS:
            if float(target) < 8.0:
                raise BuildError(f"models.{model.name}.tensorrt.hardware_compatibility: an ampere_plus plan does not "
                                 f"run on {ep.instance_type} (compute capability {target}) of endpoint {ep.name}; "
                                 "use none and build on that GPU")
        elif target != local_cc:
            raise ToolUnavailable(f"model {model.name}: endpoint {ep.name} runs on {ep.instance_type} (compute "
                                  f"capability {target}) but this machine's GPU has {local_cc}; a TensorRT plan only "
                                  f"loads on the architecture it was built on, build it on a {target} GPU")


def _opset(path: pathlib.Path) -> str:
    import onnx
    model = onnx.load(str(path), load_external_data=False)
    return str(next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), "?"))
