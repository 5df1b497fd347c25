"""Moves a serialized DALI pipeline's operators to the CPU, changing nothing else.

A ``model.dali`` is a ``dali_proto.PipelineDef`` message (NVIDIA/DALI ``dali/pipeline/proto/dali.proto``,
proto2, unchanged in its fields since DALI 1.0). Each operator names its device in its ``device``
argument (``cpu``, ``mixed`` or ``gpu``) and in the device of each input and output. Rewriting those
to ``cpu`` gives the same graph with the same arguments on DALI's CPU operators, which this
GPU-less machine can run: the build verifies the shipped file that way, and the local endpoint's
CPU stand-in serves it that way. Unknown fields survive (protobuf keeps them), so newer DALI
fields pass through untouched.
"""
from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_GPU_DEVICES = ("gpu", "mixed")


def _messages():
    F = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name="tritonsm_dali_placement.proto", package="dali_proto",
                                               syntax="proto2")

    def message(name, *fields):
        msg = proto.message_type.add(name=name)
        for number, field, kind, label, type_name in fields:
            entry = msg.field.add(name=field, number=number, type=kind, label=label)
            if type_name:
                entry.type_name = f".dali_proto.{type_name}"

    opt, rep = F.LABEL_OPTIONAL, F.LABEL_REPEATED
    message("Argument", (1, "name", F.TYPE_STRING, opt, None), (2, "type", F.TYPE_STRING, opt, None),
            (3, "floats", F.TYPE_FLOAT, rep, None), (4, "ints", F.TYPE_INT64, rep, None),
            (5, "strings", F.TYPE_STRING, rep, None), (6, "bools", F.TYPE_BOOL, rep, None),
            (7, "extra_args", F.TYPE_MESSAGE, rep, "Argument"), (8, "is_vector", F.TYPE_BOOL, opt, None))
    message("InputOutput", (1, "name", F.TYPE_STRING, opt, None), (2, "device", F.TYPE_STRING, opt, None),
            (3, "is_argument_input", F.TYPE_BOOL, opt, None), (4, "arg_name", F.TYPE_STRING, opt, None),
            (5, "dtype", F.TYPE_INT32, opt, None), (6, "ndim", F.TYPE_INT32, opt, None))
    message("OpDef", (1, "name", F.TYPE_STRING, opt, None), (2, "input", F.TYPE_MESSAGE, rep, "InputOutput"),
            (3, "output", F.TYPE_MESSAGE, rep, "InputOutput"), (4, "args", F.TYPE_MESSAGE, rep, "Argument"),
            (5, "inst_name", F.TYPE_STRING, opt, None), (6, "logical_id", F.TYPE_INT32, opt, None))
    message("PipelineDef", (1, "num_threads", F.TYPE_INT64, opt, None), (2, "batch_size", F.TYPE_INT32, opt, None),
            (3, "use_async", F.TYPE_BOOL, opt, None), (4, "pipeline", F.TYPE_BOOL, opt, None),
            (5, "op", F.TYPE_MESSAGE, rep, "OpDef"), (6, "external_inputs", F.TYPE_STRING, rep, None),
            (7, "pipe_outputs", F.TYPE_MESSAGE, rep, "InputOutput"), (8, "device_id", F.TYPE_INT32, opt, None),
            (9, "seed", F.TYPE_INT64, opt, None))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("dali_proto.PipelineDef"))


_PIPELINE_DEF = _messages()


def devices(serialized: bytes) -> list[str]:
    """``<operator>:<device>`` for every operator, in the file's order."""
    pipeline = _PIPELINE_DEF.FromString(serialized)
    return [f"{op.name}:{_device_arg(op)}" for op in pipeline.op]


def to_cpu(serialized: bytes) -> bytes:
    """The same pipeline with every operator, input and output on the CPU."""
    pipeline = _PIPELINE_DEF.FromString(serialized)
    for op in pipeline.op:
        for arg in op.args:
            if arg.name == "device" and list(arg.strings) and arg.strings[0] in _GPU_DEVICES:
                arg.strings[0] = "cpu"
        for tensor in list(op.input) + list(op.output):
            if tensor.device in _GPU_DEVICES:
                tensor.device = "cpu"
    for tensor in pipeline.pipe_outputs:
        if tensor.device in _GPU_DEVICES:
            tensor.device = "cpu"
    return pipeline.SerializeToString()


def _device_arg(op) -> str:
    return next((arg.strings[0] for arg in op.args if arg.name == "device" and list(arg.strings)), "cpu")
