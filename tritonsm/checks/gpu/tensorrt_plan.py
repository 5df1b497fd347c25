"""A TensorRT plan deserialized and run by the `tensorrt` Python wheel, where one is installed.

A plan runs only in the TensorRT release that built it (and on its GPU architecture), so the wheel must
be that release (the manifest's `builder.versions.tensorrt`). The plan is the only graph in the archive:
the check is that it loads here, runs the smoke request on cuda:0, and answers every recorded output with
its shape and finite values. TensorRT 10's name-based API (`set_input_shape`, `set_tensor_address`,
`execute_async_v3`) only.
"""
from __future__ import annotations

import pathlib

from tritonsm.checks.gpu.inputs import batches
from tritonsm.checks.gpu.report import FAILED, NOT_RUN, PASSED
from tritonsm.checks.smoke_requests import SmokeCase

WHAT = "the TensorRT plan run by the tensorrt wheel on cuda:0"


def check(path: pathlib.Path, case: SmokeCase, max_batch_size: int, built_with: str | None) -> tuple[str, str, dict]:
    import importlib.util
    if importlib.util.find_spec("tensorrt") is None:
        return NOT_RUN, (f"the tensorrt Python wheel is not installed; install tensorrt=={built_with or '<the plan’s release>'}"
                         ", the release that built the plan"), {"plan built with": built_with}
    import tensorrt as trt
    import torch

    facts = {"tensorrt": trt.__version__, "plan built with": built_with}
    if int(trt.__version__.split(".")[0]) < 10:
        return NOT_RUN, f"tensorrt {trt.__version__} predates the name-based API this check uses (10+)", facts
    if built_with and trt.__version__.split(".")[:3] != built_with.split(".")[:3]:
        return NOT_RUN, (f"the plan was built by TensorRT {built_with} and only that release loads it; this wheel is "
                         f"{trt.__version__}: install tensorrt=={built_with}"), facts
    engine = trt.Runtime(trt.Logger(trt.Logger.ERROR)).deserialize_cuda_engine(path.read_bytes())
    if engine is None:
        return FAILED, "TensorRT could not deserialize the plan (another release or GPU architecture built it?)", facts
    names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
    inputs = {n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT}
    sizes = []
    for tensors in batches(case, max_batch_size):
        context = engine.create_execution_context()
        buffers = {}
        for tensor in tensors:
            if tensor.name not in inputs:
                return FAILED, f"the plan has no input {tensor.name} (inputs: {', '.join(sorted(inputs))})", facts
            buffers[tensor.name] = torch.from_numpy(tensor.array).to(_torch_dtype(trt, engine, tensor.name)).cuda()
            context.set_input_shape(tensor.name, tuple(tensor.array.shape))
        for name in names:
            if name not in inputs:
                shape = tuple(context.get_tensor_shape(name))
                buffers[name] = torch.empty(shape, dtype=_torch_dtype(trt, engine, name), device="cuda:0")
            context.set_tensor_address(name, buffers[name].data_ptr())
        stream = torch.cuda.Stream()
        if not context.execute_async_v3(stream.cuda_stream):
            return FAILED, "execute_async_v3 returned false (see TensorRT's log)", facts
        stream.synchronize()
        sizes.append(int(tensors[0].array.shape[0]))
        for spec in case.outputs:
            out = buffers.get(spec.name)
            if out is None:
                return FAILED, f"the plan has no output {spec.name} (outputs: {', '.join(sorted(set(names) - inputs))})", facts
            if out.is_floating_point() and not bool(torch.isfinite(out).all()):
                return FAILED, f"output {spec.name} holds NaN or infinite values at batch {sizes[-1]}", facts
    facts["batches"] = sizes
    return PASSED, f"batches {sizes}: loaded by TensorRT {trt.__version__}, every output present and finite", facts


def _torch_dtype(trt, engine, name):
    import torch
    table = {trt.float32: torch.float32, trt.float16: torch.float16, trt.int32: torch.int32, trt.int8: torch.int8,
             trt.bool: torch.bool, trt.int64: torch.int64, trt.bfloat16: torch.bfloat16}
    return table[engine.get_tensor_dtype(name)]
