"""Recipes: where a model's torch module (or Python-backend files) comes from.

A built-in recipe (deployment_spec/recipes.py lists the names) or a user function given as
``package.module:function`` in the spec. A user function takes the ModelSpec and returns an
``ExportableModel``. This module imports no torch; the recipe modules do, when called.
"""
from __future__ import annotations

import dataclasses
import importlib
import pathlib
from typing import Any, Callable, Mapping, Optional

from deployment_spec.manifest import TensorSpec
from deployment_spec.model import ModelSpec
from model_build.errors import BuildError


@dataclasses.dataclass
class ExportableModel:
    """What a recipe hands to the exporter.

    Attributes:
        module: a torch.nn.Module in eval mode whose ``forward`` takes the inputs as keyword
            arguments named like ``input_names`` and returns one tensor or a tuple of tensors
            (in ``output_names`` order).
        example_inputs: input name -> example tensor (batch first), used to trace/export.
        input_names / output_names: the tensor names written to the graph and config.pbtxt.
        dynamic_axes: tensor name -> {axis: symbolic name}; axis 0 is the batch axis.
        sample_inputs: optional ``f(batch_size, seed) -> inputs`` for the parity check with a batch
            size other than the example's (proves the dynamic axes work). Defaults to the examples.
        note: one line printed during the build, e.g. that weights were initialised randomly.
        mask_input: the attention-mask input (1 = token, 0 = padding), if any; the serving check then
            pads rows and proves the mask is honoured. Defaults to an input named ``attention_mask``.
    """

    module: Any
    example_inputs: Mapping[str, Any]
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    dynamic_axes: Mapping[str, Mapping[int, str]] = dataclasses.field(default_factory=dict)
    sample_inputs: Optional[Callable[[int, int], Mapping[str, Any]]] = None
    note: str = ""
    mask_input: Optional[str] = None

    def problems(self) -> list[str]:
        out = []
        if not self.input_names or not self.output_names:
            out.append("input_names and output_names must not be empty")
        if set(self.example_inputs) != set(self.input_names):
            out.append(f"example_inputs has {sorted(self.example_inputs)}, input_names {list(self.input_names)}")
        unknown = set(self.dynamic_axes) - set(self.input_names) - set(self.output_names)
        if unknown:
            out.append(f"dynamic_axes names {sorted(unknown)} are neither inputs nor outputs")
        if self.mask_input is not None and self.mask_input not in self.input_names:
            out.append(f"mask_input {self.mask_input!r} is not one of input_names {list(self.input_names)}")
        return out


@dataclasses.dataclass
class PythonModel:
    """A Python-backend model: files for the version directory and the tensors of its config.

    ``files`` maps a path relative to the version directory to bytes or a file/dir to copy.
    """

    files: Mapping[str, Any]
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    parameters: Mapping[str, str] = dataclasses.field(default_factory=dict)
    note: str = ""


def weights_dir(model: ModelSpec, root: pathlib.Path) -> Optional[pathlib.Path]:
    if not model.weights:
        return None
    path = (root / model.weights).resolve()
    if not path.is_dir():
        raise BuildError(f"models.{model.name}.weights: {path} is not a directory; give a local directory with "
                         "the model's config.json and weights (and tokenizer files), or remove weights to "
                         "initialise randomly")
    return path


def load_exportable(model: ModelSpec, root: pathlib.Path, batch_axis_only: bool = False) -> ExportableModel:
    """Runs the recipe. ``batch_axis_only`` keeps only axis 0 dynamic (TensorRT profiles fix the rest)."""
    recipe = model.source.recipe
    _quiet_transformers()
    if ":" in recipe:
        made = _call_user_recipe(model, recipe)
    else:
        from model_build.recipes import builtin
        made = builtin.exportable(model, root)
    if batch_axis_only:
        made.dynamic_axes = {k: {a: n for a, n in axes.items() if a == 0} for k, axes in made.dynamic_axes.items()}
    return made


def load_python(model: ModelSpec, root: pathlib.Path, consumer_int32: bool) -> PythonModel:
    _quiet_transformers()
    from model_build.recipes import python_recipes
    return python_recipes.python_model(model, root, consumer_int32)


def _call_user_recipe(model: ModelSpec, recipe: str) -> ExportableModel:
    module_name, func_name = recipe.split(":", 1)
    where = f"models.{model.name}.source.recipe"
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
