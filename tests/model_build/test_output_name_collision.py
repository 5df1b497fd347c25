"""A recipe output named like a tensor inside the exported graph (``embedding``: the exporter's name for the
token lookup of a BERT encoder) builds; the inner tensor is renamed, the output keeps the recipe's name.

The recipe is this module's ``embedder`` (``source: {recipe: 'test_output_name_collision:embedder'}``): the
tests folder is on sys.path (conftest.py).
"""
from __future__ import annotations

import onnx
import pytest
import torch
from onnx import TensorProto, helper

from deployment_spec.builds.manifest import TensorSpec, load_manifest
from model_build import build
from model_build.errors import BuildError
from model_build.onnx_graph import output_names
from model_build.recipes import ExportableModel

from mb_support import make_spec

RENAMED = ("the exporter named a tensor inside the graph like the output embedding: renamed it embedding__inner "
           "(ONNX names each tensor once)")


class MeanPooledEmbedder(torch.nn.Module):
    """A BERT encoder, mean-pooled over the tokens the mask keeps, L2-normalised: a sentence embedding."""

    def __init__(self, encoder: torch.nn.Module) -> None:
        super().__init__()
        self.encoder = encoder

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, p=2, dim=1)


def _tokens(batch: int, seed: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 100, (batch, 16), generator=generator)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def embedder(model) -> ExportableModel:
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    encoder = BertModel(BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                   intermediate_size=64)).eval()
    axes = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"},
            "embedding": {0: "batch"}}
    return ExportableModel(MeanPooledEmbedder(encoder), _tokens(2, 0), ("input_ids", "attention_mask"),
                           ("embedding",), axes, sample_inputs=_tokens)


def test_an_output_named_like_the_encoder_s_embedding_lookup_builds_and_verifies(tmp_path):
    # Before: "model emb: the exported ONNX graph fails onnx.checker: Graph must be in single static assignment
    # (SSA) form, however 'embedding' has been used as output names multiple times."
    spec = make_spec(tmp_path, "emb: {backend: onnxruntime, source: {recipe: 'test_output_name_collision:embedder'}, "
                               "max_batch_size: 4}\n", version="25.09")
    lines: list[str] = []
    report = build.run(spec, tmp_path / "assets", tmp_path / "work", log=lines.append)
    assert (report.built, report.failed) == (["emb"], {})
    assert f"  emb: {RENAMED}" in lines
    entry = load_manifest(tmp_path / "assets" / "manifest.json").models["emb"]
    assert entry.outputs == (TensorSpec("embedding", "TYPE_FP32", (32,)),)
    # ONNX Runtime ran the renamed graph against eager PyTorch on every serving case.
    assert (entry.verification.ran, entry.verification.details["fallbacks"]) == (True, [RENAMED])


def _graph(first_output: str, value_info: tuple[str, ...] = ()) -> onnx.GraphProto:
    """x -> Relu -> <first_output> -> Neg -> t; Add(t, x) -> y, the graph's output. With ``first_output`` "y",
    the Relu's tensor has the output's name, as the exporter writes it."""
    tensor = TensorProto.FLOAT
    return helper.make_graph(
        [helper.make_node("Relu", ["x"], [first_output], name="relu"),
         helper.make_node("Neg", [first_output], ["t"], name="neg"),
         helper.make_node("Add", ["t", "x"], ["y"], name="add")],
        "g", [helper.make_tensor_value_info("x", tensor, [2])], [helper.make_tensor_value_info("y", tensor, [2])],
        value_info=[helper.make_tensor_value_info(name, tensor, [2]) for name in value_info])


def _model(graph: onnx.GraphProto) -> onnx.ModelProto:
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_the_inner_tensor_with_the_output_s_name_is_renamed_and_its_readers_follow():
    graph = _graph("y", value_info=("y",))
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(_model(graph), full_check=True)
    assert output_names.separate("m", graph) == {"y": ["y__inner"]}
    assert graph == _graph("y__inner", value_info=("y__inner",))
    onnx.checker.check_model(_model(graph), full_check=True)


def test_a_graph_without_a_collision_is_left_as_it_is():
    graph = _graph("r", value_info=("r",))
    assert output_names.separate("m", graph) == {}
    assert graph == _graph("r", value_info=("r",))


def test_a_fresh_name_skips_the_names_the_graph_already_has():
    graph = _graph("y")
    graph.node.append(helper.make_node("Identity", ["t"], ["y__inner"], name="taken"))
    assert output_names.separate("m", graph) == {"y": ["y__inner_2"]}
    assert [list(node.output) for node in graph.node] == [["y__inner_2"], ["t"], ["y"], ["y__inner"]]
    assert list(graph.node[1].input) == ["y__inner_2"]


def test_a_node_that_reads_the_name_after_both_tensors_exist_is_refused_with_the_fix():
    graph = _graph("y")
    graph.node.append(helper.make_node("Neg", ["y"], ["z"], name="late"))
    with pytest.raises(BuildError) as caught:
        output_names.separate("m", graph)
    assert str(caught.value) == (
        "model m: the exported ONNX graph has a tensor inside named like the output y, and node late reads y after "
        "both are made, so which one it reads cannot be told (ONNX names each tensor once); rename the output in the "
        "recipe's output_names to a name no tensor inside the model has (e.g. y_output)")


def test_an_output_named_like_a_graph_input_is_refused_with_the_fix():
    tensor = TensorProto.FLOAT
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["x"], name="relu")], "g",
                              [helper.make_tensor_value_info("x", tensor, [2])],
                              [helper.make_tensor_value_info("x", tensor, [2])])
    with pytest.raises(BuildError) as caught:
        output_names.separate("m", graph)
    assert str(caught.value) == ("model m: the output x has the name of an input of the exported ONNX graph (ONNX "
                                 "names each tensor once); rename the output in the recipe's output_names")
