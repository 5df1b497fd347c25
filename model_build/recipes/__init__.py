"""Recipes: where a model's torch module (or Python-backend files) comes from.

A built-in recipe (deployment_spec/sections/recipes.py lists the names) or a user function given as
``package.module:function`` in the spec. A user function takes the ModelSpec (its ``weights``, if
set, an absolute path to an existing directory) and returns an ``ExportableModel``. This module
imports no torch; the recipe modules do, when called.
"""
from __future__ import annotations

import dataclasses
import importlib
import pathlib

from deployment_spec.sections.model import ModelSpec
from model_build.errors import BuildError
# The recipe contract, re-exported: user recipes return model_build.recipes.ExportableModel.
from model_build.recipes.contract import ExportableModel, PythonModel, weights_dir  # noqa: F401


def load_exportable(model: ModelSpec, root: pathlib.Path, batch_axis_only: bool = False) -> ExportableModel:
    """Runs the recipe. ``batch_axis_only`` keeps only axis 0 dynamic (TensorRT profiles fix the rest)."""
    recipe = model.source.recipe
    _quiet_transformers()
    if ":" in recipe:
        made = _call_user_recipe(model, recipe, root)
    else:
        from model_build.recipes import builtin
        made = builtin.exportable(model, root)
    if model.samples:
        from model_build import samples
        samples.attach(model, root, made)
    if batch_axis_only:
        made.dynamic_axes = {k: {a: n for a, n in axes.items() if a == 0} for k, axes in made.dynamic_axes.items()}
    return made


def load_python(model: ModelSpec, root: pathlib.Path, consumer_int32: bool) -> PythonModel:
    _quiet_transformers()
    from model_build.recipes import python_recipes
    return python_recipes.python_model(model, root, consumer_int32)


def _call_user_recipe(model: ModelSpec, recipe: str, root: pathlib.Path) -> ExportableModel:
    module_name, func_name = recipe.split(":", 1)
    where = f"models.{model.name}.source.recipe"
    if model.weights:  # the function sees an absolute path: it does not know the spec's folder
        model = dataclasses.replace(model, weights=str(weights_dir(model, root)))
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise BuildError(f"{where}: cannot import module {module_name!r} ({exc}); put it in the spec's "
                         "folder or the current directory, or on PYTHONPATH") from None
    func = getattr(module, func_name, None)
    if not callable(func):
        raise BuildError(f"{where}: module {module_name!r} has no function {func_name!r}; define "
                         f"def {func_name}(model) -> model_build.recipes.ExportableModel")
    try:
        made = func(model)
    except Exception as exc:  # the user's code: report it in spec terms instead of a traceback
        raise BuildError(f"{where}: {recipe} raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(made, ExportableModel):
        raise BuildError(f"{where}: {recipe} returned {type(made).__name__}, not "
                         "model_build.recipes.ExportableModel")
    problems = made.problems()
    if problems:
        raise BuildError(f"{where}: {recipe} returned an invalid ExportableModel: " + "; ".join(problems))
    return made


def _quiet_transformers() -> None:
    """transformers' advice about training-time settings is noise in a build log."""
    try:
        import transformers
    except ImportError:
        return
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
