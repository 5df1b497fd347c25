"""Tiny image checkpoints made offline for image ``task:`` tests and benchmarks, each with its image processor.

For the tests (no hub access on the build machines): a transformers image classifier at a few thousand
parameters, random weights (seed 0) with a head trained by nobody but saved (so every load answers alike), and
the image processor its family ships with, at a small size, saved together as ``save_pretrained`` writes a
checkpoint. Families differ in their resize rule: ``vit`` resizes to a fixed height x width (bilinear),
``convnext`` resizes the shortest edge to size / crop_pct then centre-crops (bicubic), ``deit`` resizes to a
fixed size, then centre-crops. Imports torch and transformers (build and tests only).
"""
from __future__ import annotations

import pathlib
from typing import Any

LABELS = ["cat", "dog", "bird", "fish"]
SIZE = 32


def _model_and_processor(family: str) -> tuple[Any, Any]:
    import transformers as t

    labels = dict(id2label=dict(enumerate(LABELS)), label2id={v: k for k, v in enumerate(LABELS)})
    if family == "vit":
        config = t.ViTConfig(image_size=SIZE, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                             intermediate_size=64, **labels)
        return t.ViTForImageClassification(config), t.ViTImageProcessorPil(size={"height": SIZE, "width": SIZE})
    if family == "convnext":
        config = t.ConvNextConfig(hidden_sizes=[8, 16], depths=[1, 1], num_stages=2, **labels)
        return t.ConvNextForImageClassification(config), t.ConvNextImageProcessorPil(
            size={"shortest_edge": SIZE}, crop_pct=0.875)
    if family == "deit":
        config = t.DeiTConfig(image_size=SIZE, patch_size=8, hidden_size=32, num_hidden_layers=2,
                              num_attention_heads=2, intermediate_size=64, **labels)
        return t.DeiTForImageClassification(config), t.DeiTImageProcessorPil(
            size={"height": SIZE + 8, "width": SIZE + 8}, crop_size={"height": SIZE, "width": SIZE})
    raise ValueError(f"family {family!r}: one of vit, convnext, deit")


def save(folder: pathlib.Path, family: str = "vit") -> pathlib.Path:
    import torch

    torch.manual_seed(0)
    model, processor = _model_and_processor(family)
    folder.mkdir(parents=True, exist_ok=True)
    model.eval().save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder
