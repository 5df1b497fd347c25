"""Graph outputs whose name a tensor inside the exported graph already has.

The torch.export-based exporter names each tensor after the FX node that makes it (``aten.embedding`` ->
``embedding``: the token lookup of every BERT-like encoder), then renames the graph's outputs to the
recipe's ``output_names`` without looking at the names inside (torch/onnx/_internal/exporter/_ir_passes.py,
``rename_outputs``). A recipe whose output is called ``embedding`` then gets a graph in which two tensors
are called ``embedding``, and onnx.checker refuses it ("Graph must be in single static assignment (SSA)
form, however 'embedding' has been used as output names multiple times").

``separate`` gives the inner tensor a fresh name (``<name>__inner``) and points every node that reads it
there; the graph output keeps the recipe's name, which config.pbtxt and the clients use.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Iterator

from model_build.errors import BuildError

INNER_SUFFIX = "__inner"
BEFORE_NODES = -1  # the position of a graph input or an initializer: there before every node


@dataclasses.dataclass(frozen=True)
class _Definition:
    position: int   # index of the node that makes the tensor, or BEFORE_NODES
    slot: int       # which output of that node, or which initializer (-1: a graph input, never renamed)


def separate(model_name: str, graph: Any) -> dict[str, list[str]]:
    """Renames, in ``graph`` (an onnx GraphProto, changed in place), every tensor that has a graph output's
    name but is not that output. Returns {output name: the new names of the inner tensors}; {} when no name
    is used twice, and then ``graph`` is untouched."""
    renamed: dict[str, list[str]] = {}
    for output in graph.output:
        definitions = _definitions(graph, output.name)
        if len(definitions) < 2:
            continue  # the output alone has its name: nothing to do
        _refuse_graph_input(model_name, graph, output.name)
        renamed[output.name] = _rename_inner(model_name, graph, output.name, definitions)
    return renamed


def _definitions(graph: Any, name: str) -> list[_Definition]:
    """Where the top-level graph makes a tensor called ``name``, first to last: a graph input or an initializer
    (an older graph lists its initializers among its inputs too: one tensor), then node outputs."""
    found = [_Definition(BEFORE_NODES, slot) for slot, tensor in enumerate(graph.initializer) if tensor.name == name]
    if not found and any(value.name == name for value in graph.input):
        found.append(_Definition(BEFORE_NODES, -1))
    for position, node in enumerate(graph.node):
        found += [_Definition(position, slot) for slot, made in enumerate(node.output) if made == name]
    return found


def _refuse_graph_input(model_name: str, graph: Any, name: str) -> None:
    # A graph input is the model's interface, not ours to rename.
    if any(value.name == name for value in graph.input):
        raise BuildError(f"model {model_name}: the output {name} has the name of an input of the exported ONNX "
                         "graph (ONNX names each tensor once); rename the output in the recipe's output_names")


def _rename_inner(model_name: str, graph: Any, name: str, definitions: list[_Definition]) -> list[str]:
    """Every definition but the last is an inner tensor: the exporter writes the nodes in the order forward()
    computes them, and the output it names is what forward() ends with (were it otherwise, the ONNX Runtime
    check against eager PyTorch that follows the export would fail the model). Nodes are in topological order
    (ONNX requires it): a node between the first definition and the second reads the first, the only one made
    by then; a node after the second could mean either, and then no rename is safe."""
    first, second = definitions[0].position, definitions[1].position
    readers = [position for position in _readers(graph, name) if position > first]  # before: reads nothing made
    for position in readers:
        if position > second:
            reader = graph.node[position]
            raise BuildError(
                f"model {model_name}: the exported ONNX graph has a tensor inside named like the output {name}, "
                f"and node {reader.name or reader.op_type} reads {name} after both are made, so which one it reads "
                "cannot be told (ONNX names each tensor once); rename the output in the recipe's output_names to "
                f"a name no tensor inside the model has (e.g. {name}_output)")
    taken = _all_names(graph)
    fresh = []
    for definition in definitions[:-1]:
        fresh.append(_fresh(name, taken))
        taken.add(fresh[-1])
        _rename_definition(graph, definition, fresh[-1])
    for position in readers:  # every reader lies between the first and the second definition
        _rename_reads(graph.node[position], name, fresh[0])
    _rename_value_info(graph, name, fresh)
    return fresh


def _readers(graph: Any, name: str) -> Iterator[int]:
    """Positions of the top-level nodes that read ``name``, themselves or in a subgraph (If/Loop/Scan bodies
    read the enclosing graph's tensors by name)."""
    for position, node in enumerate(graph.node):
        if name in node.input or any(name in _subgraph_reads(sub) for sub in _subgraphs(node)):
            yield position


def _subgraphs(node: Any) -> Iterator[Any]:
    for attribute in node.attribute:
        if attribute.HasField("g"):
            yield attribute.g
        yield from attribute.graphs


def _subgraph_reads(graph: Any) -> set[str]:
    reads = {value.name for value in graph.output}
    for node in graph.node:
        reads.update(node.input)
        for sub in _subgraphs(node):
            reads |= _subgraph_reads(sub)
    return reads


def _all_names(graph: Any) -> set[str]:
    names = {v.name for v in (*graph.input, *graph.output, *graph.value_info)}
    names.update(tensor.name for tensor in graph.initializer)
    for node in graph.node:
        names.update(node.input)
        names.update(node.output)
        for sub in _subgraphs(node):
            names |= _all_names(sub)
    return names


def _fresh(name: str, taken: set[str]) -> str:
    candidate, count = f"{name}{INNER_SUFFIX}", 1
    while candidate in taken:
        count += 1
        candidate = f"{name}{INNER_SUFFIX}_{count}"
    return candidate


def _rename_definition(graph: Any, definition: _Definition, new: str) -> None:
    if definition.position == BEFORE_NODES:
        graph.initializer[definition.slot].name = new
    else:
        graph.node[definition.position].output[definition.slot] = new


def _rename_reads(node: Any, old: str, new: str) -> None:
    for index, read in enumerate(node.input):
        if read == old:
            node.input[index] = new
    for sub in _subgraphs(node):
        _rename_in_subgraph(sub, old, new)


def _rename_in_subgraph(graph: Any, old: str, new: str) -> None:
    for value in graph.output:
        if value.name == old:
            value.name = new
    for node in graph.node:
        _rename_reads(node, old, new)


def _rename_value_info(graph: Any, name: str, fresh: list[str]) -> None:
    """The shapes recorded for the inner tensors follow them. Graph outputs carry their own type in
    graph.output, so an entry under the name describes an inner tensor; when there are several inner
    tensors and not one entry each, which entry is whose cannot be told: the entries (optional hints) go."""
    entries = [index for index, value in enumerate(graph.value_info) if value.name == name]
    if len(entries) == len(fresh):
        for index, new in zip(entries, fresh):
            graph.value_info[index].name = new
        return
    for index in reversed(entries):
        del graph.value_info[index]
