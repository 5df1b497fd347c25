"""A model the user brings as a file (``source: {onnx: ...}`` or ``{torchscript: ...}``): its tensors and its check.

Tensors. An ONNX graph names and types its own: they are read from it and, where the spec
declares them too (``models.<m>.inputs`` / ``outputs``), checked against it. A TorchScript file
holds none: the spec declares them, unless the file carries the ``triton_io.json`` extra file the
build's own traces write. Every message names the user's file, never the build's scratch copy.

Check. The file runs on inputs made from those tensors (or on the spec's ``samples``) at the
spec's sizes, in the image's runtime and in this machine's (model_build/verification/file_check.py);
each backend runs its own kind (model_build/backends/onnxruntime/given_file.py,
model_build/backends/pytorch/given_file.py).
"""
from __future__ import annotations

import pathlib
import shutil
from typing import Any, Sequence

from deployment_spec.builds.manifest import TensorSpec
from deployment_spec.sections.model import ModelSpec
from deployment_spec.sections.tensors import INDEXED_NAME, position
from model_build.build_context import BuildContext
from model_build.errors import BuildError
from model_build.recipes.contract import ExportableModel

# Variable sizes (-1) without a sequence_length: long enough for a convolution stack's downsampling.
DEFAULT_LENGTH = 128
EXAMPLE_BATCH = 2
# Integer inputs: token ids need a vocabulary the file does not tell, and 0..99 exist in every real
# one; every other integer input (token types, masks, flags) takes 0 and 1. Samples give real values.
ID_HIGH, INT_HIGH, BYTE_HIGH = 100, 2, 256
MASK = "attention_mask"  # Hugging Face's name, as for recipes (verification/cases.py)


def source_path(root: pathlib.Path, model: ModelSpec) -> pathlib.Path:
    kind = model.source.kind()
    src = (root / getattr(model.source, kind)).resolve()
    if not src.is_file():
        what = "an .onnx file" if kind == "onnx" else "a TorchScript file"
        raise BuildError(f"models.{model.name}.source.{kind}: {src} does not exist; give the path of {what}, "
                         "relative to the spec's folder")
    return src


def onnx_file(ctx: BuildContext, model: ModelSpec, target: pathlib.Path) -> tuple[
        pathlib.Path, tuple[TensorSpec, ...], tuple[TensorSpec, ...]]:
    """``target``: the user's ONNX file, checked, self-contained and stripped; returns (the user's file,
    inputs, outputs), the tensors the graph has, checked against the spec's where it declares them."""
    from model_build import reproducible
    from model_build.onnx_graph import export as onnx_export

    src = source_path(ctx.spec.root, model)
    onnx_export.check_file(src, f"models.{model.name}.source.onnx")
    _copy_onnx(model, src, target)
    reproducible.strip_onnx(target)
    try:
        graph_inputs, graph_outputs = onnx_export.graph_io(target, model.max_batch_size, model.name)
    except BuildError as exc:  # name the user's file, not the model alone
        raise BuildError(f"models.{model.name}.source.onnx: {src}: {str(exc).removeprefix(f'model {model.name}: ')}")
    return src, _declared_or_graph(model, "inputs", graph_inputs, src), \
        _declared_or_graph(model, "outputs", graph_outputs, src)


def _copy_onnx(model: ModelSpec, src: pathlib.Path, target: pathlib.Path) -> None:
    """One self-contained model.onnx: weights a file keeps beside it (``<name>.onnx.data``, what
    torch.onnx.export writes by default) are read in, as long as the whole fits one protobuf."""
    import onnx

    from model_build.onnx_graph.weights import PROTOBUF_LIMIT

    graph = onnx.load(str(src), load_external_data=False)
    external = [t for t in graph.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    if not external:
        shutil.copyfile(src, target)
        return
    onnx.load_external_data_for_model(graph, str(src.parent))
    size = graph.ByteSize()
    if size > PROTOBUF_LIMIT:
        raise BuildError(f"models.{model.name}.source.onnx: {src} keeps {size / 2**30:.1f} GiB of weights in external "
                         "data files; the build ships one model.onnx of at most 2 GB (the protobuf limit): serve it "
                         "as a recipe (the build writes external data itself), or with backend: tensorrt")
    onnx.save(graph, str(target))


def exportable(model: ModelSpec, inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec],
               root: pathlib.Path) -> ExportableModel:
    """What the serving check needs of a model file, as the recipes' contract: no torch module, inputs
    made up from the tensors (or the spec's samples), dynamic axes where the dims are -1."""
    from model_build import samples

    ordered_in, ordered_out = _in_call_order(inputs), _in_call_order(outputs)
    first = 1 if model.max_batch_size > 0 else 0  # dims exclude the batch axis when batching
    axes = {t.name: {**({0: "batch"} if first else {}),
                     **{first + axis: f"dim{first + axis}" for axis, d in enumerate(t.dims) if d == -1}}
            for t in (*ordered_in, *ordered_out)}
    mask = next((t.name for t in ordered_in if _stem(t.name) == MASK), None)
    names_in, names_out = tuple(t.name for t in ordered_in), tuple(t.name for t in ordered_out)
    if model.samples:
        real = samples.load(model, root, ordered_in)
        return ExportableModel(None, real, names_in, names_out, axes, mask_input=mask, agreement_inputs=real,
                               agreement_from=f"the samples in {samples.path_of(model, root).name}")
    sampler = _sampler(model, ordered_in)
    return ExportableModel(None, sampler(EXAMPLE_BATCH, 0), names_in, names_out, axes, sampler, mask_input=mask)


