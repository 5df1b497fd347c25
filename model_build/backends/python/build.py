"""``backend: python`` models: files, tensors and parameters from a built-in recipe or a python_dir,
and the execution environment they import from (model_build/backends/python/execution_env.py)."""
from __future__ import annotations

import pathlib
from typing import Mapping

from deployment_spec import Spec
from deployment_spec.sections import requirements
from deployment_spec.builds.manifest import ModelEntry
from deployment_spec.sections.model import Backend, ModelSpec
from deployment_spec.sections.generation import Engine
from deployment_spec.sections.tasks import GENERATE_RECIPE
from deployment_spec.sections.task_models import window_model_step
from model_build import layout, model_config
from model_build.backends.python import execution_env
from model_build.backends.result import BackendResult
from model_build.build_context import BuildContext
from model_build.errors import BuildError
from model_build.progress import Step
from model_build.verification.record import not_run

# Python-backend code imports packages of the image's Python, which this machine's may not have.
NOT_RUN = "Python-backend code runs in the image's Python; the local endpoint (tritonsm serve) runs it"


def build(ctx: BuildContext, model: ModelSpec, scratch: pathlib.Path, built: Mapping[str, ModelEntry]) -> BackendResult:
    """Files, tensors and parameters of a Python-backend model (built-in recipe or python_dir)."""
    from model_build.recipes import load_python

    model_files: dict[str, pathlib.Path] = {}
    params: dict[str, str] = {}
    recipe_requirements: tuple[str, ...] = ()
    if model.source.kind() == "python_dir":
        inputs, outputs, files, params = _python_dir(ctx, model)
    else:
        step = Step(ctx, model.name, "prepare Python-backend files")
        made = load_python(model, ctx.spec.root, consumer_int32=_feeds_tensorrt(ctx.spec, model.name))
        step.done()
        if made.note:
            ctx.log(f"  {model.name}: {made.note}")
        inputs, outputs, files, params = made.inputs, made.outputs, dict(made.files), dict(made.parameters)
        recipe_requirements = made.requirements
        window_step = window_model_step(model)
        if window_step:  # the model step, built before this one (build_order), runs the other windows (BLS)
            from model_build.recipes import task_steps
            if window_step not in built:
                raise BuildError(f"model {model.name}: its model step {window_step} is not built; build the entry "
                                 f"{model.task_entry} whole (tritonsm build --model {model.task_entry})")
            params["window_model"] = task_steps.window_model(model, built[window_step])
    env_facts = None
    env_lines: list[str] = []  # what the environment is built from; none for a conda-pack archive of one's own
    if model.python and model.python.execution_env:
        env = (ctx.spec.root / model.python.execution_env).resolve()
        if not env.is_file() or not env.name.endswith(".tar.gz"):
            raise BuildError(f"models.{model.name}.python.execution_env: {env} is not a .tar.gz file; give a "
                             "conda-pack archive (conda pack -n <env> -o env.tar.gz)")
        model_files[env.name] = env
        params["EXECUTION_ENV_PATH"] = f"$$TRITON_MODEL_DIRECTORY/{env.name}"
    else:
        env_lines, where = python_env_requirements(ctx.spec, model, recipe_requirements)
        if env_lines:
            made_env = execution_env.build_for(ctx, model, env_lines, where)
            model_files[made_env.file_name] = made_env.archive
            params["EXECUTION_ENV_PATH"] = f"$$TRITON_MODEL_DIRECTORY/{made_env.file_name}"
            env_facts = execution_env.facts(made_env, ctx.python_env_for)
    # Shipped inside the model directory, resolved by the Python backend at load (python_backend README,
    # "Creating Custom Execution Environments").
    verification = not_run(ctx.spec.triton_version, NOT_RUN)
    engine = model.task.engine if model.task is not None else Engine.TRANSFORMERS
    if model.source.recipe == GENERATE_RECIPE and engine is not Engine.TRANSFORMERS:
        verification = not_run(ctx.spec.triton_version, f"{engine.value} decodes only on an NVIDIA GPU in NVIDIA's "
                               "image; tests/gpu/test_generation_engines.py compares it with transformers there")
    elif model.source.recipe == GENERATE_RECIPE:  # the decoding, against transformers' generate on this machine
        from model_build.backends.python import generation_check
        step = Step(ctx, model.name, f"verify greedy decoding against transformers' generate "
                                     f"({generation_check.cases_said(model)})")
        verification = generation_check.served_by(generation_check.verify(model, files, ctx.log), env_lines,
                                                  ctx.spec.triton_version)
        step.done()
    return BackendResult(tuple(inputs), tuple(outputs), files, verification,
                         parameters=params, model_files=model_files, environment=env_facts)


def python_env_requirements(spec: Spec, model: ModelSpec,
                            recipe_requirements: tuple[str, ...]) -> tuple[list[str], str]:
    """The pinned lines the model's environment is built from, and the spec field they came from."""
    settings = model.python
    base = f"models.{model.name}.python"
    if settings and settings.requirements:
        return list(settings.requirements), f"{base}.requirements"
    if settings and settings.requirements_file:
        return _requirements_file(spec.root / settings.requirements_file, f"{base}.requirements_file"), \
            f"{base}.requirements_file"
    if settings and not settings.recipe_requirements:
        return [], base
    return list(recipe_requirements), f"models.{model.name}.source.recipe"


def _requirements_file(path: pathlib.Path, where: str) -> list[str]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise BuildError(f"{where}: cannot read {path} ({exc.strerror}); give a requirements file next to the "
                         "spec, one name==version per line") from None
    lines = []
    for number, line in requirements.requirement_lines(text):
        if not requirements.is_pinned(line):
            raise BuildError(f"{path}:{number}: {line!r} is not pinned; allowed: {requirements.PIN_HELP}; fix: "
                             "pin one release, e.g. 'transformers==4.46.3'")
        lines.append(line)
    if not lines:
        raise BuildError(f"{where}: {path} lists no requirement; add the packages model.py imports "
                         "(name==version), or remove requirements_file")
    return lines


def _python_dir(ctx, model: ModelSpec):
    src = (ctx.spec.root / model.source.python_dir).resolve()
    where = f"models.{model.name}.source.python_dir"
    if not (src / "model.py").is_file():
        raise BuildError(f"{where}: {src} has no model.py; the Python backend loads <version>/model.py")
    if not (src / layout.CONFIG).is_file():
        raise BuildError(f"{where}: {src} has no {layout.CONFIG} declaring the model's input and output tensors")
    declared = model_config.parse((src / layout.CONFIG).read_text(), f"{src / layout.CONFIG}")
    tensors = [[model_config.declared_tensor(t, f"{src / layout.CONFIG}") for t in group]
               for group in (declared.input, declared.output)]
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
