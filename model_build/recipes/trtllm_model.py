"""A generating task with ``engine: tensorrt-llm``: TensorRT-LLM's LLM-API Triton model (PyTorch flow, no engine
build).

Sources: NVIDIA/TensorRT-LLM ``triton_backend/all_models/llmapi/tensorrt_llm/`` (config.pbtxt and 1/model.yaml as
of 2026; tensorrtllm_backend ``docs/llmapi.md`` at 0b9d7d5, 2026-07-14, says to copy that folder): ``model.py``
reads ``model.yaml`` from the version directory; its ``triton_config`` (``max_batch_size``, ``decoupled``) fills
the config in ``auto_complete_config``, every other key is an ``LLM(...)`` argument (``update_llm_args_with_extra_dict``;
``tensorrt_llm/llmapi/llm_args.py``). Requests send ``text_input``, ``streaming`` and ``sampling_param_*`` tensors.

NVIDIA's model.py and helpers.py are not in this repository nor, at a known path, in the image: the build copies
them from the TensorRT-LLM release matching the image, named by ``TRTLLM_LLMAPI_MODEL_DIR``.
"""
from __future__ import annotations

import os
import pathlib

import yaml

from deployment_spec.builds.manifest import TensorSpec
from deployment_spec.sections.model import ModelSpec
from deployment_spec.sections.tasks import Task
from model_build.errors import BuildError
from model_build.recipes.contract import PythonModel
from model_build.recipes.vllm_model import CHECKPOINT, REPOSITORY

SOURCE_VARIABLE = "TRTLLM_LLMAPI_MODEL_DIR"
NVIDIA_FILES = ("model.py", "helpers.py")
INPUTS = (TensorSpec("text_input", "TYPE_STRING", (-1,)),
          TensorSpec("streaming", "TYPE_BOOL", (1,), optional=True),
          TensorSpec("sampling_param_max_tokens", "TYPE_INT32", (1,), optional=True),
          TensorSpec("sampling_param_temperature", "TYPE_FP32", (1,), optional=True),
          TensorSpec("sampling_param_top_k", "TYPE_INT32", (1,), optional=True),
          TensorSpec("sampling_param_top_p", "TYPE_FP32", (1,), optional=True),
          TensorSpec("sampling_param_stop", "TYPE_STRING", (-1,), optional=True),
          TensorSpec("sampling_param_seed", "TYPE_UINT64", (1,), optional=True),
          TensorSpec("sampling_param_exclude_input_from_output", "TYPE_BOOL", (1,), optional=True))
OUTPUTS = (TensorSpec("text_output", "TYPE_STRING", (-1,)),)


def model_yaml(model: ModelSpec, task: Task) -> dict[str, object]:
    bounds = task.generation
    return {"model": f"{REPOSITORY}/{model.name}/1/{CHECKPOINT}", "backend": "pytorch",
            "tensor_parallel_size": 1, "pipeline_parallel_size": 1,
            # the LLM-API's own in-flight batch and longest sequence (prompt plus new tokens)
            "max_batch_size": model.max_batch_size,
            "max_seq_len": bounds.max_prompt_tokens + bounds.max_new_tokens,
            # Triton's side: NVIDIA's model.py batches nothing itself (its model.yaml says max_batch_size 0)
            "triton_config": {"max_batch_size": 0, "decoupled": task.streams()}}


def nvidia_files(where: str) -> dict[str, pathlib.Path]:
    given = os.environ.get(SOURCE_VARIABLE, "")
    folder = pathlib.Path(given)
    missing = [name for name in NVIDIA_FILES if not (folder / name).is_file()] if given else list(NVIDIA_FILES)
    if missing:
        raise BuildError(f"{where}.task.engine: tensorrt-llm needs NVIDIA's LLM-API model ({', '.join(missing)} not "
                         f"in {given or SOURCE_VARIABLE + ' (unset)'}); fix: git clone --branch <the image's "
                         "TensorRT-LLM release> https://github.com/NVIDIA/TensorRT-LLM and set "
                         f"{SOURCE_VARIABLE}=TensorRT-LLM/triton_backend/all_models/llmapi/tensorrt_llm/1")
    return {name: folder / name for name in NVIDIA_FILES}


def generate(model: ModelSpec, task: Task, folder: pathlib.Path) -> PythonModel:
    body = model_yaml(model, task)
    files: dict[str, object] = {**nvidia_files(f"models.{model.task_entry or model.name}"),
                                "model.yaml": yaml.safe_dump(body, sort_keys=False).encode(), CHECKPOINT: folder}
    return PythonModel(files=files, inputs=INPUTS, outputs=OUTPUTS,
                       note=f"TensorRT-LLM LLM-API on {folder} (max_seq_len {body['max_seq_len']}, up to "
                            f"{model.max_batch_size} sequences)")
