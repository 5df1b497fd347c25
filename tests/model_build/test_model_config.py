"""config.pbtxt generation: golden files per backend, schema round trip, release gates."""
from __future__ import annotations

import os
import pathlib

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from deployment_spec.builds.manifest import TensorSpec
from model_build import model_config
from model_build.errors import BuildError

from mb_support import make_spec

GOLDEN = pathlib.Path(__file__).resolve().parent / "golden"
IDS = [TensorSpec("input_ids", "TYPE_INT32", (128,)), TensorSpec("attention_mask", "TYPE_INT32", (128,))]
LOGITS = [TensorSpec("logits", "TYPE_FP32", (2,))]

MODELS = """\
resnet:
  backend: onnxruntime
  source: {recipe: resnet50}
  max_batch_size: 32
  dynamic_batching: {preferred_batch_sizes: [8, 16], max_queue_delay_us: 100}
  instance_groups: [{kind: gpu, count: 1}]
  warmup: true
  onnxruntime:
    graph_optimization_level: basic
    cudnn_conv_algo_search: heuristic
    execution_mode: parallel
    arena_extend_strategy: same_as_requested
    enable_mem_pattern: true
    enable_mem_arena: false
    intra_op_threads: 2
    inter_op_threads: 1
    tensorrt_accelerator: {precision: fp16, max_workspace_mib: 2048}
bert-trt:
  backend: tensorrt
  source: {recipe: bert-base}
  sequence_length: 128
  max_batch_size: 128
  precision: fp16
  dynamic_batching: {preferred_batch_sizes: [16]}
  instance_groups: [{kind: gpu, count: 2}]
bert-pt:
  backend: pytorch
  source: {recipe: bert-large}
  sequence_length: 512
  max_batch_size: 0
t5:
  backend: python
  source: {recipe: t5-small}
  max_batch_size: 8
  dynamic_batching: {}
  instance_groups: [{kind: gpu, count: 1}]
preprocess:
  backend: python
  source: {recipe: text-preprocess}
  max_batch_size: 16
pipeline:
  backend: ensemble
  max_batch_size: 16
  ensemble:
    steps:
      - {model: preprocess, input_map: {TEXT: TEXT}, output_map: {input_ids: ids, attention_mask: mask}}
      - {model: bert-trt, input_map: {input_ids: ids, attention_mask: mask}, output_map: {logits: logits}}
    outputs: [logits]
"""


@pytest.fixture(scope="module")
def spec(module_tmp):
    return make_spec(module_tmp.mktemp("cfg"), MODELS, endpoints="""\
ep:
  kind: single-model
  models: [pipeline, resnet, bert-pt, t5]
  default_model: pipeline
  instance_type: ml.g5.2xlarge
""")


def configs(spec):
    m = spec.models
    steps = [{"model_name": "preprocess", "model_version": -1, "input_map": {"TEXT": "TEXT"},
              "output_map": {"attention_mask": "mask", "input_ids": "ids"}},
             {"model_name": "bert-trt", "model_version": -1, "input_map": {"attention_mask": "mask", "input_ids": "ids"},
              "output_map": {"logits": "logits"}}]
    return {
        "onnxruntime": model_config.build_config(
            m["resnet"], name="resnet", inputs=[TensorSpec("pixel_values", "TYPE_FP32", (3, 224, 224))],
            outputs=[TensorSpec("logits", "TYPE_FP32", (1000,))], triton_version="25.04"),
        "tensorrt": model_config.build_config(m["bert-trt"], name="bert-trt", inputs=IDS, outputs=LOGITS,
                                              triton_version="25.04"),
        "pytorch": model_config.build_config(
            m["bert-pt"], name="bert-pt", inputs=[TensorSpec("input_ids__0", "TYPE_INT64", (1, 512)),
                                                  TensorSpec("attention_mask__1", "TYPE_INT64", (1, 512))],
            outputs=[TensorSpec("logits__0", "TYPE_FP32", (1, 2))], triton_version="25.04"),
        "python": model_config.build_config(
            m["t5"], name="t5", inputs=[TensorSpec("TEXT", "TYPE_STRING", (1,))],
            outputs=[TensorSpec("OUTPUT_TEXT", "TYPE_STRING", (1,)), TensorSpec("output_ids", "TYPE_INT64", (-1,))],
            triton_version="25.04",
            parameters={"EXECUTION_ENV_PATH": "$$TRITON_MODEL_DIRECTORY/t5_env.tar.gz", "max_new_tokens": "32"}),
        "ensemble": model_config.build_config(
            m["pipeline"], name="pipeline", inputs=[TensorSpec("TEXT", "TYPE_STRING", (1,))], outputs=LOGITS,
            triton_version="25.04", ensemble_steps=steps),
    }


@pytest.mark.parametrize("backend", ["onnxruntime", "tensorrt", "pytorch", "python", "ensemble"])
def test_config_matches_golden_file(spec, backend):
    # The generated config.pbtxt is byte-for-byte the reviewed one; UPDATE_GOLDEN=1 rewrites it on purpose.
    text = model_config.render(configs(spec)[backend])
    golden = GOLDEN / f"{backend}.pbtxt"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text()


