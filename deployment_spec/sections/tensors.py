"""A model's tensors as the spec declares them (``models.<m>.inputs`` / ``outputs``), in Triton's own terms.

``name``, ``data_type`` and ``dims`` are the fields of a config.pbtxt ``input`` / ``output``
(server ``docs/user_guide/model_configuration.md``, "Inputs and Outputs"): ``dims`` exclude the
batch axis when ``max_batch_size`` > 0, and -1 marks a variable size.

A TorchScript file carries no tensor names, types or shapes, so the pytorch backend addresses its
tensors by position. This project names them ``<name>__<index>`` (``INPUT__0``, ``OUTPUT__1``),
the convention every pytorch backend release reads for inputs and outputs alike (server
``docs/user_guide/model_configuration.md`` on branch r25.09, "Special Conventions for PyTorch
Backend"; pytorch_backend ``src/libtorch.cc``, ``GetNamingConvention``, branch r25.09). The
other conventions the backend accepts (inputs named like forward()'s arguments, or strict config
order) are not taken: the first does not hold for outputs, the second silently depends on the
order the spec lists them in.

Standard library only.
"""
from __future__ import annotations

import dataclasses
import enum
import re

from deployment_spec.parsing.errors import Problem, describe
from deployment_spec.parsing.parse import meta

INDEXED_NAME = re.compile(r"(.+)__(\d+)")
NAMING_HELP = "<name>__<index> (the pytorch backend's naming convention, e.g. INPUT__0, OUTPUT__1)"
# Where tensors may be declared, and what they mean there.
FILE_SOURCES = ("onnx", "torchscript")


class DataType(str, enum.Enum):
    """Triton's tensor data types (model_config.proto ``DataType``; TYPE_STRING is BYTES on the wire)."""

    BOOL = "TYPE_BOOL"
    UINT8 = "TYPE_UINT8"
    UINT16 = "TYPE_UINT16"
    UINT32 = "TYPE_UINT32"
    UINT64 = "TYPE_UINT64"
    INT8 = "TYPE_INT8"
    INT16 = "TYPE_INT16"
    INT32 = "TYPE_INT32"
    INT64 = "TYPE_INT64"
    FP16 = "TYPE_FP16"
    FP32 = "TYPE_FP32"
    FP64 = "TYPE_FP64"
    BF16 = "TYPE_BF16"
    STRING = "TYPE_STRING"


@dataclasses.dataclass(frozen=True)
class Tensor:
    """One input or output: ``{name: INPUT__0, data_type: TYPE_FP32, dims: [3, 224, 224]}``."""

    name: str = dataclasses.field(metadata=meta(help="the tensor's name, as clients send it"))
    data_type: DataType = dataclasses.field(metadata=meta(help="a Triton data type, e.g. TYPE_FP32"))
    dims: tuple[int, ...] = dataclasses.field(metadata=meta(
        help="the shape without the batch axis (max_batch_size > 0), -1 for a variable size"))

    def problems(self, path: str) -> list[Problem]:
        bad = [d for d in self.dims if d < -1 or d == 0]
        if bad:
            return [Problem(f"{path}.dims", str(list(self.dims)), "sizes >= 1, or -1 for a variable size",
                            f"replace {bad[0]}")]
        return []


def declaration_problems(path: str, source_kind: str, backend: str, inputs: tuple[Tensor, ...],
                         outputs: tuple[Tensor, ...], max_batch_size: int) -> list[Problem]:
    """Cross-field rules of ``models.<m>.inputs`` / ``outputs`` (``source_kind``: recipe, onnx, ...)."""
    if not inputs and not outputs:
        return []
    if source_kind not in FILE_SOURCES:
        return [Problem(f"{path}.inputs" if inputs else f"{path}.outputs", f"tensors with a {source_kind} source",
                        "inputs / outputs only for an onnx or torchscript source (a recipe names its tensors, a "
                        "python_dir has its config.pbtxt)", "remove inputs and outputs")]
    out: list[Problem] = []
    for key, tensors in (("inputs", inputs), ("outputs", outputs)):
        if not tensors:
            out.append(Problem(f"{path}.{key}", "nothing", f"every {key[:-1]} when the other side is declared",
                               f"declare {key} too (name, data_type, dims)"))
        names = [t.name for t in tensors]
        for index, tensor in enumerate(tensors):
            where = f"{path}.{key}[{index}]"
            if names.index(tensor.name) != index:
                out.append(Problem(f"{where}.name", describe(tensor.name), f"a name unique among the {key}",
                                   "rename one of them"))
            if not tensor.dims and max_batch_size == 0:
                out.append(Problem(f"{where}.dims", "[]", "at least one dimension when max_batch_size is 0 (the dims "
                                   "are then the full shape)", "give the full shape, or set max_batch_size"))
        if source_kind == "torchscript" and backend == "pytorch":
            out += _indexed(f"{path}.{key}", tensors)
    return out


def position(name: str) -> int:
    """The position a ``<name>__<index>`` tensor has in forward()'s arguments or results."""
    match = INDEXED_NAME.fullmatch(name)
    if match is None:
        raise ValueError(f"{name!r} is not a <name>__<index> tensor name (the spec check refuses it first)")
    return int(match.group(2))


def _indexed(path: str, tensors: tuple[Tensor, ...]) -> list[Problem]:
    out = []
    for index, tensor in enumerate(tensors):
        if not INDEXED_NAME.fullmatch(tensor.name):
            stem = re.sub(r"\W", "_", tensor.name) or "TENSOR"
            out.append(Problem(f"{path}[{index}].name", describe(tensor.name), NAMING_HELP,
                               f"name it {stem}__{index} if it is the {_ordinal(index)} "
                               f"{'argument' if path.endswith('inputs') else 'result'} of forward()"))
    if out:
        return out
    indices = sorted(position(t.name) for t in tensors)
    if indices != list(range(len(tensors))):
        return [Problem(path, f"indices {indices}", f"each of 0..{len(tensors) - 1} once (one per position of "
                        "forward()'s arguments or results)", "number the names by position, from 0")]
    return []


def _ordinal(index: int) -> str:
    return {0: "first", 1: "second", 2: "third"}.get(index, f"{index + 1}th")
