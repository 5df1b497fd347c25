"""Expands each ``task:`` entry of ``models:`` into its steps and its ensemble (deployment_spec/sections/tasks.py)."""
from __future__ import annotations

import dataclasses
import pathlib
from typing import Mapping, Optional

from deployment_spec.sections import task_dali, tasks
from deployment_spec.sections.dali import DaliPipeline
from deployment_spec.parsing.errors import Problem
from deployment_spec.sections.model import Backend, DynamicBatching, EnsembleSettings, EnsembleStep, ModelSpec, Source

MAX_NAME = 63  # model.NAME_PATTERN


def expand(models: Mapping[str, ModelSpec], declared: set[str], root: Optional[pathlib.Path] = None
           ) -> tuple[dict[str, ModelSpec], list[Problem]]:
    """The models with every task entry replaced by its ensemble (same name) and its steps after it. ``root``: the
    spec's folder, where weights are (``task.preprocess: dali`` reads the checkpoint's processor when the spec
    loads, so a pipeline DALI cannot express is refused before any build)."""
    out: dict[str, ModelSpec] = {}
    problems: list[Problem] = []
    for name, model in models.items():
        if model.task is None:
            out[name] = model
            continue
        found = tasks.name_problems(name, model.task.kind, declared, MAX_NAME)
        pipeline = None
        if model.task.dali_preprocess() and model.weights and not found:
            pipeline, found = task_dali.derive((root or pathlib.Path(".")) / model.weights, model.weights,
                                               f"models.{name}.task.preprocess")
        problems += found
        if not found:
            out.update(_expanded(model, pipeline))
    return out, problems


def _expanded(model: ModelSpec, pipeline: Optional[DaliPipeline] = None) -> dict[str, ModelSpec]:
    task = model.task
    assert task is not None  # only task entries come here
    if task.generates():  # one model under the entry's name: the checkpoint decoded in the Python backend
        return {model.name: dataclasses.replace(model, source=Source(recipe=tasks.MODEL_RECIPE[task.kind]),
                                                task_entry=model.name)}
    names = tasks.step_names(model.name, task.kind)
    # The Python steps take what is queued without waiting for more: the model step's own delay is where batches
    # are worth forming; a delay on each step would add up (three times the delay for a lone request).
    batching = DynamicBatching(max_queue_delay_us=0) if model.dynamic_batching else None
    python_step = ModelSpec(backend=Backend.PYTHON, weights=model.weights, max_batch_size=model.max_batch_size,
                            sequence_length=model.sequence_length, dynamic_batching=batching,
                            task=task, task_entry=model.name)
    steps = [dataclasses.replace(python_step, source=Source(recipe=tasks.first_recipe(task.kind)), name=names[0]),
             dataclasses.replace(model, source=Source(recipe=tasks.MODEL_RECIPE[task.kind]), name=names[1],
                                 task_entry=model.name)]
    if pipeline is not None:  # task.preprocess: dali: a dali model makes pixel_values (by_name.py renames its tensors)
        steps[0] = ModelSpec(backend=Backend.DALI, dali=pipeline, max_batch_size=model.max_batch_size,
                             dynamic_batching=batching, task=task, task_entry=model.name, name=names[0])
    if tasks.has_answer_step(task.kind):
        steps.append(dataclasses.replace(python_step, source=Source(recipe=tasks.ANSWER_RECIPE), name=names[2]))
    ensemble = ModelSpec(backend=Backend.ENSEMBLE, max_batch_size=model.max_batch_size, task=task, name=model.name,
                         task_entry=model.name,
                         ensemble=EnsembleSettings(steps=tuple(EnsembleStep(model=s.name) for s in steps),
                                                   outputs=tasks.OUTPUTS[task.kind], by_name=True))
    return {model.name: ensemble, **{s.name: s for s in steps}}
