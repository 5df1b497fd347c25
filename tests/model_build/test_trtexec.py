"""Exact trtexec and docker command lines for the reference TensorRT scenarios (TensorRT's trtexec documentation and the nvcr.io/nvidia/tensorrt release notes)."""
from __future__ import annotations

import pathlib

import pytest

from deployment_spec.builds.manifest import TensorSpec
from model_build.errors import BuildError
from model_build.backends.tensorrt import trtexec

from mb_support import make_spec

IDS_128 = [TensorSpec("input_ids", "TYPE_INT32", (128,)), TensorSpec("attention_mask", "TYPE_INT32", (128,))]
IDS_512 = [TensorSpec("input_ids", "TYPE_INT32", (512,)), TensorSpec("attention_mask", "TYPE_INT32", (512,))]


@pytest.fixture(scope="module")
def spec(module_tmp):
    return make_spec(module_tmp.mktemp("trt"), """\
bert:
  backend: tensorrt
  source: {recipe: bert-base}
  sequence_length: 128
  max_batch_size: 128
  precision: fp16
  dynamic_batching: {preferred_batch_sizes: [16]}
bert-large:
  backend: tensorrt
  source: {recipe: bert-large}
  sequence_length: 512
  max_batch_size: 16
  dynamic_batching: {preferred_batch_sizes: [4, 8]}
  tensorrt: {workspace_mib: 8192, builder_optimization_level: 4, opt_batch_size: 8,
             hardware_compatibility: ampere_plus}
variable:
  backend: tensorrt
  source: {recipe: bert-base}
  max_batch_size: 8
""")


def test_tensorrt_bert_example_command(spec):
    # The MME BERT scenario: fp16, profile 1/16/128 x 128, workspace as a memory pool, timing cache.
    args = trtexec.trtexec_args(spec.models["bert"], IDS_128, "10.9.0", "8.6")
    assert args == [
        "/usr/src/tensorrt/bin/trtexec", "--onnx=/workspace/model.onnx", "--saveEngine=/workspace/model.plan",
        "--minShapes=input_ids:1x128,attention_mask:1x128",
        "--optShapes=input_ids:16x128,attention_mask:16x128",
        "--maxShapes=input_ids:128x128,attention_mask:128x128",
        "--memPoolSize=workspace:4096M", "--builderOptimizationLevel=3",
        "--timingCacheFile=/cache/timing-trt10.9.0-sm86.cache", "--fp16", "--skipInference",
    ]


def test_bert_large_seq_512_command(spec):
    # The tuning scenario: seq 512, fp32, opt batch from tensorrt.opt_batch_size, ampere+ plan.
    args = trtexec.trtexec_args(spec.models["bert-large"], IDS_512, "10.9.0", "8.6")
    assert args == [
        "/usr/src/tensorrt/bin/trtexec", "--onnx=/workspace/model.onnx", "--saveEngine=/workspace/model.plan",
        "--minShapes=input_ids:1x512,attention_mask:1x512",
        "--optShapes=input_ids:8x512,attention_mask:8x512",
        "--maxShapes=input_ids:16x512,attention_mask:16x512",
        "--memPoolSize=workspace:8192M", "--builderOptimizationLevel=4",
        "--timingCacheFile=/cache/timing-trt10.9.0-sm86.cache", "--hardwareCompatibilityLevel=ampere+",
        "--skipInference",
    ]


def test_docker_run_uses_the_tensorrt_image_of_the_triton_tag(spec):
    # Build image YY.MM = serving image YY.MM, so the plan loads in the Triton container.
    cmd = trtexec.docker_run(trtexec.image("25.04"), "/w", "/c", ["trtexec", "--help"], user="1000:1000")
    assert cmd == ["docker", "run", "--rm", "--gpus", "all", "--user", "1000:1000", "-v", "/w:/workspace",
                   "-v", "/c:/cache", "nvcr.io/nvidia/tensorrt:25.04-py3", "trtexec", "--help"]


def test_removed_flags_are_never_emitted(spec):
    for name, inputs in (("bert", IDS_128), ("bert-large", IDS_512)):
        args = trtexec.trtexec_args(spec.models[name], inputs, "10.9.0", "8.6")
        assert not [a for a in args if a.startswith(("--workspace", "--explicitBatch"))]


def test_fp16_refused_on_tensorrt_11(spec):
    with pytest.raises(BuildError) as caught:
        trtexec.trtexec_args(spec.models["bert"], IDS_128, "11.0.0", "8.6")
    assert str(caught.value) == (
        "models.bert.precision: fp16 needs trtexec --fp16, which TensorRT 11.0.0 removed (strongly typed networks "
        "only); use fp32, or a triton_version whose TensorRT is 10.x")


def test_hardware_compatibility_gated_by_tensorrt_version(spec):
    with pytest.raises(BuildError) as caught:
        trtexec.trtexec_args(spec.models["bert-large"], IDS_512, "8.5.3", "8.6")
    assert str(caught.value) == (
        "models.bert-large.tensorrt.hardware_compatibility: ampere_plus needs TensorRT 8.6 or newer, the build "
        "image has 8.5.3; use none or a newer triton_version")


def test_variable_dimension_without_sequence_length_is_refused(spec):
    with pytest.raises(BuildError) as caught:
        trtexec.trtexec_args(spec.models["variable"], [TensorSpec("input_ids", "TYPE_INT32", (-1,))], "10.9.0", "8.6")
    assert str(caught.value) == ("model variable: input input_ids has a variable dimension [-1]; set "
                                 "sequence_length so the TensorRT profile has a fixed size")


def test_plan_version_probe_command():
    assert trtexec.plan_version_args() == ["/usr/src/tensorrt/bin/trtexec", "--loadEngine=/workspace/model.plan",
                                           "--getPlanVersionOnly"]


EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def test_command_for_the_tensorrt_bert_example_spec():
    # examples/tensorrt-bert-mme.yaml as written: fp16, 1/16/128 x 128, the article's 14000 MiB workspace.
    from deployment_spec import load_spec
    model = load_spec(EXAMPLES / "tensorrt-bert-mme.yaml").models["bert"]
    assert trtexec.trtexec_args(model, IDS_128, "10.9.0", "8.6")[3:9] == [
        "--minShapes=input_ids:1x128,attention_mask:1x128", "--optShapes=input_ids:16x128,attention_mask:16x128",
        "--maxShapes=input_ids:128x128,attention_mask:128x128", "--memPoolSize=workspace:14000M",
        "--builderOptimizationLevel=3", "--timingCacheFile=/cache/timing-trt10.9.0-sm86.cache"]
    assert model.triton_names() == ["bert-0", "bert-1", "bert-2", "bert-3"]


def test_command_for_the_bert_large_example_spec():
    # examples/bert-large-tuned-sme.yaml: seq 512, profile 1/16/32, fp16.
    from deployment_spec import load_spec
    model = load_spec(EXAMPLES / "bert-large-tuned-sme.yaml").models["bert-large-trt"]
    assert trtexec.trtexec_args(model, IDS_512, "10.9.0", "8.6")[3:] == [
        "--minShapes=input_ids:1x512,attention_mask:1x512", "--optShapes=input_ids:16x512,attention_mask:16x512",
        "--maxShapes=input_ids:32x512,attention_mask:32x512", "--memPoolSize=workspace:8192M",
        "--builderOptimizationLevel=3", "--timingCacheFile=/cache/timing-trt10.9.0-sm86.cache", "--fp16",
        "--skipInference"]
