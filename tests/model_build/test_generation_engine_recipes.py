"""The model directories written for ``task.engine: vllm | tensorrt-llm`` (model_build/recipes/vllm_model.py,
trtllm_model.py) and our request mapped onto each engine's (local_endpoint/client/engine_requests.py); the engines
themselves run only on a GPU (tests/gpu/test_generation_engines.py)."""
import copy
import json
import pathlib

import pytest
import yaml

from deployment_spec.spec import parse_spec
from local_endpoint.client.engine_requests import engine_request
from model_build import model_config
from model_build.errors import BuildError
from model_build.recipes import trtllm_model, vllm_model

ROOT = pathlib.Path(__file__).resolve().parents[2]
BASE = yaml.safe_load((ROOT / "triton.yaml").read_text())
# vLLM's EngineArgs fields (vllm/engine/arg_utils.py, e.g. vllm-project/vllm 001999d; the same names in the 0.1x
# releases of the 25.x images): model.json may hold only these, since AsyncEngineArgs(**json) refuses others.
VLLM_ENGINE_ARGS = {"model", "tokenizer", "dtype", "max_model_len", "max_num_seqs", "gpu_memory_utilization",
                    "tensor_parallel_size", "pipeline_parallel_size", "enforce_eager", "seed", "quantization",
                    "max_num_batched_tokens", "disable_log_stats", "enable_prefix_caching"}
# What vllm_backend's model.py declares in auto_complete_config (src/model.py at 8de0c14): name -> type, dims.
VLLM_DECLARED = {"text_input": ("TYPE_STRING", [1]), "stream": ("TYPE_BOOL", [1]),
                 "sampling_parameters": ("TYPE_STRING", [1]), "exclude_input_in_output": ("TYPE_BOOL", [1])}
# TensorRT-LLM's llmapi config.pbtxt (triton_backend/all_models/llmapi/tensorrt_llm/config.pbtxt, 2026).
TRTLLM_DECLARED = {"text_input": ("TYPE_STRING", [-1]), "streaming": ("TYPE_BOOL", [1]),
                   "sampling_param_max_tokens": ("TYPE_INT32", [1]), "sampling_param_temperature": ("TYPE_FP32", [1]),
                   "sampling_param_top_k": ("TYPE_INT32", [1]), "sampling_param_top_p": ("TYPE_FP32", [1]),
                   "sampling_param_stop": ("TYPE_STRING", [-1]), "sampling_param_seed": ("TYPE_UINT64", [1]),
                   "sampling_param_exclude_input_from_output": ("TYPE_BOOL", [1])}


def _writer(engine: str, stream: bool = True):
    raw = copy.deepcopy(BASE)
    raw["triton_version"] = "25.09"
    raw["models"]["writer"] = {"backend": "python", "weights": "ckpt", "max_batch_size": 8, "task": {
        "kind": "text-generation", "engine": engine, "stream": stream,
        "generation": {"max_new_tokens": 256, "max_prompt_tokens": 1024}}}
    raw["endpoints"]["classifier"].update({"models": ["writer"], "image_repository": "ml/tritonserver"})
    return parse_spec(raw, pathlib.Path("/tmp/gen-spec/triton.yaml")).models["writer"]


def _config(model, made):
    text = model_config.render(model_config.build_config(
        model, name=model.name, inputs=made.inputs, outputs=made.outputs, triton_version="25.09",
        parameters=dict(made.parameters)))
    return model_config.parse(text)


def _declared(config):
    return {t.name: (model_config.model_config_pb2.DataType.Name(t.data_type), list(t.dims)) for t in config.input}


def test_vllm_writes_model_json_and_a_decoupled_vllm_backend_config(tmp_path):
    model = _writer("vllm")
    made = vllm_model.generate(model, model.task, tmp_path)
    args = json.loads(made.files["model.json"])
    assert set(args) == set(vllm_model.ENGINE_ARGS) <= VLLM_ENGINE_ARGS
    assert args == {"model": "/opt/ml/model/writer/1/checkpoint", "dtype": "auto", "max_model_len": 1280,
                    "max_num_seqs": 8, "gpu_memory_utilization": 0.9}
    assert made.files["checkpoint"] == tmp_path and made.requirements == ()
    config = _config(model, made)
    assert (config.backend, config.model_transaction_policy.decoupled, config.max_batch_size) == ("vllm", True, 0)
    assert _declared(config) == VLLM_DECLARED
    assert [(o.name, list(o.dims)) for o in config.output] == [("text_output", [-1])]


