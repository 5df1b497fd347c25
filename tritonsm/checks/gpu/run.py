"""`tritonsm verify --gpu`: every built model of the spec's endpoints, checked on this host's GPU without Docker.

Per backend (each model once, however many endpoints share its archive):

| backend | check | runs where |
|---|---|---|
| pytorch | torchscript: loaded on cuda:0 as a KIND_GPU instance, answers vs the CPU | torch sees a CUDA device |
| python | python_stub: served by the stub for the image's Python in its shipped environment | + nvidia-pytriton, that CPython |
| tensorrt | tensorrt_plan: the plan run by the tensorrt wheel | + the wheel of the plan's release |
| onnxruntime | onnx_cuda: CUDA execution provider vs CPU provider | + onnxruntime-gpu |
| ensemble | none of its own: Triton's scheduler over steps checked one by one | |

Without a CUDA device nothing runs, every check says so, and the exit code is 3.
"""
from __future__ import annotations

import pathlib
import shutil
import tempfile
from typing import Callable, Optional

from tritonsm.checks.gpu import host, onnx_cuda, python_stub, tensorrt_plan, torchscript
from tritonsm.checks.gpu.inputs import case_for, model_file
from tritonsm.checks.gpu.report import FAILED, NOT_RUN, Check, Report
from deployment_spec import load_spec
from deployment_spec.facts import serving_runtimes
from deployment_spec.parsing.errors import UserError
from deployment_spec.served import resolve_endpoint
from local_endpoint.server import archive, backends, disk_space

FILES = {"pytorch": "model.pt", "onnxruntime": "model.onnx", "tensorrt": "model.plan"}


def run(spec_path: pathlib.Path, manifest_path: pathlib.Path, endpoints: list[str], environment: Optional[str],
        log: Callable[[str], None] = print) -> Report:
    spec = load_spec(spec_path)
    runtime = serving_runtimes.runtime(spec.triton_version)
    cuda, reason, facts = host.probe()
    report = Report(spec.triton_version, facts, cuda, reason)
    seen: set[tuple[str, str]] = set()
    work = pathlib.Path(tempfile.mkdtemp(prefix="tritonsm-verify-"))
    try:
        for name in endpoints or list(spec.endpoints):
            try:
                local = resolve_endpoint(spec_path, name, environment, manifest_path)
            except UserError as error:
                report.checks.append(Check(f"endpoint {name}", "-", "-", "the endpoint's archives", NOT_RUN, str(error)))
                continue
            for artifact, tarball in zip(local.manifest.endpoints[name].artifacts, local.tarballs):
                todo = [m for m in artifact.models if (artifact.sha256, m) not in seen]
                seen.update((artifact.sha256, m) for m in todo)
                repository = _unpack(tarball, todo, work / f"{len(seen)}-{tarball.name}") if cuda and todo else None
                for model in todo:
                    if cuda:
                        log(f"checking {model} ({local.manifest.models[model].backend}) of {tarball.name} ...")
                    check = _check(model, tarball, repository, local, spec, runtime, cuda, reason,
                                   work / f"{len(seen)}-{tarball.name}-{model}")
                    report.checks.append(check)
                if repository is not None:
                    shutil.rmtree(repository.parent, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return report


def _unpack(tarball: pathlib.Path, models: list[str], folder: pathlib.Path) -> pathlib.Path:
    """The archive as a repository: `<root>/<model>/`, also for a bare (multi-model) layout."""
    repository = folder / "repository"
    bare = backends.TOP_LEVEL in backends.list_archive_models(tarball)
    with disk_space.told_when_full(f"unpack model archive {tarball} for the GPU checks", repository):
        archive.extract_tarball(tarball, repository / models[0] if bare else repository)
    return repository


def _check(model: str, tarball: pathlib.Path, repository: Optional[pathlib.Path], local, spec, runtime, cuda: bool,
           reason: str, work: pathlib.Path) -> Check:
    entry = local.manifest.models[model]
    backend = entry.backend
    what = {"pytorch": torchscript.WHAT, "onnxruntime": onnx_cuda.WHAT, "tensorrt": tensorrt_plan.WHAT,
            "python": python_stub.what(runtime.python)}.get(backend)
    if what is None:
        why = ("an ensemble is Triton's scheduler over its steps; each step is checked on its own"
               if backend == "ensemble" else f"no GPU check for the {backend} backend")
        return Check(model, backend, tarball.name, "nothing of its own", NOT_RUN, why)
    if not cuda:
        return Check(model, backend, tarball.name, what, NOT_RUN, "no CUDA device here")
    case = case_for(entry, spec.models.get(entry.spec_model))
    try:
        status, detail, facts = _run_one(backend, model, tarball, repository, case, entry, local, runtime, work)
    except Exception as error:  # noqa: BLE001 (one model's surprise must not hide the others' results)
        status, detail, facts = FAILED, f"{type(error).__name__}: {error}", {}
    return Check(model, backend, tarball.name, what, status, detail, facts)


def _run_one(backend, model, tarball, repository, case, entry, local, runtime, work):
    import torch

    if backend == "python":
        work.mkdir(parents=True, exist_ok=True)
        timeout = float(local.endpoint.startup_timeout_s) if local.endpoint else 600.0
        return python_stub.check(tarball, repository, case, env=local.env, python=runtime.python,
                                 gpu_count=torch.cuda.device_count(), work=work, timeout=timeout)
    path = model_file(repository, model, FILES[backend])
    if path is None:
        return FAILED, f"no {FILES[backend]} in a version folder of {model} in {tarball.name}", {}
    if backend == "pytorch":
        return torchscript.check(path, case, entry.max_batch_size)
    if backend == "onnxruntime":
        return onnx_cuda.check(path, case, entry.max_batch_size, runtime.onnxruntime)
    return tensorrt_plan.check(path, case, entry.max_batch_size, entry.builder.versions.get("tensorrt"))
