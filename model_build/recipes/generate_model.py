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
from deployment_spec.sections.task_models import GENERATED_SPEECH_TYPES, SPEECH_ENGINE
from deployment_spec.sections.tasks import TaskKind
from model_build.errors import BuildError
from deployment_spec.sections.generation import Engine
from model_build.recipes import checkpoint_text, trtllm_model, vllm_model
from model_build.recipes.contract import TEMPLATES, TRANSFORMERS_REQUIREMENTS, PythonModel

# Inputs and output as Triton's generate route names them (server docs/protocol/extension_generate.md): the JSON
# body's text_input and messages become these tensors, text_output comes back in each event.
PROMPT, MESSAGES, OUTPUT = "text_input", "messages", "text_output"
# The prompt as Hugging Face's inference toolkit and TGI clients send it: {"inputs": "...", "parameters": {...}}.
HF_PROMPT = "inputs"
CHECKPOINT = "checkpoint"
# The transformers Auto class that must map the checkpoint's config, per kind.
AUTO_CLASS = {TaskKind.TEXT_GENERATION: "AutoModelForCausalLM", TaskKind.TEXT2TEXT_GENERATION: "AutoModelForSeq2SeqLM",
              TaskKind.SPEECH_RECOGNITION: "AutoModelForSpeechSeq2Seq"}
AUDIO = "audio"
# What the served model decodes a clip with (audio_steps.PREPROCESS_REQUIREMENTS' soundfile: FLAC).
SPEECH_REQUIREMENTS = (*TRANSFORMERS_REQUIREMENTS, "soundfile==0.14.0")
# What the Voxtrals' processors write their transcription requests with (transformers 5.23.0 processing_voxtral.py
# and processing_voxtral_realtime.py require mistral_common; its [audio] extra reads the clip they hand it as a WAV):
# shipped with such entries only.
PROCESSOR_REQUIREMENTS = {name: ("mistral-common[audio]==1.13.1",) for name in ("voxtral", "voxtral_realtime")}


def generate(model: ModelSpec, root: pathlib.Path) -> PythonModel:
    task = checkpoint_text.task_of(model)
    folder = checkpoint_text.checkpoint(model, root)
    architecture = _architecture(model, folder, task.kind)
    # The GPU engines take NVIDIA's own request tensors; their model directories are their own modules.
    if task.engine is Engine.VLLM:
        return vllm_model.generate(model, task, folder)
    if task.engine is Engine.TENSORRT_LLM:
        return trtllm_model.generate(model, task, folder)
    if task.kind is TaskKind.SPEECH_RECOGNITION:
        model_type = str(json.loads((folder / "config.json").read_text()).get("model_type"))
        if model_type not in PROCESSOR_REQUIREMENTS:  # the Voxtrals' tokenizer is tekken.json, not a fast one
            checkpoint_text.tokenizer(folder)
        return _speech(model, folder, architecture, model_type)
    tok = checkpoint_text.tokenizer(folder)
    chat = "with its chat template" if getattr(tok, "chat_template", None) else "no chat template"
    return PythonModel(
        files={"model.py": TEMPLATES / "hf_generate.py", "generation_engine.py": TEMPLATES / "generation_engine.py",
               "step_requests.py": TEMPLATES / "step_requests.py",
               "generation_metrics.py": TEMPLATES / "generation_metrics.py", CHECKPOINT: folder},
        # All optional: a request carries one of them (the model refuses none or two).
        inputs=(TensorSpec(PROMPT, "TYPE_STRING", (1,), optional=True),
                TensorSpec(MESSAGES, "TYPE_STRING", (1,), optional=True),
                TensorSpec(HF_PROMPT, "TYPE_STRING", (1,), optional=True)),
        outputs=(TensorSpec(OUTPUT, "TYPE_STRING", (1,)),),
        parameters=task.generation.model_parameters(task.kind.value, max_concurrent=model.max_batch_size),
        note=f"{architecture} from {folder} ({chat}; up to {model.max_batch_size} sequences decoded together, "
             f"{'streaming' if task.streams() else 'whole answers'})",
        requirements=TRANSFORMERS_REQUIREMENTS)


