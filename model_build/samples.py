"""``models.<m>.samples``: the user's real inputs, an .npz file of arrays named like the inputs, batch first.

They feed the serving check (a case of their own, and the rows every generated batch is made
of for a model file), the int8 gate (agreement with fp32 is measured on them) and the smoke
request (``tritonsm smoke`` sends the first row, tritonsm/checks/smoke_requests.py). Checked here against the model's input
tensors, so a wrong name, type or shape fails the build naming the file, the array and the fix.
"""
from __future__ import annotations

import pathlib
from typing import Any, Sequence

from deployment_spec.builds.manifest import TensorSpec
from deployment_spec.sections.model import ModelSpec
from model_build.errors import BuildError
from model_build.tensor_types import TORCH_TO_TRITON, TRITON_TO_NUMPY


def path_of(model: ModelSpec, root: pathlib.Path) -> pathlib.Path:
    return (root / model.samples).resolve()


def load(model: ModelSpec, root: pathlib.Path, inputs: Sequence[TensorSpec]) -> dict[str, Any]:
    """The samples as torch tensors, input name -> [rows, ...]; BuildError naming the problem and the fix."""
    import numpy as np
    import torch

    path, where = path_of(model, root), f"models.{model.name}.samples"
    if not path.is_file():
        raise BuildError(f"{where}: {path} does not exist; save real inputs with numpy.savez('{path.name}', "
                         "<input name>=array, ...) next to the spec (paths are relative to its folder)")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
    except Exception as exc:  # zipfile / numpy raise many types for a file that is not an .npz
        raise BuildError(f"{where}: {path} is not an .npz file numpy can read ({type(exc).__name__}: {exc}); "
                         "write it with numpy.savez") from None
    wanted = [t.name for t in inputs]
    missing, extra = [n for n in wanted if n not in arrays], sorted(set(arrays) - set(wanted))
    if missing or extra:
        raise BuildError(f"{where}: {path} holds arrays {sorted(arrays)}, the model's inputs are {wanted} (missing: "
                         f"{missing or 'none'}; not an input: {extra or 'none'}); name each array like the input "
                         "it feeds")
    for tensor in inputs:
        _check_array(where, path, tensor, arrays[tensor.name])
    rows = {name: int(arrays[name].shape[0]) for name in wanted}
    if len(set(rows.values())) != 1:
        raise BuildError(f"{where}: {path}'s arrays have different numbers of rows {rows}; row i of every array "
                         "is one example, so they need the same first dimension")
    return {name: torch.from_numpy(np.ascontiguousarray(arrays[name])) for name in wanted}


def attach(model: ModelSpec, root: pathlib.Path, made) -> None:
    """A recipe's model gets the spec's samples as its real inputs (they win over the recipe's own)."""
    made.agreement_inputs = load(model, root, recipe_inputs(made, model.max_batch_size > 0))
    made.agreement_from = f"the samples in {path_of(model, root).name}"


def recipe_inputs(made, batched: bool) -> list[TensorSpec]:
    """A recipe's inputs as tensors: the example's type, its shape with -1 on every dynamic axis."""
    out = []
    for name in made.input_names:
        example, axes = made.example_inputs[name], made.dynamic_axes.get(name, {})
        dims = [-1 if axis in axes else int(size) for axis, size in enumerate(example.shape)]
        dtype = TORCH_TO_TRITON[str(example.dtype).replace("torch.", "")]
        out.append(TensorSpec(name, dtype, tuple(dims[1:] if batched else dims)))
    return out


def _check_array(where: str, path: pathlib.Path, tensor: TensorSpec, array) -> None:
    dtype = TORCH_TO_TRITON.get(str(array.dtype))
    if dtype != tensor.data_type:
        wanted = TRITON_TO_NUMPY.get(tensor.data_type, tensor.data_type)
        raise BuildError(f"{where}: {path}'s array {tensor.name} is {array.dtype}, the input is {tensor.data_type}; "
                         f"save it as {wanted} (array.astype(numpy.{wanted}))")
    want = ["rows", *tensor.dims]
    fits = array.ndim == len(want) and array.shape[0] >= 1 and all(
        w == -1 or w == s for w, s in zip(tensor.dims, array.shape[1:]))
    if not fits:
        raise BuildError(f"{where}: {path}'s array {tensor.name} has shape {list(array.shape)}; the input takes "
                         f"{want} (batch first, one row per example; -1: any size)")
