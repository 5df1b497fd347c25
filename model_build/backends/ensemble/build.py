"""``backend: ensemble`` models: steps, wiring and the ensemble's own tensors, derived from the built steps.

An ensemble has no file of its own: its config names its steps, which are built (and verified)
before it (model_build/build.py builds steps first).
"""
from __future__ import annotations

import pathlib
from typing import Mapping

from deployment_spec.builds.manifest import ModelEntry, TensorSpec
from deployment_spec.sections.model import ModelSpec
from model_build.backends.ensemble.by_name import by_name
from model_build.backends.result import BackendResult
from model_build.build_context import BuildContext
from model_build.errors import BuildError
from model_build.verification.record import not_run


def build(ctx: BuildContext, model: ModelSpec, scratch: pathlib.Path, built: Mapping[str, ModelEntry]) -> BackendResult:
    inputs, outputs, steps = wire(model, built)
    if model.task is not None:  # raw text in, answers out: the whole chain against transformers' own pipeline
        from model_build.backends.ensemble import task_verify
        verification = task_verify.verify_task(ctx, model, built, scratch)
    else:
        verification = not_run(ctx.spec.triton_version, "an ensemble has no file of its own; its steps are checked")
    return BackendResult(tuple(inputs), tuple(outputs), files={}, ensemble_steps=tuple(steps),
                         verification=verification)


def wire(model: ModelSpec, steps: Mapping[str, ModelEntry]) -> tuple[list[TensorSpec], list[TensorSpec], list[dict]]:
    """(ensemble inputs, ensemble outputs, ensemble_scheduling steps) for ``model``.

    ``input_map``/``output_map`` keys are the step model's tensor names, values the ensemble's.
    """
    name = model.name
    produced: dict[str, TensorSpec] = {}
    consumed: dict[str, TensorSpec] = {}
    external: dict[str, TensorSpec] = {}
    step_configs = []
    for i, step in enumerate(by_name(model, steps) if model.ensemble.by_name else model.ensemble.steps):
        entry = steps[step.model]
        where = f"models.{name}.ensemble.steps[{i}] ({step.model})"
        if model.max_batch_size > entry.max_batch_size:
            raise BuildError(f"{where}: the ensemble's max_batch_size {model.max_batch_size} exceeds the step's "
                             f"{entry.max_batch_size}; Triton refuses it, lower the ensemble's max_batch_size")
        ins, outs = {t.name: t for t in entry.inputs}, {t.name: t for t in entry.outputs}
        for own, tensor in step.input_map.items():
            if own not in ins:
                raise BuildError(f"{where}: input_map key {own!r} is not an input of {step.model} "
                                 f"(inputs: {', '.join(ins)})")
            spec = ins[own]
            source = produced.get(tensor) or external.get(tensor)
            if source is not None and source.data_type != spec.data_type:
                raise BuildError(f"{where}: tensor {tensor!r} is {source.data_type} but {step.model} input {own} "
                                 f"takes {spec.data_type}; make the producing model emit {spec.data_type}")
            if tensor not in produced:
                external.setdefault(tensor, TensorSpec(tensor, spec.data_type, spec.dims))
            consumed[tensor] = spec
        for own, tensor in step.output_map.items():
            if own not in outs:
                raise BuildError(f"{where}: output_map key {own!r} is not an output of {step.model} "
                                 f"(outputs: {', '.join(outs)})")
            if tensor in produced or tensor in external:
                raise BuildError(f"{where}: ensemble tensor {tensor!r} is written twice; give each output its own name")
            produced[tensor] = TensorSpec(tensor, outs[own].data_type, outs[own].dims)
        step_configs.append({"model_name": step.model, "model_version": -1,
                             "input_map": dict(sorted(step.input_map.items())),
                             "output_map": dict(sorted(step.output_map.items()))})
    wanted = list(model.ensemble.outputs) or [t for t in produced if t not in consumed]
    missing = [t for t in wanted if t not in produced]
    if missing:
        raise BuildError(f"models.{name}.ensemble.outputs: {', '.join(missing)} not produced by any step "
                         f"(step outputs: {', '.join(produced) or 'none'}); map them in a step's output_map")
    return list(external.values()), [produced[t] for t in wanted], step_configs