def _speech(model: ModelSpec, folder: pathlib.Path, architecture: str, model_type: str) -> PythonModel:
    """A speech model: ``audio`` in (an audio file libsndfile reads, base64: the generate route's JSON holds
    strings), decoded by the audio tasks' own audio_decode.py, then the checkpoint's feature extractor (both in
    hf_generate.py); a Whisper's decoder prompt by whisper_prompt.py, an audio language model's prompt and features
    by its processor (transcription_request.py)."""
    task = checkpoint_text.task_of(model)
    parameters = task.generation.model_parameters(task.kind.value, max_concurrent=model.max_batch_size)
    return PythonModel(
        files={"model.py": TEMPLATES / "hf_generate.py", "generation_engine.py": TEMPLATES / "generation_engine.py",
               "step_requests.py": TEMPLATES / "step_requests.py", "audio_decode.py": TEMPLATES / "audio_decode.py",
               "whisper_prompt.py": TEMPLATES / "whisper_prompt.py",
               "transcription_request.py": TEMPLATES / "transcription_request.py",
               "step_fed.py": TEMPLATES / "step_fed.py",
               "generation_metrics.py": TEMPLATES / "generation_metrics.py", CHECKPOINT: folder},
        inputs=(TensorSpec(AUDIO, "TYPE_STRING", (1,)),),
        outputs=(TensorSpec(OUTPUT, "TYPE_STRING", (1,)),),
        parameters={**parameters, "max_audio_seconds": str(task.max_audio_seconds)},
        note=f"{architecture} from {folder} (speech to text, clips up to {task.max_audio_seconds} s; up to "
             f"{model.max_batch_size} decoded at once, {'streaming' if task.streams() else 'whole answers'})",
        requirements=SPEECH_REQUIREMENTS + PROCESSOR_REQUIREMENTS.get(model_type, ()))


def _architecture(model: ModelSpec, folder: pathlib.Path, kind: TaskKind) -> str:
    """The checkpoint's model type, refused when the kind's Auto class does not map it."""
    from transformers.models.auto.modeling_auto import (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
                                                        MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES,
                                                        MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES)

    where = f"models.{model.task_entry or model.name}"
    config_file = folder / "config.json"
    if not config_file.is_file():
        raise BuildError(f"{where}.weights: {folder} has no config.json; give the folder save_pretrained wrote")
    config = json.loads(config_file.read_text())
    model_type = config.get("model_type")
    if kind is TaskKind.SPEECH_RECOGNITION:  # the loader refused every other type (task_models.speech_problems)
        if model_type not in GENERATED_SPEECH_TYPES:
            raise BuildError(f"{where}.weights: {folder} is a {model_type!r} checkpoint; backend python with "
                             f"automatic-speech-recognition decodes {SPEECH_ENGINE}; fix: give one")
        return MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES[model_type]
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
        fix = ("set task.kind: automatic-speech-recognition (the endpoint then takes the clip as audio)"
               if model_type in GENERATED_SPEECH_TYPES else
               "give an encoder-decoder text checkpoint (T5, BART, Marian, mBART, Pegasus...)")
        raise BuildError(f"{where}.weights: {folder} is a {model_type!r} checkpoint, which is not an encoder-decoder "
                         "(its config.json has no is_encoder_decoder: true; transformers maps it for "
                         "AutoModelForSeq2SeqLM for its audio input, which a text2text-generation request does not "
                         f"send); fix: {fix}")
    _refuse_undecodable(where, folder, model_type, mapping[model_type])
    return mapping[model_type]


# Architectures with a key/value cache that still cannot decode a token at a time, and why (transformers 5.23.0).
WHOLE_SEQUENCE = {"cpmant": "whose forward takes the whole sequence at every step (it slices the cached prefix off "
                            "itself) and ignores attention_mask"}


def _refuse_undecodable(where: str, folder: pathlib.Path, model_type: str, class_name: str) -> None:
    """Refuses an architecture that cannot decode a token at a time (``WHOLE_SEQUENCE``) or whose forward takes no
    ``past_key_values``: the engine decodes each step from the key/value cache of the steps before (and batches rows
    by aligning those caches); a recurrent state (Mamba, RWKV) or no cache at all (OpenAI GPT, XLNet's mems) gives it
    nothing to continue from."""
    import inspect

    import transformers

    if model_type in WHOLE_SEQUENCE:
        raise BuildError(f"{where}.weights: {folder} is a {model_type!r} checkpoint ({class_name}), "
                         f"{WHOLE_SEQUENCE[model_type]}; "
                         "backend python's generation engine gives the model only each new token (with the key/value "
                         "cache of the tokens before) and pads prompts batched together, so it cannot serve this "
                         "architecture; fix: give a checkpoint of another architecture")
    model_class = getattr(transformers, class_name, None)
    if model_class is None or "past_key_values" in inspect.signature(model_class.forward).parameters:
        return
    state = ("a recurrent state instead" if getattr(model_class, "_is_stateful", False)
             else "no cache between steps")
    raise BuildError(f"{where}.weights: {folder} is a {model_type!r} checkpoint ({class_name}), whose forward takes no "
                     f"key/value cache (past_key_values; it keeps {state}); backend python's generation engine decodes "
                     "each new token from the key/value cache of the tokens before, so it cannot serve this "
                     "architecture; fix: give a checkpoint of a transformer architecture with a key/value cache")
