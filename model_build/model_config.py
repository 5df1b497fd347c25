"""config.pbtxt through Triton's ModelConfig protobuf (tritonclient.grpc.model_config_pb2), never templates.

``json_format.ParseDict`` rejects misspelt fields and enum values; ``text_format`` prints fields in
proto order and map entries sorted, so the same inputs give the same bytes.
"""
from __future__ import annotations

import dataclasses
from typing import Mapping, Optional, Sequence

from google.protobuf import json_format, text_format
from tritonclient.grpc import model_config_pb2

from deployment_spec.builds.manifest import TensorSpec
from deployment_spec.sections.generation import ENGINE_BACKEND
from deployment_spec.sections.model import (ArenaExtendStrategy, Backend, ConvAlgoSearch, ExecutionMode, GraphLevel,
                                   ModelSpec, OnnxRuntimeSettings, Precision)
from model_build import versions
from model_build.errors import BuildError

PLATFORM = {Backend.ONNXRUNTIME: "onnxruntime_onnx", Backend.TENSORRT: "tensorrt_plan",
            Backend.PYTORCH: "pytorch_libtorch", Backend.ENSEMBLE: "ensemble"}

# ORT maps optimization.graph.level 0/unset -> ENABLE_ALL, -1 -> BASIC, 1 -> EXTENDED, 2 -> DISABLE_ALL
# (ORTBE src/onnxruntime.cc; the proto comment "-1: Disabled" does not hold for ORT). ALL stays unset.
GRAPH_LEVEL = {GraphLevel.BASIC: -1, GraphLevel.EXTENDED: 1, GraphLevel.DISABLED: 2}
CONV_ALGO = {ConvAlgoSearch.EXHAUSTIVE: "0", ConvAlgoSearch.HEURISTIC: "1", ConvAlgoSearch.DEFAULT: "2"}
EXEC_MODE = {ExecutionMode.SEQUENTIAL: "0", ExecutionMode.PARALLEL: "1"}
ARENA = {ArenaExtendStrategy.NEXT_POWER_OF_TWO: "0", ArenaExtendStrategy.SAME_AS_REQUESTED: "1"}
KIND = {"auto": "KIND_AUTO", "gpu": "KIND_GPU", "cpu": "KIND_CPU"}
ORT_TRT_CACHE = "/tmp/ort_trt_cache"


def build_config(model: ModelSpec, *, name: str, inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec],
                 triton_version: str, parameters: Optional[Mapping[str, str]] = None,
                 ensemble_steps: Sequence[Mapping] = ()) -> model_config_pb2.ModelConfig:
    """The ModelConfig for one model directory; ``name`` is the directory (Triton model) name."""
    generating = model.task is not None and model.task.generates()
    # A generating task batches on its own, step by step (max_batch_size is its sequences decoded together);
    # Triton's generate route sends unbatched tensors (dims [1]), as the vLLM backend's model takes them.
    if generating:
        model = dataclasses.replace(model, max_batch_size=0)
    body: dict = {"name": name, "max_batch_size": model.max_batch_size,
                  "input": [_tensor(t, model) for t in inputs], "output": [_tensor(t, model) for t in outputs]}
    if generating and model.task is not None and model.task.streams():
        body["model_transaction_policy"] = {"decoupled": True}  # one response per piece of text
    if generating and model.task is not None:  # vllm_backend is a backend of its own (task.engine: vllm)
        body["backend"] = ENGINE_BACKEND[model.task.engine]
    elif model.backend in (Backend.PYTHON, Backend.DALI):
        body["backend"] = model.backend.value
    else:
        body["platform"] = PLATFORM[model.backend]
    params = dict(parameters or {})
    if model.backend is Backend.ENSEMBLE:
        body["ensemble_scheduling"] = {"step": [dict(s) for s in ensemble_steps]}
    else:
        if model.dynamic_batching is not None:
            db = model.dynamic_batching
            body["dynamic_batching"] = {"preferred_batch_size": list(db.preferred_batch_sizes),
                                        "max_queue_delay_microseconds": db.max_queue_delay_us}
        if model.instance_groups:
            body["instance_group"] = [{"kind": KIND[g.kind.value], "count": g.count} for g in model.instance_groups]
        if model.warmup:
            body["model_warmup"] = [_warmup(model, inputs)]
    if model.backend is Backend.ONNXRUNTIME:
        ort = model.onnxruntime or OnnxRuntimeSettings()
        params.update(_ort_parameters(ort))
        optimization = _ort_optimization(ort, name, triton_version)
        if optimization:
            body["optimization"] = optimization
    if params:
        body["parameters"] = {k: {"string_value": v} for k, v in sorted(params.items())}
    try:
        config = json_format.ParseDict(body, model_config_pb2.ModelConfig())
    except json_format.ParseError as exc:
        raise BuildError(f"model {name}: the generated config.pbtxt does not fit Triton's ModelConfig schema "
                         f"({exc}); this is a model_build bug, please report it") from None
    check_release_fields(config, triton_version)
    return config


def render(config: model_config_pb2.ModelConfig) -> str:
    text = text_format.MessageToString(config)
    # WAR: proto3 does not print a zero max_batch_size, but Triton needs it explicit
    # (otherwise the backend may auto-complete a batch size; Triton docs/user_guide/model_configuration.md, "Auto-Generated Model Configuration").
    if config.max_batch_size == 0:
        text += "max_batch_size: 0\n"
    return text


def parse(text: str, where: str = "config.pbtxt") -> model_config_pb2.ModelConfig:
    try:
        return text_format.Parse(text, model_config_pb2.ModelConfig())
    except text_format.ParseError as exc:
        raise BuildError(f"{where}: not a valid Triton model configuration ({exc})") from None


