"""The Python-backend steps of a ``task:`` ensemble: the tokenizer step and the answer step (image tasks'
preprocessing step: image_steps.py)."""
from __future__ import annotations

import json
import pathlib
from typing import Any

from deployment_spec.builds.manifest import ModelEntry, TensorSpec
from deployment_spec.sections.model import ModelSpec
from deployment_spec.sections.tasks import TEXT, TEXT_PAIR, TaskKind
from model_build.recipes import checkpoint_image, checkpoint_text
from deployment_spec.sections.request_options import APPLIED_OPTIONS, OPTIONS, RequestOptions
from deployment_spec.sections.requirements import NO_DEPS
from model_build.errors import BuildError
from model_build.recipes.contract import TEMPLATES, PythonModel
from model_build.tensor_types import unindexed

# What hf_tokenize.py imports beyond numpy, at the release the build runs (requirements.lock), so the
# tokenizer verified at build time is the one that serves; wheels exist for CPython 3.9 and newer. Without the
# packages tokenizers declares (NO_DEPS): huggingface_hub and its dependencies serve Tokenizer.from_pretrained only,
# and were 15 of the environment's 17 packages (benchmarks/task_env_size.md).
TOKENIZE_REQUIREMENTS = (NO_DEPS, "tokenizers==0.23.3", "numpy==1.26.4")
# The tokenizer step's outputs: [rows, tokens], offsets [rows, tokens, 2].
TOKEN_OUTPUTS = ("input_ids", "attention_mask", "token_type_ids", "word_ids", "sequence_ids")
# question-answering's windows after each row's first (hf_tokenize.py): [rows, windows, tokens], the offsets
# [rows, windows, tokens, 2], and how many each row has.
WINDOW_TENSORS = (*(TensorSpec("window_" + name, "TYPE_INT64", (-1, -1)) for name in TOKEN_OUTPUTS),
                  TensorSpec("window_offsets", "TYPE_INT64", (-1, -1, 2)), TensorSpec("window_count", "TYPE_INT64", (1,)))


def text_inputs(model: ModelSpec) -> tuple[TensorSpec, ...]:
    pair = (TensorSpec(TEXT_PAIR, "TYPE_STRING", (1,)),) if checkpoint_text.task_of(model).takes_pair() else ()
    return (TensorSpec(TEXT, "TYPE_STRING", (1,)), *pair)


def tokenize(model: ModelSpec, root: pathlib.Path, consumer_int32: bool) -> PythonModel:
    folder = checkpoint_text.checkpoint(model, root)
    tok = checkpoint_text.tokenizer(folder)
    config = json.loads((folder / "config.json").read_text()) if (folder / "config.json").is_file() else {}
    # The model's own pad id first: a classifier that pools at the last real token finds it with it (GPT-2).
    pad_id = config.get("pad_token_id") if isinstance(config.get("pad_token_id"), int) else None
    params = checkpoint_text.tokenizer_params(model, folder, pad_id)
    id_type = "TYPE_INT32" if consumer_int32 else "TYPE_INT64"  # TensorRT engines take int32 ids
    outputs = tuple(TensorSpec(name, id_type if name in checkpoint_text.TOKEN_INPUTS else "TYPE_INT64", (-1,))
                    for name in TOKEN_OUTPUTS) + (TensorSpec("offsets", "TYPE_INT64", (-1, 2)),)
    if "doc_stride" in params:
        outputs += WINDOW_TENSORS
    return PythonModel(
        files={"model.py": TEMPLATES / "hf_tokenize.py", "step_requests.py": TEMPLATES / "step_requests.py",
               "tokenizer.json": tok.backend_tokenizer.to_str().encode()},
        inputs=text_inputs(model), outputs=outputs, parameters=params,
        note=f"tokenizer from {folder} ({type(tok.backend_tokenizer.model).__name__}, "
             f"{tok.backend_tokenizer.get_vocab_size()} entries, max_length {params['max_length']})",
        requirements=TOKENIZE_REQUIREMENTS)


