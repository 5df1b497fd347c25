"""A Python-backend model's execution environment inside a build: target, cache, size limits, facts."""
from __future__ import annotations

from deployment_spec.facts import instances
from deployment_spec.builds.manifest import ExecutionEnvironment
from deployment_spec.sections.model import ModelSpec
from deployment_spec.rules.variant_plan import endpoints_to_build
from model_build.errors import BuildError
from model_build.progress import Step
from model_build.python_env import environment, target
from model_build.verification.side_env import cache_root

# What one copy of the environment occupies on an instance: the model tarball (which holds the
# archive) in the MME cache, the unpacked model directory (the archive again) and the folder the
# Python backend unpacks it into. Half the instance store is left for everything else there.
STORE_SHARE = 0.5


def build_for(ctx, model: ModelSpec, lines: list[str], where: str) -> environment.BuiltEnv:
    aim = target.for_this_machine() if ctx.python_env_for == "local" else target.for_image(ctx.spec.triton_version)
    step = Step(ctx, model.name, f"execution environment for {aim.label}")
    built = environment.build(lines, aim, cache_root(), ctx.log, where)
    step.done()
    how = "reused from the cache" if built.reused else "built"
    ctx.log(f"  {model.name}: environment {built.file_name} {how}: {len(built.packages)} packages, "
            f"{built.archive_bytes / 1e6:.0f} MB archive, {built.unpacked_bytes / 1e6:.0f} MB unpacked")
    check_storage(ctx.spec, model.name, built)
    return built


def needed_bytes(built: environment.BuiltEnv) -> int:
    return 2 * built.archive_bytes + built.unpacked_bytes


def check_storage(spec, model_name: str, built: environment.BuiltEnv) -> None:
    need = needed_bytes(built)
    for endpoint in endpoints_to_build(spec).values():  # a variant's own build on its instance type too
        if model_name not in endpoint.models:
            continue
        store = instances.instance_store_gb(endpoint.instance_type)
        if store is not None and need > STORE_SHARE * store * 1e9:
            raise BuildError(
                f"models.{model_name}.python: the execution environment needs {need / 1e9:.1f} GB on each instance "
                f"(archive {built.archive_bytes / 1e9:.1f} GB twice + {built.unpacked_bytes / 1e9:.1f} GB unpacked), "
                f"more than half of the {store} GB instance store of {endpoint.instance_type} (endpoint "
                f"{endpoint.name}); allowed: up to {STORE_SHARE * store:.0f} GB; fix: drop packages model.py does not "
                "import, or serve it on a larger size")


def facts(built: environment.BuiltEnv, built_for: str) -> ExecutionEnvironment:
    """The manifest's record of the environment shipped in the model directory."""
    return ExecutionEnvironment(built.file_name, built_for, built.target.python, built.target.label,
                                built.archive_bytes, built.unpacked_bytes,
                                tuple(f"{p['name']}=={p['version']}" for p in built.packages))
