"""What a ``task:`` reads from its checkpoint folder, once for all its steps (deployment_spec/sections/tasks.py).

The tokenizer step, the model step and the answer step must agree on the sequence length, the
inputs the model takes and the labels; each fact has one function here. Imports transformers (build only).
"""
from __future__ import annotations

import functools
import json
import pathlib
from typing import Any, Optional

from deployment_spec.sections.model import ModelSpec
from deployment_spec.sections.tasks import TaskKind, Task
from model_build.errors import BuildError, first_line
from model_build.recipes.contract import weights_dir

DEFAULT_SEQUENCE = 128
MAX_DEFAULT_SEQUENCE = 512
TOKEN_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def checkpoint(model: ModelSpec, root: pathlib.Path) -> pathlib.Path:
    path = weights_dir(model, root)
    if path is None:  # the spec refuses a task without weights; a direct recipe call may not have them
        raise BuildError(f"models.{model.name}.weights: nothing; give the checkpoint directory")
    return path


def task_of(model: ModelSpec) -> Task:
    if model.task is None:
        raise BuildError(f"models.{model.name}: recipe {model.source.recipe if model.source else ''} is a step of a "
                         "task; declare the model with task: {kind: ...} and weights instead")
    return model.task


@functools.lru_cache(maxsize=8)
def tokenizer(folder: pathlib.Path) -> Any:
    """The checkpoint's fast tokenizer as transformers loads it (a slow one converted where transformers can)."""
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    except (OSError, ValueError, TypeError, ImportError) as exc:
        raise BuildError(f"{folder}: transformers cannot load a tokenizer from it ({first_line(exc)}); save the "
                         "checkpoint's tokenizer there (tokenizer.save_pretrained)") from None
    if not getattr(tok, "is_fast", False):
        raise BuildError(f"{folder}: the tokenizer ({type(tok).__name__}) has no tokenizer.json form (a 'fast' "
                         "Hugging Face tokenizer); the tokenizer step runs tokenizers' Tokenizer; save a fast "
                         "tokenizer into the folder (AutoTokenizer.from_pretrained(..., use_fast=True).save_pretrained)")
    return tok


def sentence_transformer(folder: pathlib.Path) -> Any:
    """sentence-transformers' model of the folder: its modules.json chain, or Transformer + mean pooling."""
    import logging

    from sentence_transformers import SentenceTransformer

    # Without modules.json it says it makes mean pooling; the build log says so once itself.
    logging.getLogger("sentence_transformers").setLevel(logging.ERROR)
    try:
        return SentenceTransformer(str(folder), device="cpu", local_files_only=True)
    except (OSError, ValueError, KeyError, TypeError, ImportError) as exc:
        raise BuildError(f"{folder}: sentence-transformers cannot load it as a sentence embedder "
                         f"({first_line(exc)}); save a text encoder there (SentenceTransformer.save, or "
                         "save_pretrained of a model and its tokenizer)") from None


def has_modules(folder: pathlib.Path) -> bool:
    return (folder / "modules.json").is_file()


def sequence_length(model: ModelSpec, folder: pathlib.Path) -> int:
    """The spec's sequence_length; else the checkpoint's own limit (sentence-transformers' max_seq_length,
    the tokenizer's model_max_length), at most 512; else 128."""
    if model.sequence_length:
        return model.sequence_length
    found: Optional[int] = None
    if task_of(model).kind is TaskKind.SENTENCE_EMBEDDING and has_modules(folder):
        config = folder / "sentence_bert_config.json"
        if config.is_file():
            found = json.loads(config.read_text()).get("max_seq_length")
    if found is None:
        limit = getattr(tokenizer(folder), "model_max_length", None)
        found = limit if isinstance(limit, int) and limit <= 100_000 else None
    return min(found, MAX_DEFAULT_SEQUENCE) if found else DEFAULT_SEQUENCE


def model_inputs(folder: pathlib.Path, takes: Any) -> tuple[str, ...]:
    """The token tensors both the tokenizer produces and the model's forward() takes, in TOKEN_INPUTS order."""
    produced = set(tokenizer(folder).model_input_names) | {"input_ids"}
    return tuple(name for name in TOKEN_INPUTS if name in produced and takes(name))


