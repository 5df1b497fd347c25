"""ONNX graphs rewritten while their weights stay on disk, and the inline files the build ships.

An ONNX model can keep its large tensors in a file beside the graph ("external data",
https://onnx.ai/onnx/repo-docs/ExternalData.html): each initializer then holds only its name,
shape, type and a (file, offset, length) reference. The build exports and rewrites graphs in that
form, so the exporter, the fusers and their shape inference copy graphs of a few MB instead of the
weights (BERT-base's exporter and fusers held 5 to 7 copies of its weights at once); the weights are
read when something needs their values, and once more when the result is written inline.

``inline`` writes the bytes a model saved from memory would have: every tensor's data in the graph,
and no ``data_location`` field (onnx's loader sets it to DEFAULT explicitly, which adds bytes).
"""
from __future__ import annotations

import contextlib
import itertools
import os
import pathlib
import shutil
from typing import Iterator

PROTOBUF_LIMIT = 2_000_000_000  # a protobuf message cannot exceed 2 GB: bigger models keep external data
INLINE_BELOW = 1024             # tensors smaller than this stay in the graph (shapes, scalars the fusers read)

# Protobuf writes a message's fields in field-number order (the wire format the encoder produces for
# known fields: https://protobuf.dev/programming-guides/encoding/#order), so a model serializes as
# ModelProto fields 1-6, the graph (field 7: GraphProto fields 1-2, the initializers (field 5),
# fields 10-16), then ModelProto fields 8 and up. Written piece by piece, those are the bytes of
# SerializeToString with every weight inline (tests/model_build/test_onnx_weights.py holds them equal).
MODEL_GRAPH, GRAPH_INITIALIZER, TENSOR_RAW_DATA = 7, 5, 9
CHUNK = 16 * 2**20


def data_file(path: pathlib.Path) -> pathlib.Path:
    """Where a graph's weights go: ``model.onnx`` -> ``model.onnx.data`` beside it."""
    return path.with_name(path.name + ".data")


def stage(src: pathlib.Path, graph: pathlib.Path) -> int:
    """``src`` as ``graph`` with its weights in files beside it: a graph that already keeps them in files is
    copied with its files; an inline one has its tensors of ``INLINE_BELOW`` bytes and more written
    to ``graph``'s data file (which loads it once). Returns the node count."""
    import onnx

    model = onnx.load(str(src), load_external_data=False)
    locations = _locations(model)
    if locations:
        shutil.copyfile(src, graph)
        for location in locations:
            _copy(src.parent / location, graph.parent / location)
    else:
        data = data_file(graph)
        data.unlink(missing_ok=True)  # onnx appends to an existing data file
        onnx.save(model, str(graph), save_as_external_data=True, all_tensors_to_one_file=True, location=data.name,
                  size_threshold=INLINE_BELOW)
    return len(model.graph.node)


def _copy(source: pathlib.Path, copy: pathlib.Path) -> None:
    """onnx and ONNX Runtime refuse weight files that are links (symbolic or hard), so a copy: through the
    kernel (copy_file_range / sendfile), never through this process's memory."""
    if copy.exists() and copy.samefile(source):
        return
    copy.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, copy)


def _locations(model) -> set[str]:
    from onnx import external_data_helper

    return {entry.value for tensor in external_data_helper._get_all_tensors(model)
            if external_data_helper.uses_external_data(tensor) for entry in tensor.external_data
            if entry.key == "location"}


def load_graph(path: pathlib.Path):
    """The ModelProto of ``path`` without the bytes of its weights: the graph's initializers keep their name,
    type and shape but no raw data (constants inside nodes keep theirs). Reads the file field by field and skips the weights (onnx.load would hold the
    file and its parsed copy, twice the weights)."""
    import onnx

    with path.open("rb") as stream:
        return onnx.ModelProto.FromString(_without_weights(stream, path.stat().st_size, MODEL))


# What load_graph keeps of each message: field number -> how to read its sub-message (None: drop the field).
TENSOR: dict = {TENSOR_RAW_DATA: None}
GRAPH: dict = {GRAPH_INITIALIZER: TENSOR}
MODEL: dict = {MODEL_GRAPH: GRAPH}


def _without_weights(stream, end: int, spec: dict) -> bytes:
    """The message from the stream's position to ``end``, re-encoded without the fields ``spec`` drops."""
    out = bytearray()
    while stream.tell() < end:
        key = _read_varint(stream)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value = _varint(_read_varint(stream))
        elif wire in (1, 5):
            value = stream.read(8 if wire == 1 else 4)
        elif wire == 2:
            size = _read_varint(stream)
            if number in spec and spec[number] is None:
                stream.seek(size, 1)
                continue
            if number in spec:
                body = _without_weights(stream, stream.tell() + size, spec[number])
            else:
                body = stream.read(size)
            value = _varint(len(body)) + body
        else:
            raise ValueError(f"unsupported protobuf wire type {wire} (field {number})")
        out += _varint(key) + value
    return bytes(out)


def _read_varint(stream) -> int:
    value = shift = 0
    while True:
        byte = stream.read(1)
        if not byte:
            raise ValueError("the ONNX file ends inside a field")
        value |= (byte[0] & 0x7F) << shift
        if byte[0] < 0x80:
            return value
        shift += 7


