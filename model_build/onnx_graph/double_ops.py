"""Operators computed in float64 that the served ONNX Runtime has no float64 kernel for.

Some checkpoints compute their sine-cosine position embeddings in float64 (RT-DETR v2, D-FINE and DEIMv2 in
transformers 5.23.0: ``torch.arange(..., dtype=torch.float64)`` before ``.cos()``), and the exporter keeps the
dtype. ONNX Runtime's CPU provider registers ``Cos`` for float only through 1.24 (the Triton releases this project
serves; 1.31 has double too), and ``Tan``, ``Erf`` and ``Atan`` for float only in 1.31 still
(onnxruntime/core/providers/cpu/cpu_execution_provider.cc). Such a graph loads nowhere we serve
("Could not find an implementation for Cos(7) node with name ...").

``narrow`` computes each such node in float32 between two Casts (double -> float -> op -> double): the rest
of the graph keeps its types, and the value differs from the float64 one by float32 rounding (about 1e-7
relative), which the verification against torch then judges like any other difference.
"""
from __future__ import annotations

from typing import Any

# Probed with a one-node graph per unary operator, double in and out, on onnxruntime 1.21.0, 1.23.0 and 1.24.4
# (Cos, Tan, Erf, Atan found no kernel) and 1.31.1 (Tan, Erf, Atan).
NO_DOUBLE_KERNEL = ("Cos", "Tan", "Erf", "Atan")
_DOUBLE = 11  # onnx.TensorProto.DOUBLE
_FLOAT = 1    # onnx.TensorProto.FLOAT


def narrow(model: Any) -> list[str]:
    """Rewrites, in ``model`` (an onnx ModelProto, changed in place), every top-level node of NO_DOUBLE_KERNEL
    whose input is float64 to compute in float32. Returns the operators rewritten, sorted, once each ([] when
    none, and then ``model`` is untouched)."""
    import onnx

    doubles = _double_tensors(model)
    graph = model.graph
    nodes: list[Any] = []
    narrowed: set[str] = set()
    for node in graph.node:
        if node.domain in ("", "ai.onnx") and node.op_type in NO_DOUBLE_KERNEL and node.input[0] in doubles:
            narrowed.add(node.op_type)
            source, result = node.input[0], node.output[0]
            node_name = node.name or f"{node.op_type}_{len(nodes)}"
            as_float, float_result = f"{source}__as_float32_{node_name}", f"{result}__float32"
            nodes.append(onnx.helper.make_node("Cast", [source], [as_float], to=_FLOAT,
                                               name=f"{node_name}__to_float32"))
            node.input[0] = as_float
            node.output[0] = float_result
            nodes.append(node)
            nodes.append(onnx.helper.make_node("Cast", [float_result], [result], to=_DOUBLE,
                                               name=f"{node_name}__to_float64"))
        else:
            nodes.append(node)
    if narrowed:
        del graph.node[:]
        graph.node.extend(nodes)
    return sorted(narrowed)


def _double_tensors(model: Any) -> set[str]:
    """The names of the float64 tensors of the top-level graph, from shape inference (types only: the weights
    may stay in their external file)."""
    import onnx

    inferred = onnx.shape_inference.infer_shapes(model, data_prop=False)
    graph = inferred.graph
    typed = [*graph.input, *graph.value_info, *graph.output]
    names = {value.name for value in typed if value.type.tensor_type.elem_type == _DOUBLE}
    names |= {tensor.name for tensor in graph.initializer if tensor.data_type == _DOUBLE}
    for node in graph.node:  # a Constant's type is its attribute's, which inference may not list
        if node.op_type == "Constant":
            names |= {node.output[0] for a in node.attribute if a.name == "value" and a.t.data_type == _DOUBLE}
    return names
