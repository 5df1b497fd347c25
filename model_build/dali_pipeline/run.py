"""Serialize a ``dali:`` pipeline and run it on DALI's CPU operators, each in the DALI release of the spec's Triton
image, through worker.py in that release's side environment (model_build/verification/side_env.py): the build's
own packages never touch the file."""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import numpy as np

from deployment_spec.sections.model import ModelSpec
from deployment_spec.facts.serving_runtimes import DaliRelease
from model_build.errors import BuildError
from deployment_spec.builds.model_sources import plain

WORKER = pathlib.Path(__file__).resolve().parent / "worker.py"
MODEL_FILE = "model.dali"


def serialize(env, model: ModelSpec, where: str, target: pathlib.Path, release: DaliRelease) -> pathlib.Path:
    """``target``: the model's pipeline serialized by ``release`` in its side environment ``env``."""
    request = {"pipeline": plain(model.dali), "placement": where, "max_batch_size": model.max_batch_size,
               "out": str(target)}
    _run_worker(env, "serialize", request, target.with_suffix(f".{where}.json"), model, release)
    return target


def run_on_cpu(env, model: ModelSpec, cpu_file: pathlib.Path, images: list[pathlib.Path], scratch: pathlib.Path,
               release: DaliRelease) -> list[np.ndarray]:
    """The CPU-placed pipeline's output for each image, fed zero-padded in batches of max_batch_size."""
    out = scratch / "outputs.npz"
    got: list[np.ndarray] = []
    for start in range(0, len(images), model.max_batch_size):
        request = {"model": str(cpu_file), "images": [str(p) for p in images[start:start + model.max_batch_size]],
                   "max_batch_size": model.max_batch_size, "num_threads": model.dali.num_threads, "out": str(out)}
        _run_worker(env, "run", request, scratch / "run.json", model, release)
        with np.load(out) as data:
            got += [data[f"image{i}"] for i in range(len(request["images"]))]
    return got


def _run_worker(env, command: str, request: dict, request_file: pathlib.Path, model: ModelSpec,
                release: DaliRelease) -> None:
    request_file.write_text(json.dumps(request))
    cmd = [sys.executable, "-S", "-E", str(WORKER), str(env.site_dir), command, str(request_file)]
    proc = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        lines = [line for line in proc.stderr.strip().splitlines() if line.strip() and "[frame" not in line]
        raise BuildError(f"model {model.name}: DALI {release.version} (Triton {release.triton_version}'s) could not "
                         f"{command} the pipeline: {' | '.join(lines[-3:]) or f'exit {proc.returncode}'}"
                         + (_GPU_FIX if command == "serialize" and "device_id" in proc.stderr else ""))


# DALI 1.x needs a CUDA driver to place operators on the GPU even for serializing (measured with
# 1.31.0: "Cannot add a mixed operator ... device_id should not be CPU_ONLY_DEVICE_ID"); 2.x does not.
_GPU_FIX = ("; this DALI release places operators on the GPU only on a machine with a CUDA driver: build on a GPU "
            "host, serve the model from CPU instances (its pipeline then runs on the CPU), or pick a triton_version "
            "with DALI 2.x (26.05)")