def renamed(text: str, new_name: str) -> str:
    """The same configuration under another model name (MME copies), re-rendered through the schema."""
    config = parse(text)
    config.name = new_name
    return render(config)


def check_release_fields(config: model_config_pb2.ModelConfig, triton_version: str) -> None:
    """Refuse fields the target release's proto does not have: older servers reject the whole config."""
    for path in sorted(_set_paths(config)):
        since = versions.CONFIG_FIELD_SINCE.get(path)
        if since and not versions.at_least(triton_version, since):
            raise BuildError(f"model {config.name}: config field {path} needs Triton {since} or newer, "
                             f"the spec targets {triton_version}; remove the setting or raise triton_version")


def _set_paths(message, prefix: str = "") -> set[str]:
    out = set()
    for field, value in message.ListFields():
        path = f"{prefix}{field.name}"
        out.add(path)
        if field.message_type is not None and not field.message_type.GetOptions().map_entry:
            items = value if field.is_repeated else [value]
            for item in items:
                out |= _set_paths(item, path + ".")
    return out


def declared_tensor(t, where: str) -> TensorSpec:
    """A tensor of a given config.pbtxt (ModelInput / ModelOutput) as the model sees it. The one reshape the
    build writes back is dims [ 1 ] -> shape [ ] (one value per row); any other is refused, not dropped."""
    data_type = model_config_pb2.DataType.Name(t.data_type)
    if not t.HasField("reshape"):
        return TensorSpec(t.name, data_type, tuple(t.dims))
    if list(t.dims) == [1] and not t.reshape.shape:
        return TensorSpec(t.name, data_type, ())
    raise BuildError(f"{where}: tensor {t.name} has dims {list(t.dims)} with reshape {list(t.reshape.shape)}; "
                     "allowed: reshape only from dims [ 1 ] to shape [ ] (one value per batch row); fix: give dims "
                     "as the model sees them and reshape inside model.py")


def _tensor(t: TensorSpec, model: ModelSpec) -> dict:
    batched = model.max_batch_size > 0
    out: dict = {"name": t.name, "data_type": t.data_type, "dims": list(t.served_dims(batched))}
    if t.optional:
        out["optional"] = True
    # An ensemble runs no model of its own: its tensors are its steps' served ones, nothing to reshape.
    if t.reshaped(batched) and model.backend is not Backend.ENSEMBLE:
        out["reshape"] = {"shape": list(t.dims)}
    return out


def _warmup(model: ModelSpec, inputs: Sequence[TensorSpec]) -> dict:
    # Token ids must stay inside the vocabulary, so integer and string inputs get zeros;
    # float inputs get random data, closer to real traffic.
    per_input = {}
    for t in inputs:
        dims = [model.sequence_length or 1 if d < 0 else d for d in t.served_dims(model.max_batch_size > 0)]
        fill = {"random_data": True} if t.data_type in ("TYPE_FP32", "TYPE_FP16", "TYPE_BF16") else {"zero_data": True}
        per_input[t.name] = {"data_type": t.data_type, "dims": dims, **fill}
    return {"name": "warmup", "batch_size": 1, "inputs": per_input, "count": 1}


def _ort_parameters(ort: OnnxRuntimeSettings) -> dict[str, str]:
    """Top-level ORT backend parameters (onnxruntime_backend README.md, per release branch); unset spec keys keep the backend default."""
    out = {}
    if ort.cudnn_conv_algo_search is not None:
        out["cudnn_conv_algo_search"] = CONV_ALGO[ort.cudnn_conv_algo_search]
    if ort.execution_mode is not None:
        out["execution_mode"] = EXEC_MODE[ort.execution_mode]
    if ort.arena_extend_strategy is not None:
        out["arena_extend_strategy"] = ARENA[ort.arena_extend_strategy]
    if ort.enable_mem_pattern is not None:
        out["enable_mem_pattern"] = "1" if ort.enable_mem_pattern else "0"
    if ort.enable_mem_arena is not None:
        out["enable_mem_arena"] = "1" if ort.enable_mem_arena else "0"
    if ort.intra_op_threads is not None:
        out["intra_op_thread_count"] = str(ort.intra_op_threads)
    if ort.inter_op_threads is not None:
        out["inter_op_thread_count"] = str(ort.inter_op_threads)
    return out


def _ort_optimization(ort: OnnxRuntimeSettings, name: str, triton_version: str) -> dict:
    out: dict = {}
    if ort.graph_optimization_level in GRAPH_LEVEL:
        out["graph"] = {"level": GRAPH_LEVEL[ort.graph_optimization_level]}
    acc = ort.tensorrt_accelerator
    if acc is not None:
        params = {"precision_mode": acc.precision.value.upper(),
                  "max_workspace_size_bytes": str(acc.max_workspace_mib * 1024 * 1024)}
        if acc.engine_cache:
            params["trt_engine_cache_enable"] = "true"
            params["trt_engine_cache_path"] = f"{ORT_TRT_CACHE}/{name}"
            # The timing cache keys exist only in newer ORT backends; an unknown key fails the load.
            if versions.at_least(triton_version, versions.ORT_TRT_EXTRA_KEYS_SINCE):
                params["trt_timing_cache_enable"] = "true"
                params["trt_timing_cache_path"] = f"{ORT_TRT_CACHE}/{name}"
        if acc.precision is Precision.INT8:
            raise BuildError(f"model {name}: onnxruntime.tensorrt_accelerator.precision int8 needs a calibration "
                             "table this builder does not make; use fp16 or fp32")
        out["execution_accelerators"] = {"gpu_execution_accelerator": [
            {"name": "tensorrt", "parameters": dict(sorted(params.items()))}]}
    return out
