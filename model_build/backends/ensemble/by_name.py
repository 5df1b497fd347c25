"""A task's ensemble steps wired by tensor name (deployment_spec/sections/tasks.py), once the steps' tensors are known."""
from __future__ import annotations

from typing import Mapping

from deployment_spec.sections import dali, tasks
from deployment_spec.builds.manifest import ModelEntry
from deployment_spec.sections.model import EnsembleStep, ModelSpec
from model_build.tensor_types import unindexed

# A DALI first step (task.preprocess: dali) keeps the dali backend's tensor names (its external_source is the
# model's input); the ensemble calls them what a Python first step calls them.
ALIASES = {dali.INPUT: tasks.IMAGE, dali.OUTPUT: "pixel_values"}


def by_name(model: ModelSpec, steps: Mapping[str, ModelEntry]) -> tuple[EnsembleStep, ...]:
    """A task's steps wired by tensor name: each input takes the tensor of its name; an output is mapped
    only where a later step or the ensemble's outputs use it (a tokenizer's offsets, say, only for answers
    that need them)."""
    wired = []
    order = model.ensemble.steps
    for index, step in enumerate(order):
        entry = steps[step.model]
        later = {plain(t.name) for s in order[index + 1:] for t in steps[s.model].inputs} | set(model.ensemble.outputs)
        wired.append(EnsembleStep(step.model, {t.name: plain(t.name) for t in entry.inputs},
                                  {t.name: plain(t.name) for t in entry.outputs if plain(t.name) in later}))
    return tuple(wired)


def plain(tensor: str) -> str:
    """A tensor's name without the ``__<index>`` the pytorch backend's names carry (input_ids__0: input_ids); a DALI
    step's by its ALIASES name."""
    return ALIASES.get(tensor) or unindexed(tensor)
