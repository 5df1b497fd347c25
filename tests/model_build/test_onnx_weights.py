"""Graphs rewritten with their weights on disk give the bytes of the same rewrites in memory."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from model_build.onnx_graph import export as onnx_export

from model_build.onnx_graph import weights as onnx_weights

from model_build.backends.onnxruntime import optimize_worker

from model_build.backends.onnxruntime import optimize as ort_optimize
from model_build.recipes import builtin

from mb_support import make_spec


def _model_with_every_kind_of_tensor() -> onnx.ModelProto:
    """Initializers big and small, raw and typed, with doc strings; a Constant node; a subgraph with its own."""
    rng = np.random.default_rng(0)
    big = numpy_helper.from_array(rng.standard_normal((64, 64)).astype(np.float32), "w")
    big.doc_string = "a weight"
    typed = helper.make_tensor("shape", TensorProto.INT64, [2], [64, 64])  # int64_data, not raw_data
    bias = numpy_helper.from_array(rng.standard_normal(64).astype(np.float32), "b")
    then = helper.make_graph([helper.make_node("Add", ["y", "t"], ["z"])], "then", [],
                             [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 64])],
                             [numpy_helper.from_array(rng.standard_normal((1, 64)).astype(np.float32), "t")])
    other = helper.make_graph([helper.make_node("Identity", ["y"], ["z2"])], "else", [],
                              [helper.make_tensor_value_info("z2", TensorProto.FLOAT, [1, 64])])
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["a"]),
             helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(
                 rng.standard_normal((16, 16)).astype(np.float32), "k")),
             helper.make_node("Reshape", ["a", "shape"], ["y"]),
             helper.make_node("If", ["c"], ["out"], then_branch=then, else_branch=other)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64]),
                                           helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 64])], [big, typed, bias])
    graph.doc_string = "graph doc"
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], producer_name="test")
    helper.set_model_props(model, {"k": "v"})
    return model


def test_staged_then_inline_is_the_bytes_onnx_saves_from_memory(tmp_path):
    model = _model_with_every_kind_of_tensor()
    onnx.save(model, str(tmp_path / "in_memory.onnx"))
    graph = tmp_path / "staged" / "model.onnx"
    graph.parent.mkdir()
    assert onnx_weights.stage(tmp_path / "in_memory.onnx", graph) == 5
    # The weight went to the data file; the small tensors stayed in the graph.
    staged = onnx.load(str(graph), load_external_data=False)
    assert [onnx.external_data_helper.uses_external_data(t) for t in staged.graph.initializer] == [True, False, False]
    onnx_weights.inline(graph, tmp_path / "back.onnx")
    assert (tmp_path / "back.onnx").read_bytes() == (tmp_path / "in_memory.onnx").read_bytes()


def test_tensors_of_subgraphs_and_constants_are_inlined_too(tmp_path):
    model = _model_with_every_kind_of_tensor()
    onnx.save(model, str(tmp_path / "in_memory.onnx"))
    # Every tensor in the data file, the Constant's and the subgraph's included.
    onnx.save(model, str(tmp_path / "all.onnx"), save_as_external_data=True, location="all.onnx.data",
              size_threshold=0, convert_attribute=True)
    onnx_weights.inline(tmp_path / "all.onnx", tmp_path / "back.onnx")
    back = list(onnx.external_data_helper._get_all_tensors(onnx.load(str(tmp_path / "back.onnx"))))
    want = list(onnx.external_data_helper._get_all_tensors(_model_with_every_kind_of_tensor()))  # save changed model
    assert len(back) == len(want) == 5
    assert not any(onnx.external_data_helper.uses_external_data(t) for t in back)
    assert all(np.array_equal(numpy_helper.to_array(a), numpy_helper.to_array(b)) for a, b in zip(back, want))


def test_graph_of_reads_a_weight_from_its_file(tmp_path):
    onnx.save(_model_with_every_kind_of_tensor(), str(tmp_path / "in_memory.onnx"))
    graph = tmp_path / "model.onnx"
    onnx_weights.stage(tmp_path / "in_memory.onnx", graph)
    with onnx_weights.graph_of(graph) as proto:
        weight = numpy_helper.to_array(proto.graph.initializer[0])  # what the fusers call
    assert np.array_equal(weight, numpy_helper.to_array(_model_with_every_kind_of_tensor().graph.initializer[0]))


def _tiny_bert(tmp_path):
    spec = make_spec(tmp_path, """\
        text:
          backend: onnxruntime
          source: {recipe: tiny-bert}
          sequence_length: 16
          max_batch_size: 4
        """)
    return builtin.exportable(spec.models["text"], tmp_path)


def _fused_in_memory(exported, scratch) -> bytes:
    """The fusion as the build did it before the weights stayed on disk: every step on the whole model in memory."""
    import onnx_ir as ir
    import onnxruntime
    from onnxruntime.transformers import optimizer
    from onnxscript.rewriter.ort_fusions import optimize_for_ort

    model, _ = optimize_for_ort(ir.from_proto(onnx.load(str(exported))))
    onnx.save(ir.to_proto(model), str(scratch / "onnxscript.onnx"))
    fused = optimizer.optimize_model(str(scratch / "onnxscript.onnx"), model_type="bert", num_heads=2, hidden_size=32,
                                     opt_level=0)
    fused.save_model_to_file(str(scratch / "fused.onnx"))
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(scratch / "basic.onnx")
    onnxruntime.InferenceSession(str(scratch / "fused.onnx"), options, providers=["CPUExecutionProvider"])
    ort_optimize._prune_opset_imports(scratch / "basic.onnx")
    return (scratch / "basic.onnx").read_bytes()


def test_fusions_with_the_weights_on_disk_give_the_bytes_of_fusions_in_memory(tmp_path):
    made = _tiny_bert(tmp_path)
    graph = tmp_path / "export" / "exported.onnx"
    graph.parent.mkdir()
    onnx_export.export_graph("text", made, graph)
    onnx_weights.inline(graph, tmp_path / "exported.onnx")
    report = ort_optimize.optimize_for_ort(graph, tmp_path / "fused.onnx", **ort_optimize.transformer_hints(made.module))
    assert report.fuser == "onnxscript+onnxruntime.transformers" and report.fused_ops["Attention"] == 2
    oracle = tmp_path / "oracle"
    oracle.mkdir()
    assert (tmp_path / "fused.onnx").read_bytes() == _fused_in_memory(tmp_path / "exported.onnx", oracle)


def test_the_worker_reports_a_failed_optimization_with_its_mode_and_file(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises(ort_optimize.OrtOptimizeError) as caught:
        optimize_worker.make("basic", bad, tmp_path / "out.onnx", {}, lambda line: None)
    assert str(caught.value).startswith(f"the ONNX optimization process (basic) of {bad} failed (exit 1):\n")


def test_the_worker_is_stopped_at_its_limit_and_the_step_fails_naming_it(tmp_path):
    graph = tmp_path / "m.onnx"
    onnx.save(_model_with_every_kind_of_tensor(), str(graph))
    # Starting Python and importing onnx take longer than 0.01 s: the limit passes first.
    with pytest.raises(ort_optimize.OrtOptimizeError) as caught:
        optimize_worker.make("fused", graph, tmp_path / "out.onnx", {}, lambda line: None, limit=0.01)
    assert str(caught.value) == f"the fused optimization of {graph} did not finish within 0 s and was stopped"
    assert not (tmp_path / "out.onnx").exists()


def test_the_fusion_limit_grows_with_the_graph_and_its_weight_files(tmp_path):
    graph = tmp_path / "m.onnx"
    graph.write_bytes(b"x" * 2_000_000)
    (tmp_path / "m.onnx.data").write_bytes(b"x" * 3_000_000)
    (tmp_path / "other.onnx").write_bytes(b"x" * 9_000_000)  # another graph's file does not count
    assert optimize_worker.fusion_limit(graph) == optimize_worker.FUSION_BASE_SECONDS + 5.0


def test_load_graph_is_the_model_without_the_bytes_of_its_weights(tmp_path):
    model = _model_with_every_kind_of_tensor()
    onnx.save(model, str(tmp_path / "m.onnx"))
    for tensor in model.graph.initializer:
        tensor.ClearField("raw_data")
    # Typed data (int64_data) and the constants in nodes and subgraphs stay; raw weight bytes do not.
    assert onnx_weights.load_graph(tmp_path / "m.onnx") == model