def answer(model: ModelSpec, root: pathlib.Path, consumer_int32: bool) -> PythonModel:
    folder = checkpoint_text.checkpoint(model, root)
    task = checkpoint_text.task_of(model)
    kind = task.kind
    params = _answer_params(model, folder)
    files = {"model.py": TEMPLATES / "hf_answer.py", "step_requests.py": TEMPLATES / "step_requests.py"}
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    tokens = (TensorSpec("offsets", "TYPE_INT64", (-1, 2)), TensorSpec("word_ids", "TYPE_INT64", (-1,)))
    id_type = "TYPE_INT32" if consumer_int32 else "TYPE_INT64"  # as the tokenizer step makes them
    if kind is TaskKind.OBJECT_DETECTION:
        files["answer_object_detection.py"] = TEMPLATES / "answer_object_detection.py"
        inputs = (TensorSpec("logits", "TYPE_FP32", (-1, -1)), TensorSpec("pred_boxes", "TYPE_FP32", (-1, 4)),
                  TensorSpec("image_size", "TYPE_INT64", (2,)))
        outputs = (TensorSpec("detections", "TYPE_STRING", (1,)),)
    elif kind is TaskKind.SPEECH_RECOGNITION:
        files["answer_ctc.py"] = TEMPLATES / "answer_ctc.py"
        inputs = (TensorSpec("logits", "TYPE_FP32", (-1, -1)),)
        outputs = (TensorSpec("text", "TYPE_STRING", (1,)),)
    elif kind in (TaskKind.TEXT_CLASSIFICATION, TaskKind.IMAGE_CLASSIFICATION, TaskKind.AUDIO_CLASSIFICATION):
        inputs = (TensorSpec("logits", "TYPE_FP32", (-1,)),)
        k = min(params["top_k"], len(params["id2label"]))
        outputs = (TensorSpec("labels", "TYPE_STRING", (k,)), TensorSpec("scores", "TYPE_FP32", (k,)))
    elif kind is TaskKind.TOKEN_CLASSIFICATION:
        files["answer_token_classification.py"] = TEMPLATES / "answer_token_classification.py"
        inputs = (TensorSpec(TEXT, "TYPE_STRING", (1,)), TensorSpec("logits", "TYPE_FP32", (-1, -1)), *tokens,
                  TensorSpec("input_ids", id_type, (-1,)))
        outputs = (TensorSpec("entities", "TYPE_STRING", (1,)),)
    else:
        files["answer_question_answering.py"] = TEMPLATES / "answer_question_answering.py"
        inputs = (*text_inputs(model), TensorSpec("start_logits", "TYPE_FP32", (-1,)),
                  TensorSpec("end_logits", "TYPE_FP32", (-1,)), TensorSpec("sequence_ids", "TYPE_INT64", (-1,)),
                  *tokens, TensorSpec("attention_mask", id_type, (-1,)), *WINDOW_TENSORS)
        outputs = (TensorSpec("answers", "TYPE_STRING", (1,)),)
    if OPTIONS.get(kind.value):  # the options this answer applied, per row (hf_answer.applied_options)
        outputs += (TensorSpec(APPLIED_OPTIONS, "TYPE_STRING", (1,)),)
    vocabulary = "tokenizer.json" if "metaspace" in params else "vocab.json"  # answer_ctc.load_params read it
    what = (f"{len(params['id_to_token'])} tokens from {folder}/{vocabulary}" if kind is TaskKind.SPEECH_RECOGNITION
            else f"{len(params['id2label'])} labels from {folder}/config.json" + (
                f" ({params['rule']}, threshold {params['threshold']})" if kind is TaskKind.OBJECT_DETECTION else ""))
    return PythonModel(files=files, inputs=inputs, outputs=outputs,
                       parameters={"task": kind.value, "answer_params": json.dumps(params, sort_keys=True)},
                       note=f"answers {kind.value} with {what}")


def _answer_params(model: ModelSpec, folder: pathlib.Path) -> dict[str, Any]:
    """What the answer step needs, as the task's pipeline decides it, and the spec's bounds of a request's options
    (only where the spec sets ``task.requests``: an entry without it builds the same bytes as before)."""
    task = checkpoint_text.task_of(model)
    params = _pipeline_params(model, folder)
    if task.requests != RequestOptions():
        params["requests"] = task.requests.answer_bounds(task.kind.value)
    return params


def _pipeline_params(model: ModelSpec, folder: pathlib.Path) -> dict[str, Any]:
    task = checkpoint_text.task_of(model)
    if task.kind is TaskKind.OBJECT_DETECTION:
        return checkpoint_image.detection_params(model, folder, task.threshold)
    if task.takes_image():
        return checkpoint_image.classification_params(folder, task.top_k)
    if task.kind is TaskKind.AUDIO_CLASSIFICATION:
        from model_build.recipes import audio_steps
        return audio_steps.classification_params(folder, task.top_k)
    if task.kind is TaskKind.SPEECH_RECOGNITION:
        from model_build.python_models import answer_ctc
        try:
            return answer_ctc.load_params(folder)
        except ValueError as exc:
            raise BuildError(f"models.{model.task_entry or model.name}.weights: {exc}; save the checkpoint's CTC "
                             "tokenizer there (Wav2Vec2CTCTokenizer.save_pretrained)") from None
    return checkpoint_text.answer_params(model, folder)


def window_model(model: ModelSpec, entry: ModelEntry) -> str:
    """The answer step's ``window_model`` parameter (hf_answer.py): the model step's name, input tensors (by the
    tokenizer step's name for each: the pytorch backend's carry ``__<index>``), outputs and batch size."""
    return json.dumps({"name": entry.name, "max_batch_size": model.max_batch_size,
                       "inputs": {unindexed(t.name): [t.name, t.data_type] for t in entry.inputs},
                       "outputs": {unindexed(t.name): t.name for t in entry.outputs}}, sort_keys=True)
