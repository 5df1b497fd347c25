"""torch.jit.trace for backend pytorch (``pytorch_libtorch``).

TorchScript files carry no tensor names or shapes, so the builder stores them next to the code
as an extra file (``triton_io.json``) and names the config tensors ``<name>__<index>``, the
naming convention every PyTorch backend release accepts. A user's TorchScript source declares
its tensors in the spec instead (model_build/given_files.py); a file with that extra file needs none.

Tracing records ``x.device`` as a constant: a graph traced on the CPU holds
``prim::Constant[value="cpu"]`` feeding ``aten::to`` / ``aten::arange`` (transformers' mask code),
and fails on every call once the pytorch backend loads it onto a GPU ("attn_bias is on cpu,
different from other tensors on cuda:0"). ``make_device_agnostic`` replaces each such constant
with ``prim::device`` of the graph's first tensor input, so the graph runs where its inputs are.
"""
from __future__ import annotations

import json
import pathlib
import warnings
from typing import Optional

from deployment_spec.builds.manifest import TensorSpec
from model_build import reproducible
from model_build.backends.pytorch import trace_failures
from model_build.errors import BuildError
from model_build.tensor_types import TORCH_TO_TRITON
from model_build.recipes.contract import ExportableModel

IO_FILE = "triton_io.json"


def trace(name: str, made: ExportableModel, target: pathlib.Path, max_batch_size: int):
    """Traces, makes the graph device-agnostic, saves ``target`` (model.pt, no host paths) with its
    I/O description; returns the traced module."""
    import torch

    args = tuple(made.example_inputs[k] for k in made.input_names)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # TracerWarnings are expected for transformer masks
        try:
            traced = torch.jit.trace(made.module, args, check_trace=False)
        except Exception as exc:
            raise BuildError(f"model {name}: torch.jit.trace failed ({trace_failures.one_line(exc)})") from None
        outputs = made.module(**made.example_inputs)
    outputs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    io = {"inputs": [_describe(f"{n}__{i}", made.example_inputs[n], made.dynamic_axes.get(n, {}), max_batch_size)
                     for i, n in enumerate(made.input_names)],
          "outputs": [_describe(f"{n}__{i}", t, made.dynamic_axes.get(n, {}), max_batch_size)
                      for i, (n, t) in enumerate(zip(made.output_names, outputs))]}
    make_device_agnostic(name, traced)
    torch.jit.save(traced, str(target), _extra_files={IO_FILE: json.dumps(io, sort_keys=True)})
    reproducible.strip_torchscript(target)
    return traced


def device_constants(module) -> list[tuple[str, str, tuple[str, ...]]]:
    """(submodule, device, ops using it) for every device constant in the module's method graphs."""
    found = []
    for path, graph in _graphs(module):
        for node in graph.findAllNodes("prim::Constant", True):
            if node.output().type().kind() == "DeviceObjType":
                users = tuple(sorted({use.user.kind() for use in node.output().uses()}))
                found.append((path or "(top level)", node.s("value"), users))
    return found


def make_device_agnostic(name: str, module) -> int:
    """Replaces every device constant with the device of the graph's first tensor input; returns how many."""
    replaced = 0
    for path, graph in _graphs(module):
        constants = [n for n in graph.findAllNodes("prim::Constant", True)
                     if n.output().type().kind() == "DeviceObjType"]
        if not constants:
            continue
        tensor_input = next((i for i in graph.inputs() if i.type().kind() == "TensorType"), None)
        if tensor_input is None:
            raise BuildError(f"model {name}: the traced graph of {path or 'the model'} fixes a device "
                             f"({constants[0].s('value')}) but has no tensor input to take the device from; "
                             "pass a tensor to that submodule, or serve the model with backend: onnxruntime")
        for constant in constants:
            device = graph.create("prim::device", [tensor_input])
            device.output().setType(constant.output().type())
            device.insertBefore(constant)
            constant.output().replaceAllUsesWith(device.output())
            constant.destroy()
            replaced += 1
    return replaced


def check_devices(name: str, path: pathlib.Path, serving_devices: set[str], shown: Optional[pathlib.Path] = None) -> None:
    """Refuses a TorchScript file whose graph fixes a device other than the one its instances run on
    (``shown``: the user's file that ``path`` is a copy of, named in the message)."""
    import torch

    module = torch.jit.load(str(path), map_location="cpu")
    for where, device, users in device_constants(module):
        kind = device.split(":")[0]
        if serving_devices and serving_devices != {kind}:
            wanted = " and ".join(sorted(serving_devices))
            raise BuildError(
                f"model {name}: {(shown or path).name} fixes the device '{device}' in {where} (used by {', '.join(users)}), "
                f"but its instances run on {wanted}: every call would fail with tensors on two devices; trace it "
                "on that device, build it from a recipe (the build makes traced graphs device-agnostic), or set "
                "its instance_groups kind to match")


def _graphs(module):
    for path, sub in module.named_modules():
        methods = sub._c._method_names() if hasattr(sub, "_c") else []
        for method in methods:
            yield path, sub._c._get_method(method).graph


def read_io(path: pathlib.Path) -> Optional[tuple[tuple[TensorSpec, ...], tuple[TensorSpec, ...]]]:
    """The tensors the file's ``triton_io.json`` extra file describes (the build's traces write one), or None."""
    import torch

    extra = {IO_FILE: ""}
    torch.jit.load(str(path), map_location="cpu", _extra_files=extra)
    if not extra[IO_FILE]:
        return None
    io = json.loads(extra[IO_FILE])
    return (tuple(TensorSpec(t["name"], t["data_type"], tuple(t["dims"])) for t in io["inputs"]),
            tuple(TensorSpec(t["name"], t["data_type"], tuple(t["dims"])) for t in io["outputs"]))


def forward_signature(path: pathlib.Path) -> tuple[list[str], Optional[int]]:
    """forward()'s argument names (without self) and how many tensors it returns (None: not tensors)."""
    import torch

    schema = torch.jit.load(str(path), map_location="cpu")._c._get_method("forward").schema
    results = None
    if len(schema.returns) == 1:
        kind = schema.returns[0].type
        if kind.kind() == "TensorType":
            results = 1
        elif kind.kind() == "TupleType" and all(e.kind() == "TensorType" for e in kind.elements()):
            results = len(kind.elements())
    return [argument.name for argument in schema.arguments[1:]], results


def _describe(name: str, tensor, axes, max_batch_size: int) -> dict:
    dtype = str(tensor.dtype).replace("torch.", "")
    dims = [-1 if i in axes else int(s) for i, s in enumerate(tensor.shape)]
    if max_batch_size > 0:
        dims = dims[1:]
    return {"name": name, "data_type": TORCH_TO_TRITON[dtype], "dims": dims}