@pytest.mark.parametrize("stream", [True, False])
def test_tensorrt_llm_writes_model_yaml_beside_nvidias_model(tmp_path, monkeypatch, stream):
    for name in trtllm_model.NVIDIA_FILES:
        (tmp_path / name).write_text("# NVIDIA's\n")
    monkeypatch.setenv(trtllm_model.SOURCE_VARIABLE, str(tmp_path))
    model = _writer("tensorrt-llm", stream)
    made = trtllm_model.generate(model, model.task, tmp_path)
    assert made.files["model.py"] == tmp_path / "model.py" and made.files["helpers.py"] == tmp_path / "helpers.py"
    body = yaml.safe_load(made.files["model.yaml"])
    assert body == {"model": "/opt/ml/model/writer/1/checkpoint", "backend": "pytorch", "tensor_parallel_size": 1,
                    "pipeline_parallel_size": 1, "max_batch_size": 8, "max_seq_len": 1280,
                    "triton_config": {"max_batch_size": 0, "decoupled": stream}}
    config = _config(model, made)
    # NVIDIA's model.py sets decoupled from triton_config; ours says the same, so the two never disagree.
    assert (config.backend, config.model_transaction_policy.decoupled, config.max_batch_size) == ("python", stream, 0)
    assert _declared(config) == TRTLLM_DECLARED


def test_tensorrt_llm_without_nvidias_model_is_refused_with_the_fix(monkeypatch, tmp_path):
    monkeypatch.delenv(trtllm_model.SOURCE_VARIABLE, raising=False)
    model = _writer("tensorrt-llm")
    with pytest.raises(BuildError) as caught:
        trtllm_model.generate(model, model.task, tmp_path)
    assert str(caught.value) == (
        "models.writer.task.engine: tensorrt-llm needs NVIDIA's LLM-API model (model.py, helpers.py not in "
        "TRTLLM_LLMAPI_MODEL_DIR (unset)); fix: git clone --branch <the image's TensorRT-LLM release> "
        "https://github.com/NVIDIA/TensorRT-LLM and set "
        "TRTLLM_LLMAPI_MODEL_DIR=TensorRT-LLM/triton_backend/all_models/llmapi/tensorrt_llm/1")


OURS = {"max_new_tokens": 32, "top_p": 0.9, "stop": ["\n\n"], "seed": 7}


def test_our_request_in_vllms_form():
    assert engine_request("vllm", "Hi", {**OURS, "repetition_penalty": 1.1}, stream=True) == {
        "text_input": "Hi", "stream": True, "exclude_input_in_output": True,
        "parameters": {"top_p": 0.9, "stop": ["\n\n"], "seed": 7, "max_tokens": 32, "temperature": 0.0,
                       "repetition_penalty": 1.1}}
    sampled = engine_request("vllm", "Hi", {"do_sample": True, "temperature": 0.7}, stream=False)
    assert sampled["parameters"] == {"temperature": 0.7}


def test_our_request_in_the_llm_apis_form():
    assert engine_request("tensorrt-llm", "Hi", OURS, stream=False) == {
        "text_input": "Hi", "streaming": False, "sampling_param_exclude_input_from_output": True,
        "sampling_param_top_p": 0.9, "sampling_param_stop": ["\n\n"], "sampling_param_seed": 7,
        "sampling_param_max_tokens": 32, "sampling_param_temperature": 0.0, "sampling_param_top_k": 1}
    with pytest.raises(ValueError, match="tensorrt-llm takes no repetition_penalty"):
        engine_request("tensorrt-llm", "Hi", {"repetition_penalty": 1.2}, stream=True)
