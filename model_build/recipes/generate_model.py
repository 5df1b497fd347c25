"""The one model of a generating ``task:`` (text-generation, text2text-generation): the checkpoint decoded with
transformers inside Triton's Python backend (model_build/python_models/hf_generate.py and generation_engine.py).

The checkpoint folder ships whole (config, weights, tokenizer, generation_config.json, chat template) as
``checkpoint/`` beside model.py; the task's bounds (deployment_spec/sections/generation.py) become config.pbtxt
parameters, which is where the served model reads them.
"""
from __future__ import annotations

import json
import pathlib

from deployment_spec.builds.manifest import TensorSpec
from deployment_spec.sections.model import ModelSpec
from deployment_spec.sections.tasks import TaskKind
from model_build.errors import BuildError
from deployment_spec.sections.generation import Engine
from model_build.recipes import checkpoint_text, trtllm_model, vllm_model
from model_build.recipes.contract import TEMPLATES, TRANSFORMERS_REQUIREMENTS, PythonModel

# Inputs and output as Triton's generate route names them (server docs/protocol/extension_generate.md): the JSON
# body's text_input and messages become these tensors, text_output comes back in each event.
PROMPT, MESSAGES, OUTPUT = "text_input", "messages", "text_output"
CHECKPOINT = "checkpoint"
# The transformers Auto class that must map the checkpoint's config, per kind.
AUTO_CLASS = {TaskKind.TEXT_GENERATION: "AutoModelForCausalLM", TaskKind.TEXT2TEXT_GENERATION: "AutoModelForSeq2SeqLM"}


def generate(model: ModelSpec, root: pathlib.Path) -> PythonModel:
    task = checkpoint_text.task_of(model)
    folder = checkpoint_text.checkpoint(model, root)
    architecture = _architecture(model, folder, task.kind)
    # The GPU engines take NVIDIA's own request tensors; their model directories are their own modules.
    if task.engine is Engine.VLLM:
        return vllm_model.generate(model, task, folder)
    if task.engine is Engine.TENSORRT_LLM:
        return trtllm_model.generate(model, task, folder)
    tok = checkpoint_text.tokenizer(folder)
    chat = "with its chat template" if getattr(tok, "chat_template", None) else "no chat template"
    return PythonModel(
        files={"model.py": TEMPLATES / "hf_generate.py", "generation_engine.py": TEMPLATES / "generation_engine.py",
               "step_requests.py": TEMPLATES / "step_requests.py",
               "generation_metrics.py": TEMPLATES / "generation_metrics.py", CHECKPOINT: folder},
        # Both optional: a request carries one of them (the engine refuses neither or both).
        inputs=(TensorSpec(PROMPT, "TYPE_STRING", (1,), optional=True),
                TensorSpec(MESSAGES, "TYPE_STRING", (1,), optional=True)),
        outputs=(TensorSpec(OUTPUT, "TYPE_STRING", (1,)),),
        parameters=task.generation.model_parameters(task.kind.value, max_concurrent=model.max_batch_size),
        note=f"{architecture} from {folder} ({chat}; up to {model.max_batch_size} sequences decoded together, "
             f"{'streaming' if task.streams() else 'whole answers'})",
        requirements=TRANSFORMERS_REQUIREMENTS)


def _architecture(model: ModelSpec, folder: pathlib.Path, kind: TaskKind) -> str:
    """The checkpoint's model type, refused when the kind's Auto class does not map it."""
    from transformers.models.auto.modeling_auto import (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
                                                        MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES)

    where = f"models.{model.task_entry or model.name}"
    config_file = folder / "config.json"
    if not config_file.is_file():
        raise BuildError(f"{where}.weights: {folder} has no config.json; give the folder save_pretrained wrote")
    config = json.loads(config_file.read_text())
    model_type = config.get("model_type")
    mapping = (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES if kind is TaskKind.TEXT_GENERATION
               else MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES)
    if model_type not in mapping:
        other = (TaskKind.TEXT2TEXT_GENERATION if kind is TaskKind.TEXT_GENERATION else TaskKind.TEXT_GENERATION)
        other_mapping = (MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES if kind is TaskKind.TEXT_GENERATION
                         else MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
        fix = (f"set task.kind: {other.value}" if model_type in other_mapping else
               "give a checkpoint of an architecture transformers generates with")
        raise BuildError(f"{where}.weights: {folder} is a {model_type!r} checkpoint, which transformers' "
                         f"{AUTO_CLASS[kind]} does not map ({kind.value} needs one it does); fix: {fix}")
    if kind is TaskKind.TEXT2TEXT_GENERATION and not config.get("is_encoder_decoder"):
        # transformers maps audio LLMs (Qwen2-Audio, Voxtral...) for AutoModelForSeq2SeqLM: one decoder reading audio
        # features, with no decoder start token; a prompt alone is not what they are for.
        raise BuildError(f"{where}.weights: {folder} is a {model_type!r} checkpoint, which is not an encoder-decoder "
                         "(its config.json has no is_encoder_decoder: true; transformers maps it for "
                         "AutoModelForSeq2SeqLM for its audio input, which a text2text-generation request does not "
                         "send); fix: give an encoder-decoder text checkpoint (T5, BART, Marian, mBART, Pegasus...)")
    return mapping[model_type]
