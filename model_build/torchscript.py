"""torch.jit.trace for backend pytorch (``pytorch_libtorch``).

TorchScript files carry no tensor names or shapes, so the builder stores them next to the code
as an extra file (``triton_io.json``) and names the config tensors ``<name>__<index>``, the
naming convention every PyTorch backend release accepts. A user-supplied TorchScript source
must carry the same extra file.
"""
from __future__ import annotations

import json
import pathlib
import warnings

from deployment_spec.manifest import TensorSpec
from model_build.errors import BuildError
from model_build.recipes import ExportableModel

IO_FILE = "triton_io.json"
TORCH_TO_TRITON = {"float32": "TYPE_FP32", "float16": "TYPE_FP16", "bfloat16": "TYPE_BF16", "float64": "TYPE_FP64",
                   "int64": "TYPE_INT64", "int32": "TYPE_INT32", "int16": "TYPE_INT16", "int8": "TYPE_INT8",
                   "uint8": "TYPE_UINT8", "bool": "TYPE_BOOL"}


def trace(name: str, made: ExportableModel, target: pathlib.Path, max_batch_size: int):
    """Traces, saves ``target`` (model.pt) with its I/O description; returns the traced module."""
    import torch

    args = tuple(made.example_inputs[k] for k in made.input_names)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # TracerWarnings are expected for transformer masks
        try:
            traced = torch.jit.trace(made.module, args, check_trace=False)
        except Exception as exc:
            raise BuildError(f"model {name}: torch.jit.trace failed ({type(exc).__name__}: "
                             f"{str(exc).splitlines()[0] if str(exc) else ''})") from None
        outputs = made.module(**made.example_inputs)
    outputs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    io = {"inputs": [_describe(f"{n}__{i}", made.example_inputs[n], made.dynamic_axes.get(n, {}), max_batch_size)
                     for i, n in enumerate(made.input_names)],
          "outputs": [_describe(f"{n}__{i}", t, made.dynamic_axes.get(n, {}), max_batch_size)
                      for i, (n, t) in enumerate(zip(made.output_names, outputs))]}
    torch.jit.save(traced, str(target), _extra_files={IO_FILE: json.dumps(io, sort_keys=True)})
    return traced


def read_io(name: str, path: pathlib.Path) -> tuple[tuple[TensorSpec, ...], tuple[TensorSpec, ...]]:
    import torch

    extra = {IO_FILE: ""}
    torch.jit.load(str(path), map_location="cpu", _extra_files=extra)
    if not extra[IO_FILE]:
        raise BuildError(f"model {name}: TorchScript file {path} has no {IO_FILE} describing its tensors; save it "
                         f"with torch.jit.save(module, path, _extra_files={{'{IO_FILE}': json.dumps({{'inputs': "
                         "[{'name': 'INPUT__0', 'data_type': 'TYPE_FP32', 'dims': [3, 224, 224]}], 'outputs': "
                         "[...]})}) or use a recipe")
    io = json.loads(extra[IO_FILE])
    return (tuple(TensorSpec(t["name"], t["data_type"], tuple(t["dims"])) for t in io["inputs"]),
            tuple(TensorSpec(t["name"], t["data_type"], tuple(t["dims"])) for t in io["outputs"]))


def _describe(name: str, tensor, axes, max_batch_size: int) -> dict:
    dtype = str(tensor.dtype).replace("torch.", "")
    dims = [-1 if i in axes else int(s) for i, s in enumerate(tensor.shape)]
    if max_batch_size > 0:
        dims = dims[1:]
    return {"name": name, "data_type": TORCH_TO_TRITON[dtype], "dims": dims}