def tokenizer_params(model: ModelSpec, folder: pathlib.Path, pad_id: Optional[int]) -> dict[str, str]:
    """config.pbtxt parameters of the tokenizer step (model_build/python_models/hf_tokenize.py)."""
    task = task_of(model)
    tok = tokenizer(folder)
    pad = pad_id if pad_id is not None else tok.pad_token_id
    seq = sequence_length(model, folder)
    windows = window_params(model, seq, tok.num_special_tokens_to_add(pair=True)) \
        if task.kind is TaskKind.QUESTION_ANSWERING else {}
    return {
        **windows,
        "max_length": str(seq),
        "pair": "required" if task.takes_pair() else "none",
        # question-answering cuts the context, never the question (transformers' QA pipeline: only_second).
        "truncation": "only_second" if task.kind is TaskKind.QUESTION_ANSWERING else "longest_first",
        "truncation_side": str(getattr(tok, "truncation_side", "right")),
        "padding_side": str(getattr(tok, "padding_side", "right")),
        "pad_id": str(pad if pad is not None else 0),
    }


def window_params(model: ModelSpec, seq: int, specials: int) -> dict[str, str]:
    """question-answering's overlapping windows (hf_tokenize.py): doc_stride as the pipeline defaults it, refused
    where even a one-token question would leave a window no context beyond it; that bound is also a request's
    (parameters.doc_stride, hf_answer.REQUEST_OPTIONS)."""
    task = task_of(model)
    stride = task.doc_stride if task.doc_stride is not None else min(seq // 2, 128)
    most = seq - specials - 2  # a window of seq tokens: the specials, one question token, more than stride
    if stride > most:
        raise BuildError(f"models.{model.task_entry or model.name}.task.doc_stride: {stride}; allowed: 0 to {most} "
                         f"with sequence_length {seq} (a window holds {specials} special tokens, the question and "
                         f"more than doc_stride context tokens); fix: set doc_stride to at most {most}, e.g. "
                         f"{min(seq // 2, 128)} (the pipeline's default)")
    return {"doc_stride": str(stride), "max_doc_stride": str(most), "max_windows": str(task.max_windows)}


def labels(folder: pathlib.Path) -> dict[int, str]:
    """The checkpoint's labels as transformers reads them: id2label, else LABEL_0... for num_labels (default 2)."""
    config = json.loads((folder / "config.json").read_text())
    raw = config.get("id2label")
    if not raw:
        count = config.get("num_labels")
        raw = {str(i): f"LABEL_{i}" for i in range(count if isinstance(count, int) and count > 0 else 2)}
    return {int(k): str(v) for k, v in raw.items()}


def answer_params(model: ModelSpec, folder: pathlib.Path) -> dict[str, Any]:
    """What the answer step needs (model_build/python_models/hf_answer.py), as the pipeline decides it."""
    task = task_of(model)
    config = json.loads((folder / "config.json").read_text())
    names = labels(folder)
    if task.kind is TaskKind.TEXT_CLASSIFICATION:
        # TextClassificationPipeline: sigmoid for one label or multi-label problems, else softmax.
        multi = config.get("problem_type") == "multi_label_classification" or len(names) == 1
        return {"id2label": names, "top_k": task.top_k, "function": "sigmoid" if multi else "softmax"}
    if task.kind is TaskKind.TOKEN_CLASSIFICATION:
        tok = tokenizer(folder)
        backend = json.loads(tok.backend_tokenizer.to_str())
        # How the pipeline tells a word's first token from the rest: WordPiece's "##" prefix, else a space before
        # it; the normalizer decides how long a token's text is, and an unknown token is never a subword.
        return {"id2label": names, "aggregation_strategy": task.aggregation.value, "ignore_labels": ["O"],
                "continuing_subword_prefix": backend["model"].get("continuing_subword_prefix"),
                "normalizer": backend.get("normalizer"), "unk_token_id": tok.unk_token_id}
    # sequence_length: the bound of a request's max_answer_len; doc_stride and max_doc_stride: the tokenizer step's
    # (which applies a request's doc_stride), the answer step refuses a request's beyond it (hf_answer.REQUEST_OPTIONS).
    seq = sequence_length(model, folder)
    windows = window_params(model, seq, tokenizer(folder).num_special_tokens_to_add(pair=True))
    return {"id2label": names, "top_k": task.top_k, "max_answer_len": task.max_answer_length,
            "handle_impossible_answer": False, "align_to_words": True, "sequence_length": seq,
            "doc_stride": int(windows["doc_stride"]), "max_doc_stride": int(windows["max_doc_stride"])}

