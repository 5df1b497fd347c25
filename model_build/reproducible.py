"""Removes what ties an artifact's bytes to the build machine, so two checkouts build the same tarball.

torch.onnx's exporter writes its FX provenance into the graph (``pkg.torch.onnx.stack_trace``,
``pkg.torch.onnx.fx_node``, ... on every node and value, the ExportedProgram signature on the
graph); the stack traces hold absolute paths of the build's site-packages and recipe modules.
``torch.jit.save`` writes source ranges (``code/**.debug_pkl``) with the same paths. Neither
is read by ONNX Runtime or libtorch to run the model. Without this, a CI runner that checks out
to a new folder per run would change every S3 key and redeploy every endpoint.
"""
from __future__ import annotations

import pathlib
import shutil
import tempfile

DEBUG_SUFFIX = ".debug_pkl"


def strip_onnx(path: pathlib.Path) -> None:
    """Drops metadata_props and doc strings of the graph, its nodes, values and functions (in place)."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)  # external weights stay where they are
    changed = _clear(model.graph)
    for function in model.functions:
        changed |= _clear_nodes(function.node) | _clear_all(function)
    if model.doc_string:
        model.doc_string, changed = "", True
    if changed:
        onnx.save(model, str(path))


def _clear(graph) -> bool:
    changed = _clear_all(graph) | _clear_nodes(graph.node)
    for values in (graph.input, graph.output, graph.value_info, graph.initializer):
        for value in values:
            changed |= _clear_all(value)
    return changed


def _clear_nodes(nodes) -> bool:
    changed = False
    for node in nodes:
        changed |= _clear_all(node)
        for attribute in node.attribute:  # If/Loop/Scan bodies
            if attribute.HasField("g"):
                changed |= _clear(attribute.g)
            for graph in attribute.graphs:
                changed |= _clear(graph)
    return changed


def _clear_all(proto) -> bool:
    changed = False
    if hasattr(proto, "metadata_props") and len(proto.metadata_props):
        del proto.metadata_props[:]
        changed = True
    if getattr(proto, "doc_string", ""):
        proto.doc_string = ""
        changed = True
    return changed


def strip_torchscript(path: pathlib.Path) -> None:
    """Rewrites a TorchScript archive without its ``*.debug_pkl`` source-range records (in place).

    Uses torch's own archive reader and writer, which keep the record alignment libtorch expects;
    a module loads and runs without these records (it only loses Python line numbers in errors).
    """
    import torch

    reader = torch._C.PyTorchFileReader(str(path))
    records = [name for name in reader.get_all_records() if not name.endswith(DEBUG_SUFFIX)]
    with tempfile.TemporaryDirectory(prefix="ts-strip-", dir=path.parent) as scratch:
        # The archive's folder name inside the zip comes from the file name: keep it.
        out = pathlib.Path(scratch) / path.name
        writer = torch._C.PyTorchFileWriter(str(out))
        for name in sorted(records):
            if name in (".data/version", ".data/serialization_id", "version", "byteorder"):
                continue  # the writer adds these itself
            data = reader.get_record(name)
            writer.write_record(name, data, len(data))
        writer.write_end_of_file()
        del writer, reader
        shutil.move(str(out), str(path))


def host_paths(path: pathlib.Path, needles: tuple[str, ...]) -> list[str]:
    """Which of ``needles`` (e.g. the checkout's absolute path) occur in a file's bytes; for tests and checks."""
    data = path.read_bytes()
    if path.suffix == ".pt":
        import zipfile
        with zipfile.ZipFile(path) as archive:
            data = b"".join(archive.read(info) for info in archive.infolist())
    return [n for n in needles if n.encode() in data]
