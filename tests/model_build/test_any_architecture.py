"""Checkpoints of architectures the other tests do not cover: each builds, or fails as one model with its
real cause, never with a traceback from ``tritonsm build``.

Checkpoint directories are saved here with save_pretrained from transformers' own config classes (tiny
sizes, random weights, seed 0): nothing is downloaded.
"""
from __future__ import annotations

import pytest
import torch

from deployment_spec.manifest import load_manifest
from model_build import build
from mb_support import make_spec

FUSION_FAILED = "no transformer-fused graph: onnxruntime.transformers fusion failed: IndexError: list index out of range"


@pytest.fixture(scope="module")
def gpt2_build(module_tmp):
    from transformers import (DistilBertConfig, DistilBertForSequenceClassification, FunnelConfig,
                              FunnelForSequenceClassification, GPT2Config, GPT2ForSequenceClassification,
                              SegformerConfig, SegformerForImageClassification)

    root = module_tmp.mktemp("architectures")
    torch.manual_seed(0)
    # A decoder-only classifier: ONNX Runtime's transformer fuser does not know its exported graph.
    GPT2ForSequenceClassification(GPT2Config(vocab_size=256, n_embd=32, n_layer=2, n_head=2, n_positions=64,
                                             num_labels=2, pad_token_id=0)).save_pretrained(root / "gpt2")
    DistilBertForSequenceClassification(DistilBertConfig(
        vocab_size=256, dim=32, n_layers=2, n_heads=2, hidden_dim=64, max_position_embeddings=64,
        num_labels=3)).save_pretrained(root / "distilbert")
    # Attention heads per stage (a list) and no hidden_size: no single geometry for the transformer fuser.
    SegformerForImageClassification(SegformerConfig(
        num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[8, 16], patch_sizes=[7, 3], strides=[4, 2],
        num_attention_heads=[1, 2], mlp_ratios=[2, 2], num_labels=3, image_size=32)).save_pretrained(root / "segformer")
    # Its pooling fixes the sequence length while tracing: torch.export refuses the dynamic axis.
    FunnelForSequenceClassification(FunnelConfig(vocab_size=256, block_sizes=[1, 1], d_model=32, n_head=2, d_head=16,
                                                 d_inner=64, num_labels=2)).save_pretrained(root / "funnel")
    spec = make_spec(root, """\
decoder: {backend: onnxruntime, source: {recipe: hf-sequence-classification}, weights: gpt2, sequence_length: 16,
          max_batch_size: 2}
encoder: {backend: onnxruntime, source: {recipe: hf-sequence-classification}, weights: distilbert,
          sequence_length: 16, max_batch_size: 2}
vision: {backend: onnxruntime, source: {recipe: hf-image-classification}, weights: segformer, max_batch_size: 2}
pooled: {backend: onnxruntime, source: {recipe: hf-sequence-classification}, weights: funnel, sequence_length: 16,
         max_batch_size: 2}
""", version="25.09")
    lines: list[str] = []
    report = build.run(spec, root / "assets", root / "work", log=lines.append)
    return root, report, lines


def test_a_failed_transformer_fusion_falls_back_to_the_unfused_graph_and_says_so(gpt2_build):
    # Before: onnxruntime.transformers' IndexError ended `tritonsm build` with a traceback.
    _, report, lines = gpt2_build
    assert f"  decoder: {FUSION_FAILED}; trying the graph with basic optimizations instead" in lines
    assert "decoder" in report.failed and "decoder" not in report.built


def test_the_decoder_is_refused_with_the_measured_difference_and_the_other_model_builds(gpt2_build):
    # The unfused graphs export and run, but the exported classifier picks its token from the ids at
    # masked positions: the verification refuses it with what it measured, as one failed model.
    root, report, _ = gpt2_build
    assert report.failed["decoder"] == (
        "model decoder: no graph of it serves the eager PyTorch answers in ONNX Runtime 1.23.0 (the runtime of "
        "Triton 25.09; atol 0.001, rtol 0.001): the graph with basic optimizations ignores the attention mask "
        "(changing only the token ids at masked positions moves logits by 0.162); the graph as exported ignores "
        "the attention mask (changing only the token ids at masked positions moves logits by 0.162). If even the "
        "graph as exported differs, the export froze a data-dependent branch or a shape: check the recipe's "
        "forward(); else pick a triton_version whose runtime runs it, or raise models.decoder.tolerance if that "
        "error is acceptable")
    assert report.built == ["encoder", "vision"]
    assert load_manifest(root / "assets" / "manifest.json").models["encoder"].verification.ran


def test_a_vision_config_with_attention_heads_per_stage_builds_with_the_plain_optimizations(gpt2_build):
    # Before: int() of SegFormer's list of heads ended `tritonsm build` with a TypeError traceback.
    root, _, lines = gpt2_build
    check = load_manifest(root / "assets" / "manifest.json").models["vision"].verification
    assert (check.ran, check.graph, check.cases) == (True, "graph with basic optimizations", 2)
    assert not any(line.startswith("  vision: transformer fusions") for line in lines)


def test_an_export_failure_names_the_exporter_s_own_error_without_its_banner(gpt2_build):
    # Before: "torch.onnx.export failed (TorchExportError: Failed to export the model with torch.export.
    # \x1b[96mThis is step 1/3\x1b[0m of exporting the model to ONNX. Next steps:)".
    _, report, _ = gpt2_build
    assert report.failed["pooled"] == (
        "model pooled: torch.onnx.export failed (ValueError: Found the following conflicts between user-specified "
        "ranges and inferred ranges from model tracing: Received user-specified dim hint Dim.DYNAMIC(min=None, "
        "max=None), but tracing inferred a static shape of 16 for dimension inputs['input_ids'].shape[1].); serve "
        "the model with backend: pytorch (a TorchScript trace) if it traces, or change its forward() so "
        "torch.export takes it")
