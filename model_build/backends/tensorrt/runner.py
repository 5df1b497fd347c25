"""Runs the TensorRT build: in the TensorRT image through Docker, or with a local trtexec
(inside the GPU build image of model_build/backends/tensorrt/Dockerfile). Each command is logged exactly."""
from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
from typing import Callable, Sequence

from deployment_spec.builds.manifest import TensorSpec
from deployment_spec.sections.model import ModelSpec
from model_build.errors import BuildError, ToolUnavailable
from model_build.backends.tensorrt import trtexec
from model_build.backends.tensorrt.gpu import Toolchain
from model_build.versions import trt_at_least

_VERSION = re.compile(r"(\d+\.\d+\.\d+(?:\.\d+)?)")


def build_plan(model: ModelSpec, inputs: Sequence[TensorSpec], workdir: pathlib.Path, cache_dir: pathlib.Path,
               triton_version: str, tools: Toolchain, log: Callable[[str], None]) -> dict[str, str]:
    """Turns ``workdir/model.onnx`` into ``workdir/model.plan``; returns TensorRT version facts."""
    if not tools.usable:
        raise ToolUnavailable(f"model {model.name}: a TensorRT plan needs an NVIDIA GPU and a Docker engine "
                              f"(or a local trtexec): {tools.reason}")
    cache_dir.mkdir(parents=True, exist_ok=True)
    image = trtexec.image(triton_version)
    if tools.local_trtexec:
        exe = shutil.which("trtexec") or trtexec.TRTEXEC

        def run(cmd: list[str]) -> str:
            return _run(cmd, log)
        paths = dict(onnx=str(workdir / "model.onnx"), plan=str(workdir / "model.plan"), cache_dir=str(cache_dir),
                     trtexec=exe)
    else:
        user = f"{os.getuid()}:{os.getgid()}" if hasattr(os, "getuid") else None

        def run(cmd: list[str]) -> str:
            return _run(trtexec.docker_run(image, str(workdir), str(cache_dir), cmd, user), log)
        paths = {}
    trt_version = _VERSION.search(run(trtexec.PROBE_TRT))
    if not trt_version:
        raise BuildError(f"model {model.name}: could not read the TensorRT version of {image}")
    version = trt_version.group(1)
    run(trtexec.trtexec_args(model, inputs, version, tools.gpu.compute_capability, **paths))
    facts = {"tensorrt": version, "tensorrt_image": image}
    if trt_at_least(version, "10.0"):
        plan_args = {k: paths[k] for k in ("plan", "trtexec") if k in paths}
        found = _VERSION.findall(run(trtexec.plan_version_args(**plan_args)))
        if found:
            facts["tensorrt_plan"] = found[-1]
    return facts


def _run(cmd: list[str], log: Callable[[str], None]) -> str:
    log("$ " + " ".join(cmd))
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise BuildError(f"command failed (exit {proc.returncode}): {' '.join(cmd)}\n{tail}")
    return proc.stdout + proc.stderr