@pytest.mark.parametrize("backend", ["onnxruntime", "tensorrt", "pytorch", "python", "ensemble"])
def test_every_config_parses_with_tritons_schema(spec, backend):
    # What we write, Triton's ModelConfig reads back to the same message.
    config = configs(spec)[backend]
    parsed = text_format.Parse(model_config.render(config), model_config_pb2.ModelConfig())
    assert parsed == config


def test_max_batch_size_zero_is_written_explicitly(spec):
    # WAR: proto3 omits zeros, Triton needs max_batch_size: 0 spelled out.
    assert "max_batch_size: 0\n" in model_config.render(configs(spec)["pytorch"])


def test_ensemble_platform_is_written_literally(spec):
    # SageMaker MME finds the ensemble by the regex platform:(\s)*"ensemble".
    assert 'platform: "ensemble"' in model_config.render(configs(spec)["ensemble"])


def test_ort_graph_levels_follow_the_backend_mapping():
    # ORT: unset/0 -> all, -1 -> basic, 1 -> extended, 2 -> disabled (not the proto comment).
    from deployment_spec.sections.model import GraphLevel
    assert model_config.GRAPH_LEVEL == {GraphLevel.BASIC: -1, GraphLevel.EXTENDED: 1, GraphLevel.DISABLED: 2}


def test_ort_trt_timing_cache_keys_only_for_releases_that_know_them(spec):
    # r23.12's ORT backend fails the load on trt_* keys it does not know.
    old = model_config.render(model_config.build_config(
        spec.models["resnet"], name="resnet", inputs=[TensorSpec("pixel_values", "TYPE_FP32", (3, 224, 224))],
        outputs=[TensorSpec("logits", "TYPE_FP32", (1000,))], triton_version="23.12"))
    assert "trt_engine_cache_enable" in old
    assert "trt_timing_cache_enable" not in old


def test_field_newer_than_target_release_is_refused():
    config = model_config_pb2.ModelConfig(name="m", runtime="model.so")
    with pytest.raises(BuildError) as caught:
        model_config.check_release_fields(config, "23.12")
    assert str(caught.value) == ("model m: config field runtime needs Triton 24.01 or newer, the spec targets 23.12; "
                                 "remove the setting or raise triton_version")


def test_renamed_copy_changes_only_the_name(spec):
    text = model_config.render(configs(spec)["tensorrt"])
    renamed = model_config.renamed(text, "bert-trt-3")
    assert renamed == text.replace('name: "bert-trt"', 'name: "bert-trt-3"', 1)


def test_a_tensor_without_dims_in_a_given_config_is_refused_with_the_reshape_that_serves_it():
    from model_build import checks

    config = model_config.parse('name: "m"\nmax_batch_size: 4\noutput { name: "p" data_type: TYPE_FP32 }\n')
    with pytest.raises(BuildError) as caught:
        checks._check_dims("m", config)
    assert str(caught.value) == ("model m: tensor p has no dims; Triton refuses to load a tensor without dims: for one "
                                 "value per batch row write dims: [ 1 ] with reshape: { shape: [ ] }")


def test_one_value_per_row_is_served_as_one_column_and_reshaped_for_the_model_but_not_for_an_ensemble():
    from deployment_spec.sections.model import Backend, ModelSpec

    row = TensorSpec("confidence", "TYPE_FP32", ())
    ids = TensorSpec("input_ids", "TYPE_INT64", (-1,))
    onnx = model_config.build_config(ModelSpec(backend=Backend.ONNXRUNTIME, max_batch_size=4), name="m",
                                     inputs=[ids], outputs=[row], triton_version="25.09")
    assert (list(onnx.output[0].dims), onnx.output[0].HasField("reshape"), list(onnx.output[0].reshape.shape)) == (
        [1], True, [])
    assert not onnx.input[0].HasField("reshape")  # a tensor with dims of its own keeps them
    ensemble = model_config.build_config(ModelSpec(backend=Backend.ENSEMBLE, max_batch_size=4), name="e",
                                         inputs=[ids], outputs=[row], triton_version="25.09")
    assert (list(ensemble.output[0].dims), ensemble.output[0].HasField("reshape")) == ([1], False)


def test_a_given_config_keeps_its_one_value_per_row_reshape_and_refuses_any_other():
    given = model_config.parse('name: "p"\nmax_batch_size: 4\n'
                               'input { name: "a" data_type: TYPE_FP32 dims: 1 reshape { } }\n'
                               'input { name: "b" data_type: TYPE_FP32 dims: 4 reshape { shape: [2, 2] } }\n'
                               'output { name: "c" data_type: TYPE_FP32 dims: 3 }\n')
    assert model_config.declared_tensor(given.input[0], "cfg") == TensorSpec("a", "TYPE_FP32", ())
    assert model_config.declared_tensor(given.output[0], "cfg") == TensorSpec("c", "TYPE_FP32", (3,))
    with pytest.raises(BuildError) as caught:
        model_config.declared_tensor(given.input[1], "cfg")
    assert str(caught.value) == ("cfg: tensor b has dims [4] with reshape [2, 2]; allowed: reshape only from dims [ 1 ] "
                                 "to shape [ ] (one value per batch row); fix: give dims as the model sees them and "
                                 "reshape inside model.py")
