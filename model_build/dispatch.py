"""Builds one spec model into a cached Triton model directory, verified before it is kept.

The backend that builds it comes from ``BACKENDS`` (one package a backend under
model_build/backends/, each with a ``build`` function returning a ``BackendResult``); this module
writes what every backend shares: ``config.pbtxt``, the model directory's layout, the repository
checks and the manifest's entry.

Cache layout: ``<work>/models/<name>-<build hash[:16]>/{<name>/, entry.json}``. The directory is
assembled in a temporary folder and renamed into place only after every check passed, so a
failed build leaves nothing that a later build could mistake for a result.
"""
from __future__ import annotations

import dataclasses
import importlib
import json
import pathlib
import shutil
import tempfile
from typing import Mapping, Optional

from deployment_spec.builds.manifest import BuilderFacts, ModelEntry, _model as entry_from_json
from deployment_spec.sections.model import Backend, ModelSpec
from model_build import checks, layout, model_config
from model_build.backends.result import BackendResult
from model_build.build_context import BuildContext
from model_build.errors import BuildError
from model_build.hashing import tool_versions

ENTRY = "entry.json"


@dataclasses.dataclass(frozen=True)
class BackendEntry:
    module: str                            # imported when a model of this backend is built: torch stays unloaded
    sources: Optional[tuple[str, ...]]     # the source kinds it builds from; None: whatever the spec allows


BACKENDS: Mapping[Backend, BackendEntry] = {
    Backend.ONNXRUNTIME: BackendEntry("model_build.backends.onnxruntime.build", ("recipe", "onnx")),
    Backend.TENSORRT: BackendEntry("model_build.backends.tensorrt.build", ("recipe", "onnx")),
    Backend.PYTORCH: BackendEntry("model_build.backends.pytorch.build", None),
    Backend.PYTHON: BackendEntry("model_build.backends.python.build", None),
    Backend.DALI: BackendEntry("model_build.backends.dali.build", None),
    Backend.ENSEMBLE: BackendEntry("model_build.backends.ensemble.build", None),
}


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


def build_model(ctx: BuildContext, model: ModelSpec, build_hash: str,
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


def _build(ctx: BuildContext, model: ModelSpec, build_hash: str, steps: Mapping[str, ModelEntry],
           model_dir: pathlib.Path, scratch: pathlib.Path) -> ModelEntry:
    entry = BACKENDS[model.backend]
    kind = model.source.kind() if model.source else "ensemble"
    if entry.sources is not None and kind not in entry.sources:
        raise BuildError(f"models.{model.name}: backend {model.backend.value} with a {kind} source is not buildable")
    result: BackendResult = importlib.import_module(entry.module).build(ctx, model, scratch, steps)
    config = model_config.build_config(model, name=model.name, inputs=result.inputs, outputs=result.outputs,
                                       triton_version=ctx.spec.triton_version, parameters=dict(result.parameters),
                                       ensemble_steps=[dict(step) for step in result.ensemble_steps])
    layout.write_model_dir(model_dir, model_config.render(config), result.files, result.model_files)
    versions = {"triton": ctx.spec.triton_version, **tool_versions(), **result.versions}
    gpu_name, gpu_cc = (result.gpu.name, result.gpu.compute_capability) if result.gpu else (None, None)
    return ModelEntry(name=model.name, spec_model=model.name, backend=model.backend.value,
                      max_batch_size=model.max_batch_size, inputs=tuple(result.inputs),
                      outputs=tuple(result.outputs), build_hash=build_hash,
                      parity=dict(result.parity) if result.parity is not None else None,
                      builder=BuilderFacts(versions, gpu_name, gpu_cc),
                      verification=result.verification, execution_environment=result.environment)