def _declared_or_graph(model: ModelSpec, key: str, graph: Sequence[TensorSpec],
                       src: pathlib.Path) -> tuple[TensorSpec, ...]:
    declared = getattr(model, key)
    if not declared:
        return tuple(graph)
    where, found = f"models.{model.name}.{key}", {t.name: t for t in graph}
    for index, tensor in enumerate(declared):
        have = found.get(tensor.name)
        if have is None:
            raise BuildError(f"{where}[{index}].name: {tensor.name!r} is not an {key[:-1]} of {src}; its {key} are "
                             f"{list(found)}")
        if tensor.data_type.value != have.data_type:
            raise BuildError(f"{where}[{index}].data_type: {tensor.data_type.value}, but {src} has {have.data_type} "
                             f"for {tensor.name}; declare {have.data_type}")
        if len(tensor.dims) != len(have.dims) or any(g != -1 and d != g for d, g in zip(tensor.dims, have.dims)):
            raise BuildError(f"{where}[{index}].dims: {list(tensor.dims)}, but {src} has {list(have.dims)} for "
                             f"{tensor.name} (without the batch axis; -1: any size); declare dims the graph takes, "
                             "e.g. its own")
    missing = [name for name in found if name not in {t.name for t in declared}]
    if missing:
        raise BuildError(f"{where}: {src} has {key} {missing} the spec does not declare; declare every {key[:-1]} "
                         "of the graph, or none (they are then read from the graph)")
    return tuple(declared_tensor(t) for t in declared)


def declared_tensor(tensor) -> TensorSpec:
    """A tensor the spec declares, as the manifest and config.pbtxt write it."""
    return TensorSpec(tensor.name, tensor.data_type.value, tuple(tensor.dims))


def _in_call_order(tensors: Sequence[TensorSpec]) -> list[TensorSpec]:
    """TorchScript tensors by their ``__<index>`` (the position in forward()); ONNX ones as listed."""
    if tensors and all(INDEXED_NAME.fullmatch(t.name) for t in tensors):
        return sorted(tensors, key=lambda t: position(t.name))
    return list(tensors)


def _stem(name: str) -> str:
    found = INDEXED_NAME.fullmatch(name)
    return found.group(1) if found else name


def _sampler(model: ModelSpec, inputs: Sequence[TensorSpec]):
    """``f(batch, seed)`` -> random inputs of the declared types and dims; -1 dims take sequence_length."""
    from model_build.tensor_types import TRITON_TO_NUMPY

    length = model.sequence_length or DEFAULT_LENGTH
    unsupported = [t for t in inputs if TRITON_TO_NUMPY.get(t.data_type) in (None, "bfloat16")]
    if unsupported:
        raise BuildError(f"models.{model.name}: input {unsupported[0].name} is {unsupported[0].data_type}, which the "
                         "build cannot make up inputs of for its check; give real ones: samples: <file>.npz (arrays "
                         "named like the inputs, batch first)")

    def sample(batch: int, seed: int) -> dict[str, Any]:
        import torch

        generator = torch.Generator().manual_seed(seed)
        out = {}
        for tensor in inputs:
            shape = ([batch] if model.max_batch_size > 0 else []) + [length if d == -1 else d for d in tensor.dims]
            out[tensor.name] = _random(tensor, shape, generator)
        return out

    return sample


def _random(tensor: TensorSpec, shape: list[int], generator) -> Any:
    import torch

    from model_build.tensor_types import TRITON_TO_NUMPY

    dtype = getattr(torch, TRITON_TO_NUMPY[tensor.data_type])
    if dtype.is_floating_point:
        return torch.randn(shape, generator=generator).to(dtype)
    if dtype is torch.bool:
        return torch.randint(0, 2, shape, generator=generator).bool()
    high = BYTE_HIGH if dtype is torch.uint8 else ID_HIGH if _stem(tensor.name).endswith("input_ids") else INT_HIGH
    return torch.randint(0, high, shape, generator=generator, dtype=dtype)
