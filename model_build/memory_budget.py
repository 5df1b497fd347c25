"""What building a model needs in memory, known before anything is built, and the refusal when it will not fit.

A build holds one model at a time (dispatch.build_model); its peak resident memory, side
processes included, stays within ``NEED_FACTOR`` × the model's fp32 weight bytes + ``NEED_BASE``
(benchmarks/build_cost.py measures it for every example: benchmarks/RESULTS.md, section 6). So
before the first model is built, the largest model that is about to be built is held against
the memory this machine has available now, and the build stops with the model's name and what it
needs instead of being killed by the kernel half way.

The weight bytes come from what exists before a build:

* a built-in recipe without ``weights``: the parameter count of its architecture config, counted
  on PyTorch's meta device (shapes only, no memory), × 4 bytes;
* a ``weights`` directory: its weight files, the safetensors headers read for their element counts
  (× 4 bytes, so a half-precision checkpoint counts as the fp32 model it becomes), other weight
  files (``.bin``, ``.pt``, ``.pth``) by their size;
* an ``onnx`` or ``torchscript`` source: the file's size (and an ONNX file's external data).

A user recipe (``module:function``) is unknown until it runs, and so is not checked.
"""
from __future__ import annotations

import dataclasses
import json
import pathlib
import struct
from typing import Iterable, Optional

from deployment_spec import Spec
from deployment_spec.sections.model import Backend, ModelSpec

NEED_FACTOR = 3
NEED_BASE = 1_500_000_000  # bytes: the interpreter, torch, transformers, onnx and ONNX Runtime themselves
FP32 = 4
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
# safetensors dtypes that are floating point (converted to fp32 by the build), with their element size.
FLOAT_DTYPES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1}
INT_SIZES = {"I64": 8, "U64": 8, "I32": 4, "U32": 4, "I16": 2, "U16": 2, "I8": 1, "U8": 1, "BOOL": 1}


@dataclasses.dataclass(frozen=True)
class Weights:
    model: str      # the spec's model name
    bytes: int      # fp32 weight bytes
    how: str        # where the number comes from, for messages and the benchmark table


def need_bytes(weight_bytes: int) -> int:
    """Peak memory a build of a model with these fp32 weight bytes may take, side processes included."""
    return NEED_FACTOR * weight_bytes + NEED_BASE


def weights_of(spec: Spec, model: ModelSpec) -> Optional[Weights]:
    """The model's fp32 weight bytes from its source, or None (ensembles, tokenizers, user recipes)."""
    source = model.source
    if source is None:
        return None
    if model.weights:
        folder = (spec.root / model.weights).resolve()
        if folder.is_dir():
            found = directory_weight_bytes(folder)
            return Weights(model.name, found, f"weights directory {model.weights}: weight files") if found else None
        return None  # the recipe reports the missing directory, with its fix
    if source.onnx or source.torchscript:
        path = (spec.root / (source.onnx or source.torchscript)).resolve()
        data = path.with_name(path.name + ".data")
        size = sum(p.stat().st_size for p in (path, data) if p.is_file())
        return Weights(model.name, size, f"{source.kind()} file size") if size else None
    if source.recipe:
        count = recipe_parameters(source.recipe)
        if count:
            return Weights(model.name, FP32 * count,
                           f"recipe {source.recipe}: {count:,} parameters from its architecture config")
    return None


def recipe_parameters(recipe: str) -> Optional[int]:
    """Parameters of a built-in recipe's architecture, counted on the meta device; None if it has none."""
    from model_build.recipes import builtin, python_recipes

    if recipe in builtin.TEXT or recipe in builtin.VISION:
        return builtin.parameter_count(recipe)
    if recipe in python_recipes.T5_SIZES:
        return python_recipes.parameter_count(recipe)
    return None


def directory_weight_bytes(folder: pathlib.Path) -> int:
    """fp32 bytes of the weight files in a checkpoint directory (see the module docstring)."""
    total = 0
    for path in sorted(folder.rglob("*")):
        if path.suffix == ".safetensors" and path.is_file():
            total += safetensors_fp32_bytes(path)
        elif path.suffix in WEIGHT_SUFFIXES and path.is_file():
            total += path.stat().st_size
    return total


def safetensors_fp32_bytes(path: pathlib.Path) -> int:
    """Floating tensors at 4 bytes per element, others at their own size, from the file's JSON header."""
    with path.open("rb") as fh:
        (length,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(length))
    total = 0
    for name, tensor in header.items():
        if name == "__metadata__":
            continue
        count = 1
        for dim in tensor["shape"]:
            count *= dim
        dtype = tensor["dtype"]
        total += count * (FP32 if dtype in FLOAT_DTYPES else INT_SIZES.get(dtype, FP32))
    return total


def largest(spec: Spec, models: Iterable[ModelSpec]) -> Optional[Weights]:
    found = [w for w in (weights_of(spec, m) for m in models) if w is not None]
    return max(found, key=lambda w: w.bytes, default=None)


def buildable_here(model: ModelSpec, toolchain) -> bool:
    """TensorRT models stop before their export on a machine without the tools, so they need nothing here."""
    return model.backend is not Backend.TENSORRT or toolchain().usable


def available_bytes() -> int:
    """Memory the kernel can give without swapping (MemAvailable)."""
    import psutil

    return int(psutil.virtual_memory().available)


def give_back() -> None:
    """Returns memory freed by Python objects to the system: a collection, then glibc's malloc_trim (Linux),
    which releases the free pages the allocator otherwise keeps for reuse (man 3 malloc_trim)."""
    import ctypes
    import ctypes.util
    import gc

    gc.collect()
    libc = ctypes.util.find_library("c")
    trim = getattr(ctypes.CDLL(libc), "malloc_trim", None) if libc else None
    if trim is not None:
        trim(0)


def refusal(weights: Weights, available: int) -> Optional[str]:
    """Why the build may not start (the model, what it needs, what there is, the fixes), or None if it fits."""
    need = need_bytes(weights.bytes)
    if need <= available:
        return None
    return (f"model {weights.model}: building it needs about {need / 1e9:.1f} GB of memory ({NEED_FACTOR} x its "
            f"{weights.bytes / 1e9:.2f} GB of fp32 weights + {NEED_BASE / 1e9:.1f} GB; {weights.how}), but this "
            f"machine has {available / 1e9:.1f} GB available; stop other jobs or build on a machine with more "
            "memory, build the other models with --model NAME, or pass --no-memory-check to try anyway")
