"""``backend: dali`` models: the spec's pipeline serialized by the image's DALI release, then checked.

1. The DALI release of the spec's Triton image (``serving_runtimes.DALI_RELEASES``) is installed
   once into a hashed side environment (model_build/verification/side_env.py) and serializes the
   pipeline there: the build's own packages never touch the file.
2. Placement: decoding on the GPU (``mixed``, nvJPEG) with resize and normalisation on the GPU when
   every instance that serves the model has a GPU, as the reference article runs it; all on the CPU
   otherwise (a CPU endpoint or a KIND_CPU instance group).
3. Check: the shipped file with its operators moved to the CPU (model_build/dali_pipeline/placement.py) must
   be byte-identical to the same pipeline serialized for the CPU, and that CPU pipeline must match
   the PIL/numpy reference (model_build/dali_pipeline/reference.py) on real JPEGs of six sizes, fed padded
   as one batch the way Triton feeds a dynamic batch.
"""
from __future__ import annotations

import pathlib
from typing import Mapping

from deployment_spec.sections import dali as dali_spec
from deployment_spec.builds.manifest import ModelEntry, TensorSpec
from deployment_spec.sections.model import ModelSpec
from deployment_spec.facts.serving_runtimes import DALI_RELEASES, DaliRelease
from model_build.backends.result import BackendResult
from model_build.build_context import BuildContext, serving_devices
from model_build.errors import BuildError
from model_build.dali_pipeline.run import MODEL_FILE, run_on_cpu, serialize
from model_build.progress import Step
from model_build.verification.record import typed



def placement(devices: set[str]) -> str:
    """``gpu`` when every serving instance has a GPU; ``cpu`` as soon as one runs on the CPU."""
    return "cpu" if "cpu" in devices else "gpu"


def build(ctx: BuildContext, model: ModelSpec, scratch: pathlib.Path, built: Mapping[str, ModelEntry]) -> BackendResult:
    """model.dali serialized for where the model is served, checked on the CPU against PIL/numpy."""
    from model_build.verification import side_env

    release = DALI_RELEASES[ctx.spec.triton_version]
    env = side_env.ensure(release.package, release.version, ctx.log)
    where = placement(serving_devices(ctx.spec, model))
    step = Step(ctx, model.name, f"serialize the pipeline with DALI {release.version} (Triton "
                                 f"{release.triton_version}'s), operators on the {where.upper()}")
    shipped = serialize(env, model, where, scratch / MODEL_FILE, release)
    step.done(f" ({shipped.stat().st_size} bytes)")
    step = Step(ctx, model.name, f"check the pipeline on DALI {release.version}'s CPU operators against PIL/numpy")
    check = _check(env, model, shipped, where, scratch, release)
    step.done(f" ({check['cases']} JPEGs, max {check['max_levels']:.1f} levels, mean {check['mean_levels']:.2f})")
    inputs = (TensorSpec(dali_spec.INPUT, "TYPE_UINT8", (-1,)),)
    outputs = (TensorSpec(dali_spec.OUTPUT, dali_spec.TRITON_TYPE[model.dali.dtype], model.dali.output_dims()),)
    # The dali backend reads num_threads from the config (dali_backend docs/config.md).
    params = {"num_threads": str(model.dali.num_threads)}
    return BackendResult(inputs, outputs, {MODEL_FILE: shipped}, typed(check), parameters=params,
                         versions={"dali": release.version})


def _check(env, model: ModelSpec, shipped: pathlib.Path, where: str, scratch: pathlib.Path,
           release: DaliRelease) -> dict:
    from model_build.backends.dali import check_images
    from model_build.dali_pipeline import placement as placement_rewrite, reference

    cpu_file = scratch / "model.cpu.dali"
    if where == "gpu":
        built_for_cpu = serialize(env, model, "cpu", scratch / "built-for-cpu.dali", release).read_bytes()
        moved = placement_rewrite.to_cpu(shipped.read_bytes())
        if moved != built_for_cpu:
            raise BuildError(f"model {model.name}: the GPU pipeline with its operators moved to the CPU differs from "
                             f"the same pipeline serialized for the CPU by DALI {release.version}; the CPU check "
                             "would not cover the shipped file. This is a model_build bug, please report it")
        cpu_file.write_bytes(moved)
    else:
        cpu_file.write_bytes(shipped.read_bytes())
    images = check_images.write(scratch / "images")
    got = run_on_cpu(env, model, cpu_file, images, scratch, release)
    worst = {"max_levels": 0.0, "mean_levels": 0.0}
    for index, path in enumerate(images):
        want = reference.preprocess(path.read_bytes(), model.dali)
        if got[index].shape != want.shape:
            raise BuildError(f"model {model.name}: DALI {release.version} gives shape {list(got[index].shape)} for "
                             f"{path.name}, the reference {list(want.shape)}; this is a model_build bug")
        diff = reference.compare(got[index], want, model.dali)
        if not reference.within(diff, model.dali):
            raise BuildError(f"model {model.name}: DALI {release.version}'s output for {path.name} differs from the "
                             f"PIL/numpy reference by up to {diff['max_levels']:.1f} pixel levels "
                             f"({diff['mean_levels']:.2f} on average); allowed: {reference.max_levels(model.dali)} and "
                             f"{reference.MEAN_LEVELS}. This is a model_build bug, please report it")
        worst = {key: max(worst[key], value) for key, value in diff.items()}
    return {"ran": True, "triton_version": release.triton_version, "runtime": "dali", "version": release.version,
            "package": release.requirement, "device": "cpu", "placement": where, "cases": len(images),
            "graph": ("model.dali with its operators moved to the CPU (byte-identical to the pipeline serialized "
                      "for the CPU)" if where == "gpu" else "model.dali as shipped"),
            "reference": "PIL (libjpeg-turbo decode, antialiased resize) and numpy", **worst,
            "tolerance_levels": {"max": reference.max_levels(model.dali), "mean": reference.MEAN_LEVELS}}
