"""Tiny image checkpoints made offline for image ``task:`` tests and benchmarks, each with its image processor.

For the tests (no hub access on the build machines): a transformers image classifier at a few thousand
parameters, random weights (seed 0) with a head trained by nobody but saved (so every load answers alike), and
the image processor its family ships with, at a small size, saved together as ``save_pretrained`` writes a
checkpoint. Families differ in their resize rule: ``vit`` resizes to a fixed height x width (bilinear),
``convnext`` resizes the shortest edge to size / crop_pct then centre-crops (bicubic), ``deit`` resizes to a
fixed size, then centre-crops; the detectors ``detr`` and ``conditional_detr`` (tiny ResNet backbone) keep the
aspect ratio (shortest edge 48, longest 80); the embedders ``clip`` (the whole CLIP model, bicubic shortest edge
and crop) and ``dinov2`` (a bare encoder, BiT's processor). Imports torch and transformers (build and tests only).
"""
from __future__ import annotations

import pathlib
from typing import Any

LABELS = ["cat", "dog", "bird", "fish"]
# Detectors (model type: its image processor, PIL backend): DETR's softmax rule, Conditional DETR's sigmoid top-k.
DETECTORS = {"detr": "DetrImageProcessorPil", "conditional_detr": "ConditionalDetrImageProcessorPil"}
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
    if family == "clip":  # the whole CLIP model: its image embedding is get_image_features (projected)
        tower = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2)
        config = t.CLIPConfig(text_config=dict(tower, vocab_size=100, max_position_embeddings=16, bos_token_id=0,
                                               eos_token_id=1, pad_token_id=1),
                              vision_config=dict(tower, image_size=SIZE, patch_size=8), projection_dim=16)
        return t.CLIPModel(config), t.CLIPImageProcessorPil(size={"shortest_edge": SIZE},
                                                           crop_size={"height": SIZE, "width": SIZE})
    if family == "dinov2":  # a vision encoder: its image embedding is the pooled output (CLS after layernorm)
        config = t.Dinov2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                image_size=SIZE, patch_size=8)
        return t.Dinov2Model(config), t.BitImageProcessorPil(size={"shortest_edge": SIZE + 8},
                                                            crop_size={"height": SIZE, "width": SIZE})
    if family in DETECTORS:
        backbone = {"model_type": "resnet", "embedding_size": 8, "hidden_sizes": [8, 16, 16, 16],
                    "depths": [1, 1, 1, 1], "layer_type": "basic", "out_features": ["stage4"]}
        sizes = dict(use_timm_backbone=False, backbone_config=backbone, d_model=32, encoder_layers=1, decoder_layers=2,
                     encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
                     num_queries=10)
        config = t.AutoConfig.for_model(family, **sizes, **labels)
        model = t.AutoModelForObjectDetection.from_config(config)
        spread(model)
        processor = getattr(t, DETECTORS[family])(size={"shortest_edge": 48, "longest_edge": 80})
        return model, processor
    raise ValueError(f"family {family!r}: one of vit, convnext, deit, clip, dinov2, {', '.join(DETECTORS)}")


def spread(model: Any) -> None:
    """Seeded noise on every weight outside the norm layers: a random detector's queries then differ in boxes and
    scores (else every query answers the same box). Also used by benchmarks/hf_image_coverage.py."""
    import torch

    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" not in name and "bn" not in name.lower():
                parameter.add_(torch.randn(parameter.shape, generator=generator) * 0.3)


def save(folder: pathlib.Path, family: str = "vit") -> pathlib.Path:
    import torch

    torch.manual_seed(0)
    model, processor = _model_and_processor(family)
    folder.mkdir(parents=True, exist_ok=True)
    model.eval().save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder
