"""User recipes (``source: {recipe: 'user_recipes:<function>'}``) for the model_build tests.

Each returns an ExportableModel, the contract a user's own ``module:function`` recipe fulfils.
"""
from __future__ import annotations

import torch

from model_build.recipes import ExportableModel


@torch.library.custom_op("tritonsm_test::mystery", mutates_args=())
def mystery(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@mystery.register_fake
def _(x):
    return torch.empty_like(x)


class Mystery(torch.nn.Module):
    """Calls an operator the ONNX exporter has no conversion for."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return mystery(x) + 1


_CALLS = [0]


class Drifting(torch.nn.Module):
    """Each eager call scales by a global call count; the exported graph keeps the export call's count."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _CALLS[0] += 1
        return x * float(_CALLS[0])


class Scale(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2.0


def _examples(batch: int, seed: int) -> dict[str, torch.Tensor]:
    return {"x": torch.linspace(0.5, 1.0, batch * 4).reshape(batch, 4) + seed * 0}


def unsupported_op(model):
    return ExportableModel(Mystery(), _examples(2, 0), ("x",), ("y",), {"x": {0: "batch"}, "y": {0: "batch"}})


def drifting(model):
    _CALLS[0] = 0
    return ExportableModel(Drifting(), _examples(2, 0), ("x",), ("y",), {"x": {0: "batch"}, "y": {0: "batch"}},
                           sample_inputs=_examples)


def fixed_batch(model):
    """No dynamic axes: the graph's batch dimension is fixed at 2."""
    return ExportableModel(Scale(), _examples(2, 0), ("x",), ("y",), {})


def scale(model):
    return ExportableModel(Scale(), _examples(2, 0), ("x",), ("y",), {"x": {0: "batch"}, "y": {0: "batch"}},
                           sample_inputs=_examples, note="user recipe: x * 2")


def wrong_type(model):
    return {"module": Scale()}


def mismatched_names(model):
    return ExportableModel(Scale(), _examples(2, 0), ("input",), ("y",))


def broken(model):
    raise ValueError("checkpoint has 3 labels, expected 2")


class PythonList(torch.nn.Module):
    """Returns its input as a Python list: neither ONNX exporter can make a graph of that."""

    def forward(self, x: torch.Tensor) -> dict:
        return {"y": x.tolist()}


def python_list(model):
    return ExportableModel(PythonList(), _examples(2, 0), ("x",), ("y",), {"x": {0: "batch"}, "y": {0: "batch"}})


class Branching(torch.nn.Module):
    """Branches on a value of its input: torch.export refuses the data-dependent branch, the TorchScript-based
    exporter records the branch taken (every serving case takes the same one)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:
            return x * 2.0
        return x * 3.0


def branching(model):
    return ExportableModel(Branching(), _examples(2, 0), ("x",), ("y",), {"x": {0: "batch"}, "y": {0: "batch"}},
                           sample_inputs=_examples)