@contextlib.contextmanager
def graph_of(path: pathlib.Path) -> Iterator:
    """The ModelProto of ``path`` without its external tensors' data, with the working directory at its folder:
    onnx.numpy_helper.to_array, which the fusers use to read a tensor's values, resolves external data
    relative to the working directory."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    before = os.getcwd()
    os.chdir(path.parent)
    try:
        yield model
    finally:
        os.chdir(before)


def inline(src: pathlib.Path, dst: pathlib.Path) -> None:
    """Writes ``src`` (a graph whose tensors may live in data files beside it) as one self-contained ``dst``,
    streaming: one weight in memory at a time. A model of more than ``PROTOBUF_LIMIT`` bytes keeps its
    weights in ``dst``'s data file instead."""
    import onnx
    from onnx import external_data_helper

    model = onnx.load(str(src), load_external_data=False)
    # onnx's own walk over every tensor of a model yields the graph's initializers first; the others
    # (constants in nodes, subgraphs, functions) are small and loaded in place.
    others = itertools.islice(external_data_helper._get_all_tensors(model), len(model.graph.initializer), None)
    for tensor in others:
        if external_data_helper.uses_external_data(tensor):
            _load(tensor, src.parent)
    sizes = [_serialized_size(t, src.parent) for t in model.graph.initializer]
    if sum(sizes) > PROTOBUF_LIMIT:
        for tensor in model.graph.initializer:
            if external_data_helper.uses_external_data(tensor):
                _load(tensor, src.parent)
        data = data_file(dst)
        if data.exists():
            data.unlink()
        onnx.save(model, str(dst), save_as_external_data=True, all_tensors_to_one_file=True, location=data.name)
        return
    _write_streamed(model, sizes, src.parent, dst)


def _write_streamed(model, sizes: list[int], base: pathlib.Path, dst: pathlib.Path) -> None:
    graph = model.graph
    records = sum(len(_key(GRAPH_INITIALIZER, size)) + size for size in sizes)
    graph_size = len(_fields(graph, GRAPH_INITIALIZER, below=True)) + records + len(_fields(graph, GRAPH_INITIALIZER))
    tmp = dst.with_name(dst.name + ".partial")
    with tmp.open("wb") as out:
        out.write(_fields(model, MODEL_GRAPH, below=True))
        out.write(_key(MODEL_GRAPH, graph_size))
        out.write(_fields(graph, GRAPH_INITIALIZER, below=True))
        for tensor, size in zip(graph.initializer, sizes):
            out.write(_key(GRAPH_INITIALIZER, size))
            start = out.tell()
            _write_tensor(tensor, base, out)
            if out.tell() - start != size:
                raise ValueError(f"tensor {tensor.name}: {out.tell() - start} bytes written, {size} expected")
        out.write(_fields(graph, GRAPH_INITIALIZER))
        out.write(_fields(model, MODEL_GRAPH))
    tmp.replace(dst)


def _write_tensor(tensor, base: pathlib.Path, out) -> None:
    """The tensor as serialized with its data inline; the data goes from its file to ``out`` in chunks."""
    from onnx import external_data_helper

    if not external_data_helper.uses_external_data(tensor):
        out.write(tensor.SerializeToString())
        return
    stub = _stub(tensor)
    location, offset, length = _where(tensor, base)
    out.write(_fields(stub, TENSOR_RAW_DATA, below=True))
    out.write(_key(TENSOR_RAW_DATA, length))
    with location.open("rb") as data:
        data.seek(offset)
        left = length
        while left:
            chunk = data.read(min(left, CHUNK))
            if not chunk:
                raise ValueError(f"tensor {tensor.name}: {location} ends {left} bytes early")
            out.write(chunk)
            left -= len(chunk)
    out.write(_fields(stub, TENSOR_RAW_DATA))


def _fields(message, number: int, below: bool = False) -> bytes:
    """The message serialized with only its fields numbered below ``number`` (``below``), else above it."""
    part = type(message)()
    part.CopyFrom(message)
    for field, _ in message.ListFields():
        if (field.number < number) != below or field.number == number:
            part.ClearField(field.name)
    return part.SerializeToString()


def _key(number: int, size: int) -> bytes:
    """A length-delimited field's tag and length (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(size)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _stub(tensor):
    """The tensor without its external-data fields: what stays of it once its data is inline."""
    from onnx import TensorProto

    stub = TensorProto()
    stub.CopyFrom(tensor)
    del stub.external_data[:]
    stub.ClearField("data_location")
    return stub


def _where(tensor, base: pathlib.Path) -> tuple[pathlib.Path, int, int]:
    """(file, offset, length) of an external tensor's data."""
    info = {entry.key: entry.value for entry in tensor.external_data}
    location = base / info["location"]
    offset = int(info.get("offset", 0))
    length = int(info["length"]) if "length" in info else location.stat().st_size - offset
    return location, offset, length


def _serialized_size(tensor, base: pathlib.Path) -> int:
    """The size of the tensor serialized with its data inline, without reading the data."""
    from onnx import external_data_helper

    if not external_data_helper.uses_external_data(tensor):
        return tensor.ByteSize()
    length = _where(tensor, base)[2]
    return _stub(tensor).ByteSize() + len(_key(TENSOR_RAW_DATA, length)) + length


def _load(tensor, base: pathlib.Path) -> None:
    """Reads an external tensor's data into it, as if it had been saved inline (no data_location field)."""
    from onnx import external_data_helper

    external_data_helper.load_external_data_for_tensor(tensor, str(base))
    tensor.ClearField("data_location")
