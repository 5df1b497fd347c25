"""Checkpoints of architectures the other tests do not cover: each builds, or fails as one model with its
real cause, never with a traceback from ``tritonsm build``.

Checkpoint directories are saved here with save_pretrained from transformers' own config classes (tiny
sizes, random weights, seed 0): nothing is downloaded. One ``build.run`` builds them all.
"""
from __future__ import annotations

import json

import pytest
import torch

from deployment_spec.builds.manifest import load_manifest
from model_build import build
from mb_support import make_spec

FUSION_FAILED = "no transformer-fused graph: onnxruntime.transformers fusion failed: IndexError: list index out of range"
TORCHSCRIPT = "exported with the TorchScript-based exporter (torch.onnx.export dynamo=False) instead"
FUNNEL_FALLBACK = (
    "the torch.export-based exporter failed (ValueError: Found the following conflicts between user-specified ranges "
    "and inferred ranges from model tracing: Received user-specified dim hint Dim.DYNAMIC(min=None, max=None), but "
    f"tracing inferred a static shape of 16 for dimension inputs['input_ids'].shape[1].); {TORCHSCRIPT}")
BRANCH_FALLBACK = (
    "the torch.export-based exporter failed (GuardOnDataDependentSymNode: Could not guard on data-dependent "
    f"expression Eq(u0, 1) (unhinted: Eq(u0, 1)).  (Size-like symbols: none)); {TORCHSCRIPT}")
EXPERTS = ("its mixture-of-experts layers were exported with transformers' batched_mm experts implementation (the "
           "default grouped_mm is a custom operator no ONNX exporter converts)")
GATHER = ("fails to run (RuntimeException: [ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : Non-zero status code returned "
          "while running GatherElements node. Name:'/model/funnel/encoder/GatherElements' Status Message: [with Tin = "
          "long int; int64_t = long int] GatherElements op: Out of range value in index tensor)")


@pytest.fixture(scope="module")
def architectures(module_tmp):
    from transformers import (ConvNextConfig, ConvNextForImageClassification, DistilBertConfig,
                              DistilBertForSequenceClassification, FunnelConfig, FunnelForSequenceClassification,
                              GPT2Config, GPT2ForSequenceClassification, MixtralConfig,
                              MixtralForSequenceClassification, SegformerConfig,
                              SegformerForImageClassification, SwinConfig, SwinForImageClassification, ViTConfig,
                              ViTForImageClassification)

    root = module_tmp.mktemp("architectures")
    torch.manual_seed(0)
    # A decoder-only classifier: ONNX Runtime's transformer fuser does not know its exported graph.
    GPT2ForSequenceClassification(GPT2Config(vocab_size=256, n_embd=32, n_layer=2, n_head=2, n_positions=64,
                                             num_labels=2, pad_token_id=0)).save_pretrained(root / "gpt2")
    # An encoder the torch.export-based exporter takes.
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
    # Windowed attention: shifted windows over a 8 x 8 patch grid.
    SwinForImageClassification(SwinConfig(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[1, 2],
                                          window_size=4, num_labels=3)).save_pretrained(root / "swin")
    ConvNextForImageClassification(ConvNextConfig(num_stages=2, hidden_sizes=[8, 16], depths=[1, 1], num_labels=3,
                                                  image_size=32)).save_pretrained(root / "convnext")
    ViTForImageClassification(ViTConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2,
                                        num_attention_heads=2, intermediate_size=64,
                                        num_labels=3)).save_pretrained(root / "vit")
    # Mixture of experts: transformers runs them with its own grouped_mm operator, which no exporter converts.
    MixtralForSequenceClassification(MixtralConfig(
        vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, num_local_experts=4, num_experts_per_tok=2, max_position_embeddings=64, num_labels=2,
        pad_token_id=0)).save_pretrained(root / "mixtral")
    # A checkpoint transformers itself cannot read: its config names an architecture it does not know.
    (root / "unknown").mkdir()
    (root / "unknown" / "config.json").write_text(json.dumps({"model_type": "no-such-architecture"}))
    spec = make_spec(root, """\
decoder: {backend: onnxruntime, source: {recipe: hf-sequence-classification}, weights: gpt2, sequence_length: 16,
          max_batch_size: 2}
encoder: {backend: onnxruntime, source: {recipe: hf-sequence-classification}, weights: distilbert,
          sequence_length: 16, max_batch_size: 2}
vision: {backend: onnxruntime, source: {recipe: hf-image-classification}, weights: segformer, max_batch_size: 2}
pooled: {backend: onnxruntime, source: {recipe: hf-sequence-classification}, weights: funnel, sequence_length: 16,
         max_batch_size: 2}
windowed: {backend: onnxruntime, source: {recipe: hf-image-classification}, weights: swin, max_batch_size: 2}
cnn: {backend: onnxruntime, source: {recipe: hf-image-classification}, weights: convnext, max_batch_size: 2}
vit: {backend: onnxruntime, source: {recipe: hf-image-classification}, weights: vit, max_batch_size: 2}
unknown: {backend: onnxruntime, source: {recipe: hf-sequence-classification}, weights: unknown, max_batch_size: 2}
branching: {backend: onnxruntime, source: {recipe: 'user_recipes:branching'}, max_batch_size: 2}
experts: {backend: onnxruntime, source: {recipe: hf-sequence-classification}, weights: mixtral, sequence_length: 16,
          max_batch_size: 2}
""", version="25.09")
    lines: list[str] = []
    report = build.run(spec, root / "assets", root / "work", log=lines.append)
    return root, report, lines


