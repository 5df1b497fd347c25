"""Trained checkpoints of architectures no built-in recipe names deploy with ``weights:`` and no code.

Checkpoint directories are saved here with save_pretrained from transformers' own config classes
(real configs at tiny sizes, random weights): nothing is downloaded. The generic recipes load them
through AutoModelForSequenceClassification / AutoModelForImageClassification.
"""
from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
import torch

from deployment_spec.builds.manifest import load_manifest
from model_build import build
from mb_support import make_spec


@pytest.fixture(scope="module")
def checkpoints(module_tmp):
    from transformers import (ConvNextConfig, ConvNextForImageClassification, DebertaV2Config,
                              DebertaV2ForSequenceClassification, DistilBertConfig,
                              DistilBertForSequenceClassification, ViTConfig, ViTForImageClassification)

    root = module_tmp.mktemp("checkpoints")
    torch.manual_seed(0)
    DistilBertForSequenceClassification(DistilBertConfig(
        vocab_size=256, dim=32, n_layers=2, n_heads=2, hidden_dim=64, max_position_embeddings=64,
        num_labels=3)).save_pretrained(root / "distilbert")
    DebertaV2ForSequenceClassification(DebertaV2Config(
        vocab_size=256, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=64, num_labels=2)).save_pretrained(root / "deberta")
    ViTForImageClassification(ViTConfig(
        image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, num_labels=5)).save_pretrained(root / "vit")
    ConvNextForImageClassification(ConvNextConfig(
        hidden_sizes=[8, 16], depths=[1, 1], num_stages=2, image_size=64, num_labels=4)).save_pretrained(root / "convnext")
    spec = make_spec(root, """\
reviews: {backend: onnxruntime, source: {recipe: hf-sequence-classification}, weights: distilbert, sequence_length: 16,
          max_batch_size: 4}
tickets: {backend: onnxruntime, source: {recipe: hf-sequence-classification}, weights: deberta, sequence_length: 16,
          max_batch_size: 2}
photos: {backend: onnxruntime, source: {recipe: hf-image-classification}, weights: vit, max_batch_size: 4}
scans: {backend: pytorch, source: {recipe: hf-image-classification}, weights: convnext, max_batch_size: 2}
""", version="25.09")
    lines: list[str] = []
    report = build.run(spec, root / "assets", root / "work", log=lines.append)
    assert report.exit_code() == 0, report.failed
    return root, load_manifest(root / "assets" / "manifest.json"), lines


def _shipped(root, name, file="model.onnx"):
    return next((root / "work").rglob(f"{name}/1/{file}"))


def test_a_distilbert_checkpoint_deploys_through_the_generic_text_recipe(checkpoints):
    from transformers import AutoModelForSequenceClassification

    root, manifest, lines = checkpoints
    entry = manifest.models["reviews"]
    assert [t.name for t in entry.inputs] == ["input_ids", "attention_mask"]
    assert (entry.outputs[0].name, entry.outputs[0].dims) == ("logits", (3,))
    # Verified in Triton 25.09's ONNX Runtime against the checkpoint in eager PyTorch, padding checks included.
    check = entry.verification
    assert (check.ran, check.version, check.cases, check.invariance_error < 1e-5) == (True, "1.23.0", 7, True)
    assert any(line.endswith(f"weights from {root / 'distilbert'} (distilbert)") for line in lines)
    # The shipped graph answers as the checkpoint does.
    eager = AutoModelForSequenceClassification.from_pretrained(root / "distilbert").eval()
    ids = torch.randint(0, 256, (2, 16))
    mask = torch.ones(2, 16, dtype=torch.int64)
    with torch.no_grad():
        want = eager(input_ids=ids, attention_mask=mask).logits.numpy()
    session = onnxruntime.InferenceSession(str(_shipped(root, "reviews")), providers=["CPUExecutionProvider"])
    got = session.run(["logits"], {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})[0]
    np.testing.assert_allclose(got, want, atol=1e-4)


def test_a_deberta_checkpoint_deploys_through_the_same_recipe(checkpoints):
    root, manifest, lines = checkpoints
    check = manifest.models["tickets"].verification
    assert (check.ran, check.version, check.invariance_error < 1e-5) == (True, "1.23.0", True)
    assert any(line.endswith(f"weights from {root / 'deberta'} (deberta-v2)") for line in lines)


def test_vit_and_convnext_checkpoints_deploy_through_the_generic_image_recipe(checkpoints):
    root, manifest, _ = checkpoints
    photos, scans = manifest.models["photos"], manifest.models["scans"]
    # The image size comes from each checkpoint's config (ViT's position embeddings fix it).
    assert (photos.inputs[0].name, photos.inputs[0].dims, photos.outputs[0].dims) == ("pixel_values", (3, 32, 32), (5,))
    assert photos.verification.ran and photos.verification.cases == 2
    # ConvNeXt as TorchScript (backend pytorch): traced and checked against eager PyTorch.
    assert [t.dims for t in scans.inputs + scans.outputs] == [(3, 64, 64), (4,)]
    assert scans.parity["max_abs_error"] < 1e-4 and _shipped(root, "scans", "model.pt").is_file()
