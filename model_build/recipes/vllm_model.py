"""A generating task with ``engine: vllm``: the model directory Triton's vLLM backend loads.

Sources: triton-inference-server/vllm_backend at 8de0c14 (2026-01-09, after the 25.12 branch): ``src/model.py``
reads ``model.json`` from the version directory (``_VLLM_ENGINE_ARGS_FILENAME``, ``AsyncEngineArgs(**json)``),
asserts a decoupled transaction policy, and declares the tensors below in ``auto_complete_config``;
``samples/model_repository/vllm_model`` is the layout (``config.pbtxt`` with ``backend: "vllm"``, ``1/model.json``).
The engine-argument names are vLLM's ``EngineArgs`` fields (``vllm/engine/arg_utils.py``; unchanged from 0.4 to the
0.1x releases the 25.x images carry).
"""
from __future__ import annotations

import json
import pathlib

from deployment_spec.builds.manifest import TensorSpec
from deployment_spec.sections.model import ModelSpec
from deployment_spec.sections.tasks import Task
from model_build.recipes.contract import PythonModel

# SageMaker extracts the model archive to /opt/ml/model, which is Triton's model repository there (single-model
# endpoints and inference components alike); vllm_backend passes "model" to vLLM as is, so the path is absolute.
REPOSITORY = "/opt/ml/model"
CHECKPOINT = "checkpoint"
# The EngineArgs fields written; a unit test holds model.json to exactly these.
ENGINE_ARGS = ("model", "dtype", "max_model_len", "max_num_seqs", "gpu_memory_utilization")
# vLLM's own default share of GPU memory for weights and KV cache.
GPU_MEMORY_UTILIZATION = 0.9
INPUTS = (TensorSpec("text_input", "TYPE_STRING", (1,)),
          TensorSpec("stream", "TYPE_BOOL", (1,), optional=True),
          TensorSpec("sampling_parameters", "TYPE_STRING", (1,), optional=True),
          TensorSpec("exclude_input_in_output", "TYPE_BOOL", (1,), optional=True))
OUTPUTS = (TensorSpec("text_output", "TYPE_STRING", (-1,)),)


def engine_args(model: ModelSpec, task: Task) -> dict[str, object]:
    """model.json: the checkpoint inside the model directory, the bounds as vLLM's limits."""
    bounds = task.generation
    return {"model": f"{REPOSITORY}/{model.name}/1/{CHECKPOINT}", "dtype": "auto",
            # vLLM refuses a request whose prompt plus max_tokens exceeds max_model_len
            "max_model_len": bounds.max_prompt_tokens + bounds.max_new_tokens,
            # the sequences decoded together: the entry's max_batch_size, as with the transformers engine
            "max_num_seqs": model.max_batch_size, "gpu_memory_utilization": GPU_MEMORY_UTILIZATION}


def generate(model: ModelSpec, task: Task, folder: pathlib.Path) -> PythonModel:
    args = engine_args(model, task)
    return PythonModel(files={"model.json": (json.dumps(args, indent=2) + "\n").encode(), CHECKPOINT: folder},
                       inputs=INPUTS, outputs=OUTPUTS,
                       note=f"vLLM engine on {folder} (max_model_len {args['max_model_len']}, up to "
                            f"{model.max_batch_size} sequences)")
