"""torch -> ONNX with a pinned opset, named tensors and dynamic axes, then onnx.checker.

Uses the torch.export-based exporter (the default since torch 2.9), and the TorchScript-based one
where that fails. An operator that an exporter names unsupported becomes one BuildError naming the
operator and the opset; any other failure of both, one naming each exporter's own first error.
"""
from __future__ import annotations

import contextlib
import io
import logging
import pathlib
import re
import warnings

from deployment_spec.builds.manifest import TensorSpec
from model_build.errors import BuildError
from model_build.recipes import ExportableModel

OPSET = 18  # TensorRT 8.6+ and ONNX Runtime 1.16+ (every supported Triton image) read opset 18

ONNX_TO_TRITON = {1: "TYPE_FP32", 2: "TYPE_UINT8", 3: "TYPE_INT8", 4: "TYPE_UINT16", 5: "TYPE_INT16",
                  6: "TYPE_INT32", 7: "TYPE_INT64", 8: "TYPE_STRING", 9: "TYPE_BOOL", 10: "TYPE_FP16",
                  11: "TYPE_FP64", 12: "TYPE_UINT32", 13: "TYPE_UINT64", 16: "TYPE_BF16"}
# How each exporter says it has no conversion for an operator (torch 2.13: torch/onnx/_internal/exporter/_core.py
# "No ONNX function found for {node.target!r}"; the TorchScript-based one's UnsupportedOperatorError). Nothing
# else names an operator: "Error when translating node ... target=torch.ops.aten.sub.Tensor" wraps any failure
# inside that node's translation, whose own error is the cause.
_OP_PATTERNS = (re.compile(r"No ONNX function found for <OpOverload\(op='([^']+)'"),
                re.compile(r"Exporting the operator '([^']+)' to ONNX opset version"))
_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # terminal colour codes


def export(name: str, made: ExportableModel, target: pathlib.Path, optimize: bool = True) -> None:
    """Writes ``target`` (model.onnx, weights inline); raises BuildError for unsupported operators or a bad graph."""
    import tempfile

    from model_build.onnx_graph import weights as onnx_weights

    with tempfile.TemporaryDirectory(prefix="export-", dir=target.parent) as scratch:
        graph = pathlib.Path(scratch) / target.name
        export_graph(name, made, graph, optimize)
        onnx_weights.inline(graph, target)


def export_graph(name: str, made: ExportableModel, graph: pathlib.Path, optimize: bool = True) -> str:
    """Writes ``graph`` with its weights in ``graph``.data beside it (onnx_weights): the exporter then writes
    the weights one by one instead of serializing the whole model in memory (4.7 x BERT-base's weights
    at its peak). Raises BuildError for unsupported operators or a bad graph.

    The torch.export-based exporter goes first; where it fails, the TorchScript-based one (``dynamo=False``)
    tries the same opset, names and dynamic axes; mixture-of-experts layers export in a form both take
    (onnx_graph/experts.py); a tensor inside that the exporter named like an output is renamed before the
    checker sees the graph (onnx_graph/output_names.py); a float64 Cos, Tan, Erf or Atan is computed in float32
    (onnx_graph/double_ops.py). Returns what was done otherwise than by default ("" when
    nothing): the caller logs it and the manifest records it; the serving-runtime verification judges either graph.
    """
    import onnx

    from model_build.onnx_graph.experts import exportable_experts

    with exportable_experts(made.module) as experts_note:
        fallback = _export_either(name, made, graph, optimize)
    fallback = "; ".join(note for note in (experts_note, fallback, *_rewrite(name, graph)) if note)
    try:
        # Given the path, the checker reads the graph and checks that every weight file is there.
        onnx.checker.check_model(str(graph), full_check=True)
    except onnx.checker.ValidationError as exc:
        raise BuildError(f"model {name}: the exported ONNX graph fails onnx.checker: {str(exc).splitlines()[0]}")
    return fallback


def _rewrite(name: str, graph: pathlib.Path) -> list[str]:
    """The exported graph's fixes, in one read and at most one write (the weights stay in their file, referenced
    by name): tensors inside the graph that have an output's name renamed (onnx_graph/output_names.py), float64
    operators no served ONNX Runtime has a kernel for computed in float32 (onnx_graph/double_ops.py). Says what
    was done, [] when nothing (the file is then left as the exporter wrote it)."""
    import onnx

    from model_build.onnx_graph import double_ops, output_names

    model = onnx.load(str(graph), load_external_data=False)
    notes = [f"the exporter named a tensor inside the graph like the output {output}: renamed it "
             f"{', '.join(new)} (ONNX names each tensor once)"
             for output, new in output_names.separate(name, model.graph).items()]
    narrowed = double_ops.narrow(model)
    if narrowed:
        notes.append(f"{', '.join(narrowed)} computed in float32 between Casts where the graph had them in float64 "
                     "(ONNX Runtime's CPU provider has no float64 kernel for them in the releases Triton serves)")
    if notes:
        onnx.save(model, str(graph))
    return notes


def _export_either(name: str, made: ExportableModel, graph: pathlib.Path, optimize: bool) -> str:
    """The torch.export-based exporter, else the TorchScript-based one; returns why the second was taken."""
    first = None
    try:
        _export(made, graph, dynamo=True, optimize=optimize)
    except Exception as exc:  # the exporters raise many types; each becomes one clear message
        first = exc
    if first is None:
        return ""
    _remove(graph)  # outside the handler: the second error's context is not the first one
    try:
        _export(made, graph, dynamo=False, optimize=optimize)
    except Exception as second:
        raise BuildError(_explain(name, first, second)) from None
    return (f"the torch.export-based exporter failed ({_cause(first)}); exported with the TorchScript-"
            "based exporter (torch.onnx.export dynamo=False) instead")


