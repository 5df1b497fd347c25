"""The model step of a ``task:`` (deployment_spec/sections/tasks.py): the checkpoint with its task's head, taking the
token tensors the tokenizer step makes (input_ids, attention_mask and token_type_ids where the model takes it).

- text-classification: AutoModelForSequenceClassification -> ``logits`` [batch, labels]
- token-classification: AutoModelForTokenClassification -> ``logits`` [batch, tokens, labels]
- question-answering: AutoModelForQuestionAnswering -> ``start_logits``, ``end_logits`` [batch, tokens]
- sentence-embedding: sentence-transformers' own module chain of the folder (modules.json: Transformer,
  Pooling, Dense, Normalize...; Transformer + mean pooling where it has none) -> ``sentence_embedding``
  [batch, dim], so pooling and normalisation run inside the graph, batched, where the model runs.
"""
from __future__ import annotations

import pathlib
from typing import Any, Optional

import torch

from deployment_spec.sections.model import ModelSpec
from deployment_spec.sections.tasks import IMAGE_KINDS, TaskKind
from model_build.errors import BuildError
from model_build.recipes import checkpoint_text, model_facts
from model_build.recipes.token_samples import token_samples
from model_build.recipes.contract import ExportableModel

HEADS = {
    TaskKind.TEXT_CLASSIFICATION: ("AutoModelForSequenceClassification", ("logits",)),
    TaskKind.TOKEN_CLASSIFICATION: ("AutoModelForTokenClassification", ("logits",)),
    TaskKind.QUESTION_ANSWERING: ("AutoModelForQuestionAnswering", ("start_logits", "end_logits")),
}
RECIPE_TASK = {"hf-sequence-classification": TaskKind.TEXT_CLASSIFICATION,
               "hf-token-classification": TaskKind.TOKEN_CLASSIFICATION,
               "hf-sentence-embedding": TaskKind.SENTENCE_EMBEDDING,
               "hf-question-answering": TaskKind.QUESTION_ANSWERING}


class TokenModel(torch.nn.Module):
    """Named token inputs passed as keywords (transformers 5 rejects positional export calls); ids widened
    inside the graph, so int32 ids (TensorRT) work too."""

    def __init__(self, model: torch.nn.Module, outputs: tuple[str, ...]) -> None:
        super().__init__()
        self.model = model  # transformer_hints() finds the attention geometry here
        self.outputs = outputs

    def forward(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                token_type_ids: Optional[torch.Tensor] = None) -> Any:
        named = {name: value.long() for name, value in (("input_ids", input_ids), ("attention_mask", attention_mask),
                                                         ("token_type_ids", token_type_ids)) if value is not None}
        result = self.model(**named)
        found = tuple(getattr(result, name) for name in self.outputs)
        return found[0] if len(found) == 1 else found


class SentenceEncoder(torch.nn.Module):
    """sentence-transformers' modules, called as its ``encode`` calls them (a features dict in, the
    ``sentence_embedding`` entry out)."""

    def __init__(self, encoder: torch.nn.Module) -> None:
        super().__init__()
        self.encoder = encoder
        self.model = encoder[0].auto_model  # transformer_hints() finds the attention geometry here

    def forward(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                token_type_ids: Optional[torch.Tensor] = None) -> torch.Tensor:
        features = {name: value.long() for name, value in (("input_ids", input_ids), ("attention_mask", attention_mask),
                                                            ("token_type_ids", token_type_ids)) if value is not None}
        return self.encoder(features)["sentence_embedding"]


def refuse_untrained_head(model: ModelSpec, folder: pathlib.Path, kind: TaskKind, missing: list) -> None:
    """A checkpoint without its task head's weights gets a new random head at every load: what was verified
    would not be what any other load of the folder answers."""
    if missing:
        raise BuildError(
            f"models.{model.name}.weights: {folder} has no weights for the {kind.value} head "
            f"({', '.join(sorted(missing)[:4])}{', ...' if len(missing) > 4 else ''}); transformers would give it "
            "new random weights at every load; fix: save the checkpoint fine-tuned for this task (save_pretrained "
            "after training the head), or pick the task it was trained for" + (
                "" if kind in IMAGE_KINDS else " (an encoder without a head: task: {kind: sentence-embedding})"))


def task_kind(model: ModelSpec) -> TaskKind:
    return model.task.kind if model.task is not None else RECIPE_TASK[model.source.recipe]


def exportable(model: ModelSpec, root: pathlib.Path) -> ExportableModel:
    folder = checkpoint_text.checkpoint(model, root)
    kind = task_kind(model)
    if kind is TaskKind.SENTENCE_EMBEDDING:
        encoder = checkpoint_text.sentence_transformer(folder)
        net = encoder[0].auto_model
        module: torch.nn.Module = SentenceEncoder(encoder.eval())
        outputs: tuple[str, ...] = ("sentence_embedding",)
        how = ("its sentence-transformers modules (" + ", ".join(type(m).__name__ for m in encoder) + ")"
               if checkpoint_text.has_modules(folder) else "no modules.json: mean pooling over the tokens")
    else:
        import transformers

        auto, outputs = HEADS[kind]
        net, loading = getattr(transformers, auto).from_pretrained(folder, local_files_only=True,
                                                                   output_loading_info=True)
        refuse_untrained_head(model, folder, kind, loading.get("missing_keys") or [])
        module = TokenModel(net.eval(), outputs)
        how = f"{auto}"
    names = checkpoint_text.model_inputs(folder, lambda name: model_facts.takes(net, name))
    seq = checkpoint_text.sequence_length(model, folder) if model.task is not None else \
        (model.sequence_length or checkpoint_text.DEFAULT_SEQUENCE)
    sample, end = token_samples(net, names, seq, model.backend)
    per_token = kind in (TaskKind.TOKEN_CLASSIFICATION, TaskKind.QUESTION_ANSWERING)
    axes = {**{name: {0: "batch", 1: "sequence"} for name in names},
            **{name: ({0: "batch", 1: "sequence"} if per_token else {0: "batch"}) for name in outputs}}
    note = f"weights from {folder} ({net.config.model_type}, {how}), inputs {', '.join(names)}, sequence {seq}"
    return ExportableModel(module.eval(), sample(2, 0), names, outputs, axes, sample, note, end_id=end)
