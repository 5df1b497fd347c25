"""The recipe: what `tritonsm build` calls (``source: {recipe: "reviews.recipe:exportable"}`` in spec.yaml).

It returns the module and what the build cannot guess: the tensor names, an example input, the
axes that vary (batch, sequence) and how to make inputs of any batch size for the checks.
"""
from __future__ import annotations

import pathlib

import torch

from model_build.recipes import ExportableModel
from reviews.model import VOCABULARY, ReviewClassifier

DEFAULT_LENGTH = 64


def exportable(model) -> ExportableModel:
    """``model`` is the spec's entry (deployment_spec.sections.model.ModelSpec): its name, sizes and weights."""
    torch.manual_seed(0)
    module = ReviewClassifier()
    if model.weights:  # the spec's weights: directory (absolute here), holding torch.save(module.state_dict())
        module.load_state_dict(torch.load(pathlib.Path(model.weights) / "state_dict.pt", map_location="cpu"))
    length = model.sequence_length or DEFAULT_LENGTH

    def sample(batch: int, seed: int) -> dict[str, torch.Tensor]:
        generator = torch.Generator().manual_seed(seed)
        ids = torch.randint(1, VOCABULARY, (batch, length), generator=generator)
        return {"input_ids": ids, "attention_mask": torch.ones(batch, length, dtype=torch.int64)}

    axes = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"},
            "logits": {0: "batch"}}
    note = f"weights from {model.weights}" if model.weights else "no weights: random initialisation (seed 0)"
    return ExportableModel(module.eval(), sample(2, 0), ("input_ids", "attention_mask"), ("logits",), axes,
                           sample_inputs=sample, note=note)
