"""Mixture-of-experts layers switch to an exportable implementation for the export only."""
from __future__ import annotations

import pytest
import torch

from model_build.onnx_graph import experts


def _mixtral():
    from transformers import MixtralConfig, MixtralForSequenceClassification

    return MixtralForSequenceClassification(MixtralConfig(
        vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, num_local_experts=2, num_experts_per_tok=1, num_labels=2, pad_token_id=0))


class _Wrapper(torch.nn.Module):
    """What a recipe hands the exporter: the transformers model inside a module of its own."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner


def test_the_outermost_transformers_model_switches_and_comes_back_even_when_the_export_fails():
    model = _mixtral()
    own = model.get_experts_implementation()
    assert experts.switchable(_Wrapper(model)) == [model]
    with pytest.raises(RuntimeError, match="export failed"):
        with experts.exportable_experts(_Wrapper(model)) as note:
            assert note == experts.NOTE
            assert model.get_experts_implementation()[""] == "batched_mm"
            raise RuntimeError("export failed")
    assert model.get_experts_implementation() == own


def test_the_batched_experts_answer_what_the_model_s_own_answer():
    torch.manual_seed(0)
    model = _mixtral().eval()
    ids = torch.randint(1, 64, (2, 8))
    with torch.no_grad():
        own = model(input_ids=ids).logits
        with experts.exportable_experts(model):
            batched = model(input_ids=ids).logits
    torch.testing.assert_close(batched, own, atol=1e-5, rtol=1e-5)


def test_a_model_without_experts_is_left_alone():
    module = torch.nn.Linear(2, 2)
    with experts.exportable_experts(module) as note:
        assert note == ""
    assert experts.switchable(module) == []
