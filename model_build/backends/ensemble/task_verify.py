"""A task's ensemble verified at build time: its built steps as a chain, checked by its modality's check
(task_check.py for raw text, image_check.py for encoded images, dali_image_check.py for encoded images through a
DALI step, audio_check.py for audio files)."""
from __future__ import annotations

import functools
import pathlib
from typing import Mapping

from deployment_spec.builds.manifest import ModelEntry, Verification
from deployment_spec.sections.model import ModelSpec
from model_build import dispatch
from model_build.backends.ensemble import audio_check, dali_image_check, image_check, task_check
from model_build.build_context import BuildContext
from model_build.progress import Step
from model_build.verification.record import not_run


def verify_task(ctx: BuildContext, model: ModelSpec, built: Mapping[str, ModelEntry], scratch: pathlib.Path) -> Verification:
    assert model.task is not None and model.ensemble is not None  # only task ensembles come here
    steps = [s.model for s in model.ensemble.steps]
    model_step = ctx.spec.models[steps[1]]
    if model_step.backend not in task_check.FILES:
        return not_run(ctx.spec.triton_version, f"the model step is a {model_step.backend.value} plan, which runs only "
                       "on a GPU; the first and answer steps are checked when it is served (tritonsm smoke)")
    assert model_step.weights is not None  # a task entry without weights is refused when the spec loads
    raw, checked = (("images", functools.partial(dali_image_check.check, ctx.spec.models[steps[0]]))
                    if model.task.dali_preprocess() else
                    ("images", image_check.check) if model.task.takes_image() else
                    ("audio", audio_check.check) if model.task.takes_audio() else ("text", task_check.check))
    step = Step(ctx, model.name, f"verify raw {raw} in, answers out against the {model.task.kind.value} reference")
    chain = task_check.Chain(model.name, model.task, model_step, built[steps[1]],
                             [dispatch.cache_dir(ctx.work, name, built[name].build_hash) / name for name in steps],
                             (ctx.spec.root / model_step.weights).resolve(), ctx.spec.triton_version)
    verification = checked(chain, scratch, ctx.log)
    step.done()
    return verification