def _export(made: ExportableModel, graph: pathlib.Path, *, dynamo: bool, optimize: bool) -> None:
    import torch

    kwargs = {k: made.example_inputs[k] for k in made.input_names}
    options = dict(external_data=True, optimize=optimize) if dynamo else {}
    with _quiet():
        torch.onnx.export(made.module, (), str(graph), kwargs=kwargs, input_names=list(made.input_names),
                          output_names=list(made.output_names), dynamic_axes=dict(made.dynamic_axes) or None,
                          opset_version=OPSET, dynamo=dynamo, verbose=False, **options)


def _remove(graph: pathlib.Path) -> None:
    """What a failed export left: the graph and its weight files beside it."""
    for leftover in graph.parent.glob(f"{graph.name}*"):
        leftover.unlink()


def check_file(path: pathlib.Path, where: str) -> None:
    """A user-supplied .onnx file: parseable, then valid for onnx.checker."""
    import onnx

    try:
        onnx.load(str(path), load_external_data=False)
    except Exception:  # protobuf's DecodeError and friends: the bytes are not a ModelProto
        raise BuildError(f"{where}: {path} is not an ONNX model (it does not parse as an ONNX protobuf); export it "
                         "with torch.onnx.export or give the right file") from None
    try:
        onnx.checker.check_model(str(path), full_check=True)
    except onnx.checker.ValidationError as exc:
        raise BuildError(f"{where}: {path} fails onnx.checker: {str(exc).splitlines()[0]}") from None


def _explain(name: str, dynamo_error: BaseException, torchscript_error: BaseException) -> str:
    """Why neither exporter took the model: the operator only where an exporter named it unsupported,
    else each exporter's own first error."""
    for error in (dynamo_error, torchscript_error):
        text = "\n".join(str(e) for e in _chain(error))
        for pattern in _OP_PATTERNS:
            found = pattern.search(text)
            if found:
                return (f"model {name}: cannot export to ONNX: operator {found.group(1)} has no ONNX conversion at "
                        f"opset {OPSET}; replace it with supported torch ops, register a translation "
                        "(torch.onnx.export custom_translation_table), or serve the model with backend: pytorch")
    return (f"model {name}: torch.onnx.export failed with both exporters: the torch.export-based one "
            f"({_cause(dynamo_error)}) and the TorchScript-based one ({_cause(torchscript_error)}); change its "
            "forward() so one of them takes it, or serve the model with backend: pytorch if torch.jit.trace takes "
            "it (the TorchScript-based exporter traces it the same way before converting: its error says which "
            "failed)")


def _chain(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and len(chain) < 10:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    return chain


def _cause(exc: BaseException) -> str:
    """``Type: first line`` of the innermost error: torch.onnx wraps the exporter's own error in a coloured
    banner ("This is step 1/3 of exporting the model to ONNX. Next steps: ...")."""
    cause = _chain(exc)[-1]
    lines = [line.strip().removeprefix("- ") for line in _ANSI.sub("", str(cause)).splitlines() if line.strip()]
    first = lines[0] if lines else "(no message)"
    if first.endswith(":") and len(lines) > 1:  # a heading: the first item says what went wrong
        first = f"{first} {lines[1]}"
    # A printed tensor breaks the sentence over lines ("output 1 (1\n 1\n[ CPULongType{2} ]) of traced region
    # did not ..."): its lines join until the brackets close.
    for line in lines[1:12]:
        if first.count("(") + first.count("[") <= first.count(")") + first.count("]"):
            break
        first = f"{first} {line}"
    return f"{type(cause).__name__}: {first}"


@contextlib.contextmanager
def _quiet():
    """The exporter prints progress lines and warnings meant for debugging; keep the build log short."""
    loggers = [logging.getLogger(n) for n in ("torch.onnx", "torch.export", "torch._dynamo", "onnxscript")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def graph_io(path: pathlib.Path, max_batch_size: int, name: str) -> tuple[tuple[TensorSpec, ...], ...]:
    """Inputs and outputs of an ONNX file as config tensors (batch axis dropped when batching)."""
    from model_build.onnx_graph import weights as onnx_weights

    model = onnx_weights.load_graph(path)  # the graph only: a model's weights are not needed here
    initializers = {i.name for i in model.graph.initializer}
    inputs = [v for v in model.graph.input if v.name not in initializers]
    return (tuple(_tensor(v, max_batch_size, name) for v in inputs),
            tuple(_tensor(v, max_batch_size, name) for v in model.graph.output))


def _tensor(value, max_batch_size: int, name: str) -> TensorSpec:
    ttype = value.type.tensor_type
    dtype = ONNX_TO_TRITON.get(ttype.elem_type)
    if dtype is None:
        raise BuildError(f"model {name}: tensor {value.name} has ONNX element type {ttype.elem_type}, "
                         "which Triton cannot serve")
    dims = [d.dim_value if d.HasField("dim_value") else -1 for d in ttype.shape.dim]
    if max_batch_size > 0:
        if not dims or dims[0] not in (-1, 1):
            first = dims[0] if dims else "none"
            raise BuildError(f"model {name}: tensor {value.name} has shape {dims} with first dimension {first}, "
                             f"but max_batch_size {max_batch_size} needs a variable batch axis first; export with "
                             "a dynamic axis 0, or set max_batch_size: 0")
        if dims[0] == 1 and max_batch_size > 1:
            raise BuildError(f"model {name}: tensor {value.name} has a fixed batch dimension 1 (shape {dims}) but "
                             f"max_batch_size is {max_batch_size}; export with a dynamic axis 0, or set "
                             "max_batch_size: 1 or 0")
        dims = dims[1:]
    return TensorSpec(value.name, dtype, tuple(dims))