def verification(root, name: str):
    return load_manifest(root / "assets" / "manifest.json").models[name].verification


def test_what_builds_and_what_is_refused(architectures):
    _, report, _ = architectures
    assert report.built == ["decoder", "encoder", "vision", "windowed", "cnn", "vit", "branching", "experts"]
    assert sorted(report.failed) == ["pooled", "unknown"]


def test_a_failed_transformer_fusion_falls_back_to_the_unfused_graph_and_says_so(architectures):
    # Before: onnxruntime.transformers' IndexError ended `tritonsm build` with a traceback.
    root, _, lines = architectures
    assert f"  decoder: {FUSION_FAILED}; trying the graph with basic optimizations instead" in lines
    check = verification(root, "decoder")
    assert (check.ran, check.graph, check.details["fallbacks"]) == (True, "graph with basic optimizations",
                                                                     [FUSION_FAILED])


def test_a_decoder_only_classifier_is_held_to_eager_answers_where_eager_itself_reads_masked_ids(architectures):
    # Before: refused because "changing only the token ids at masked positions moves logits by 0.162", which
    # eager PyTorch does too: GPT-2's classifier reads the last token that is not the pad id, whatever the mask.
    root, _, _ = architectures
    assert "rejected" not in verification(root, "decoder").details  # the first graph tried agrees on every case


def test_an_encoder_ships_the_transformer_fused_graph_of_the_default_exporter(architectures):
    root, _, _ = architectures
    check = verification(root, "encoder")
    assert (check.ran, check.graph, check.details.get("fallbacks")) == (True, "transformer-fused graph", None)


def test_a_vision_config_with_attention_heads_per_stage_builds_with_the_plain_optimizations(architectures):
    # Before: int() of SegFormer's list of heads ended `tritonsm build` with a TypeError traceback.
    root, _, lines = architectures
    check = verification(root, "vision")
    assert (check.ran, check.graph, check.cases) == (True, "graph with basic optimizations", 2)
    assert not any(line.startswith("  vision: transformer fusions") for line in lines)


def test_a_model_torch_export_refuses_is_exported_by_the_torchscript_exporter_and_verified(architectures):
    root, _, lines = architectures
    assert f"  branching: {BRANCH_FALLBACK}" in lines
    check = verification(root, "branching")
    assert (check.ran, check.details["fallbacks"]) == (True, [BRANCH_FALLBACK])


