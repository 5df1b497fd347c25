"""``backend: pytorch`` models (``pytorch_libtorch``): a recipe traced to TorchScript, or the user's TorchScript file.

A recipe is traced in a fresh process (trace_worker.py: the same inputs give the same model.pt)
and checked there against eager PyTorch on the serving cases; a user's file is checked on the
spec's sizes (given_file.py). Either way the graph must not fix a device other than its instances'.
"""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
from typing import Any, Mapping

from deployment_spec.builds.manifest import ModelEntry
from deployment_spec.sections.model import ModelSpec
from deployment_spec.facts.serving_runtimes import runtime
from model_build import given_files, reproducible
from model_build.backends.pytorch import given_file, torchscript, trace_failures, trace_worker
from model_build.backends.result import BackendResult
from model_build.build_context import BuildContext, serving_devices
from model_build.errors import BuildError
from model_build.progress import Step
from model_build.verification import file_check
from model_build.verification.record import typed

MODEL_FILE = "model.pt"


def build(ctx: BuildContext, model: ModelSpec, scratch: pathlib.Path, built: Mapping[str, ModelEntry]) -> BackendResult:
    target = scratch / MODEL_FILE
    if model.source.kind() == "torchscript":
        return _given(ctx, model, target, scratch)
    step = Step(ctx, model.name, "trace TorchScript and check it against eager PyTorch")
    result = _run_trace_worker(ctx, model, scratch)
    step.done(f" (max abs error {result['parity']['max_abs_error']:.2e})")
    described = torchscript.read_io(target)
    if described is None:  # trace_worker writes the description with the file
        raise BuildError(f"model {model.name}: the traced model.pt carries no {torchscript.IO_FILE}; this is a "
                         "model_build bug, please report it")
    inputs, outputs = described
    return BackendResult(inputs, outputs, {MODEL_FILE: target}, typed(result["verification"]),
                         parity=result["parity"])


def _given(ctx: BuildContext, model: ModelSpec, target: pathlib.Path, scratch: pathlib.Path) -> BackendResult:
    """``target``: the user's file, copied; its device constants, its tensors and its run on the spec's sizes checked."""
    src = given_files.source_path(ctx.spec.root, model)
    shutil.copyfile(src, target)
    torchscript.check_devices(model.name, target, serving_devices(ctx.spec, model), shown=src)
    reproducible.strip_torchscript(target)
    inputs, outputs = given_file.tensors(model, src)
    made = given_files.exportable(model, inputs, outputs, ctx.spec.root)
    step = Step(ctx, model.name, f"run {src.name} on the spec's sizes")
    checked = given_file.check(model, made, outputs, runtime(ctx.spec.triton_version), target, src, scratch, ctx.log,
                               ctx.serving_torch)
    step.done(f" ({checked['cases']} cases)")
    return BackendResult(inputs, outputs, {MODEL_FILE: target}, typed(checked),
                         parity=file_check.parity(model, checked))


def _run_trace_worker(ctx: BuildContext, model: ModelSpec, scratch: pathlib.Path) -> dict[str, Any]:
    cmd = [sys.executable, "-m", trace_worker.__name__, str(ctx.spec.path), model.name, str(scratch)]
    if ctx.serving_torch:
        cmd += ["--serving-torch", runtime(ctx.spec.triton_version).torch_release]
    ctx.log("  $ " + " ".join(cmd))
    # The child sees the same import path (user recipe modules, this checkout).
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    # Its step lines are passed on as they come (a BERT-large trace takes minutes); stderr is read at the end.
    with tempfile.TemporaryFile("w+") as errors:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errors, text=True, env=env)
        for line in proc.stdout or ():  # stdout=PIPE: never None
            ctx.log(line.rstrip("\n"))
        returncode = proc.wait()
        errors.seek(0)
        stderr = errors.read()
    if returncode == trace_worker.FAILED:
        message = stderr.rsplit(trace_worker.MARKER, 1)[-1].strip()
        raise BuildError(message)
    if returncode != 0:  # its error in one line: a traceback's frames say nothing to the spec's author
        raise BuildError(f"model {model.name}: the TorchScript trace process failed (exit {returncode}): "
                         f"{trace_failures.last_error_line(stderr)}")
    return json.loads((scratch / "parity.json").read_text())