def test_a_torchscript_graph_that_froze_a_shape_is_refused_with_what_it_did_and_the_next_way(architectures):
    # Before: refused with "torch.onnx.export failed (ValueError: Found the following conflicts ...)".
    _, report, lines = architectures
    assert f"  pooled: {FUNNEL_FALLBACK}" in lines
    assert report.failed["pooled"] == (
        "model pooled: no graph of it serves the eager PyTorch answers in ONNX Runtime 1.23.0 (the runtime of Triton "
        f"25.09; atol 0.001, rtol 0.001): the transformer-fused graph {GATHER}; the graph with basic optimizations "
        f"{GATHER}; the graph as exported {GATHER}. If even the graph as exported differs, the export froze a "
        "data-dependent branch or a shape: serve the model with models.pooled.backend: pytorch (the build traces it "
        "with torch.jit.trace and checks the trace on the same serving cases; a model that does not trace is "
        "refused there with the tracer's error), or change the recipe's forward(); else pick a triton_version whose "
        "runtime runs it. Raise models.pooled.tolerance only if you accept the measured difference as the model's "
        "answer")


def test_mixture_of_experts_exports_with_batched_experts_and_is_verified_against_the_model_s_own(architectures):
    # Before: refused with "operator transformers.grouped_mm_fallback has no ONNX conversion at opset 18".
    root, _, lines = architectures
    assert f"  experts: {EXPERTS}" in lines
    check = verification(root, "experts")
    assert (check.ran, check.details["fallbacks"][0]) == (True, EXPERTS)


def test_windowed_attention_cnn_and_vit_build_and_verify(architectures):
    root, _, _ = architectures
    shipped = {name: (verification(root, name).ran, verification(root, name).graph)
               for name in ("windowed", "cnn", "vit")}
    assert shipped == {"windowed": (True, "graph with basic optimizations"),
                       "cnn": (True, "graph with basic optimizations"),
                       "vit": (True, "transformer-fused graph")}


def test_an_error_inside_transformers_fails_that_model_with_its_step_and_the_others_build(architectures):
    # Before: transformers' ValueError ended `tritonsm build` with a traceback and no model was built.
    _, report, lines = architectures
    assert report.failed["unknown"] == (
        'model unknown: step "load recipe" failed with ValueError: The checkpoint you are trying to load has model '
        "type `no-such-architecture` but Transformers does not recognize this architecture. This could be because "
        "of an issue with the checkpoint, or because your version of Transformers is out of date.; no check of the "
        "build anticipated it: make sure the model loads and runs in PyTorch as given (its recipe, its weights "
        "directory's config.json), rerun `tritonsm build --model unknown` to see it alone, and report it with the "
        "build log if it persists; the other models build regardless")
    assert not any("Traceback" in line for line in lines)


def test_a_model_neither_exporter_takes_names_each_exporter_s_own_first_error(tmp_path):
    spec = make_spec(tmp_path, "listed: {backend: onnxruntime, source: {recipe: 'user_recipes:python_list'}}\n")
    report = build.run(spec, tmp_path / "assets", tmp_path / "work", log=lambda line: None)
    assert report.failed["listed"] == (
        "model listed: torch.onnx.export failed with both exporters: the torch.export-based one (ValueError: Found "
        "the following conflicts between user-specified ranges and inferred ranges from model tracing: Received "
        "user-specified dim hint Dim.DYNAMIC(min=None, max=None), but tracing inferred a static shape of 2 for "
        "dimension inputs['x'].shape[0].) and the TorchScript-based one (RuntimeError: output 1 (0.5 [ "
        "torch.DoubleTensor{} ]) of traced region did not have observable data dependence with trace inputs; this "
        "probably indicates your program cannot be understood by the tracer.); change its forward() so one of them "
        "takes it, or serve the model with backend: pytorch if torch.jit.trace takes it (the TorchScript-based "
        "exporter traces it the same way before converting: its error says which failed)")
