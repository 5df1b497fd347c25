"""`--cpu-stand-in`: onnxruntime/pytorch models rewritten as labelled Python-backend models, nothing else changed."""

from __future__ import annotations

import pathlib
import warnings

import numpy as np
import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

import triton_model_fixtures as models
from local_endpoint.client.invoke import invoke_url
from local_endpoint.client.payload import NamedTensor, encode_request
from local_endpoint.endpoints.single_model import SingleModelEndpoint
from local_endpoint.errors import LocalEndpointError, TarballError, UnsupportedBackendError
from local_endpoint.stand_in.cpu_stand_in import MODEL_CODE, replace_model_directory

# Everything an onnxruntime config may carry that the stand-in must keep.
ONNX_CONFIG = """\
name: "bert"
platform: "onnxruntime_onnx"
max_batch_size: 16
input { name: "input_ids" data_type: TYPE_INT64 dims: [ -1 ] }
input { name: "attention_mask" data_type: TYPE_INT64 dims: [ -1 ] }
output { name: "logits" data_type: TYPE_FP32 dims: [ 2 ] }
dynamic_batching { preferred_batch_size: [ 4, 8 ] max_queue_delay_microseconds: 100 }
instance_group { kind: KIND_GPU count: 2 gpus: [ 0 ] }
parameters { key: "cudnn_conv_algo_search" value { string_value: "1" } }
model_warmup {
  name: "zeros" batch_size: 1
  inputs { key: "input_ids" value { data_type: TYPE_INT64 dims: [ 8 ] zero_data: true } }
  inputs { key: "attention_mask" value { data_type: TYPE_INT64 dims: [ 8 ] zero_data: true } }
}
"""


def parse(text: str) -> model_config_pb2.ModelConfig:
    return text_format.Parse(text, model_config_pb2.ModelConfig())


def test_the_config_changes_only_backend_gpu_kind_and_labels(tmp_path: pathlib.Path) -> None:
    model_dir = models.write_model(tmp_path, "bert", ONNX_CONFIG, {"model.onnx": "weights"})
    replace_model_directory(model_dir, "onnxruntime", "bert/config.pbtxt in x.tar.gz")
    expected = parse(ONNX_CONFIG)
    expected.ClearField("platform")
    expected.backend = "python"
    # No GPU on the local server: the group runs on the CPU, with its count.
    expected.instance_group[0].kind = model_config_pb2.ModelInstanceGroup.KIND_CPU
    expected.instance_group[0].ClearField("gpus")
    expected.parameters["tritonsm_cpu_stand_in"].string_value = "onnxruntime"
    expected.parameters["tritonsm_stand_in_file"].string_value = "model.onnx"
    assert parse((model_dir / "config.pbtxt").read_text()) == expected
    assert (model_dir / "1" / "model.py").read_text() == MODEL_CODE.read_text()
    assert (model_dir / "1" / "model.onnx").read_text() == "weights"  # the stand-in runs the model's own file


def test_a_config_without_tensors_is_refused(tmp_path: pathlib.Path) -> None:
    # The onnxruntime backend can fill inputs in from the ONNX file; the stand-in cannot.
    model_dir = models.write_model(tmp_path, "m", 'platform: "onnxruntime_onnx"\nmax_batch_size: 4\n',
                                   {"model.onnx": "x"})
    with pytest.raises(TarballError) as caught:
        replace_model_directory(model_dir, "onnxruntime", "m/config.pbtxt in m.tar.gz")
    assert str(caught.value) == (
        "m/config.pbtxt in m.tar.gz lists no input tensors; the onnxruntime backend fills them in from the model "
        "file, the CPU stand-in cannot: list every input and output in config.pbtxt (tritonsm build writes them)"
    )


def test_a_model_without_its_file_is_refused(tmp_path: pathlib.Path) -> None:
    model_dir = models.write_model(tmp_path, "m", models.ONNX_CONFIG, {"weights.bin": "x"})
    with pytest.raises(TarballError) as caught:
        replace_model_directory(model_dir, "onnxruntime", "m/config.pbtxt in m.tar.gz")
    assert str(caught.value) == (
        "m/config.pbtxt in m.tar.gz: the model has no version directory holding model.onnx (e.g. 1/model.onnx); "
        "the CPU stand-in runs the model's own model.onnx: rebuild the model (tritonsm build)"
    )


def test_a_tensorrt_plan_cannot_be_stood_in(tmp_path: pathlib.Path) -> None:
    models.write_model(tmp_path / "repo", "plan", 'platform: "tensorrt_plan"\nmax_batch_size: 8\n',
                       {"model.plan": "engine"})
    tarball = models.pack(tmp_path / "repo", tmp_path / "plan.tar.gz")
    with pytest.raises(UnsupportedBackendError) as caught:
        SingleModelEndpoint(tarball, cpu_stand_in=True).start()
    assert str(caught.value) == (
        "cannot serve locally, the Triton server of the nvidia-pytriton wheel lacks a backend:\n"
        f"  model 'plan' in {tarball} needs the 'tensorrt' backend: a TensorRT plan (model.plan) is GPU-only and "
        "cannot be stood in on the CPU; serve the ONNX variant of the model (backend: onnxruntime) with "
        "--cpu-stand-in, or test it on a deployed endpoint\n"
        "it has only: ensemble, python; test these models on a deployed endpoint (tritonsm invoke --endpoint ENDPOINT --deployed)"
    )


TORCHSCRIPT_CONFIG = """\
platform: "pytorch_libtorch"
max_batch_size: 4
input { name: "B__1" data_type: TYPE_FP32 dims: [ 3 ] }
input { name: "A__0" data_type: TYPE_FP32 dims: [ 3 ] }
output { name: "PRODUCT__1" data_type: TYPE_FP32 dims: [ 3 ] }
output { name: "SUM__0" data_type: TYPE_FP32 dims: [ 3 ] }
dynamic_batching { }
"""


@pytest.mark.triton
def test_a_torchscript_model_runs_by_the_pytorch_backends_naming(tmp_path: pathlib.Path) -> None:
    # Config order differs from the positions on purpose: `<name>__<index>` decides, as in the pytorch backend.
    import torch

    class SumAndProduct(torch.nn.Module):
        def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return a + b, a * b

    model_dir = models.write_model(tmp_path / "repo", "calc", TORCHSCRIPT_CONFIG, {})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # TorchScript is what the pytorch backend serves
        torch.jit.save(torch.jit.script(SumAndProduct()), str(model_dir / "1" / "model.pt"))
    tarball = models.pack(tmp_path / "repo", tmp_path / "calc.tar.gz")
    a = np.array([[1.0, 2.0, 3.0]], dtype=np.float32)
    b = np.array([[10.0, 20.0, 30.0]], dtype=np.float32)
    env = {"SAGEMAKER_TRITON_LOG_VERBOSE": "0"}
    with SingleModelEndpoint(tarball, env=env, cpu_stand_in=True) as endpoint:
        response = invoke_url(endpoint.url, encode_request(
            [NamedTensor("A__0", "FP32", a), NamedTensor("B__1", "FP32", b)], binary=False))
        notes = endpoint.stand_in_notes
    outputs = {tensor.name: tensor.array.tolist() for tensor in response.outputs}
    assert outputs == {"SUM__0": (a + b).tolist(), "PRODUCT__1": (a * b).tolist()}
    assert notes == [
        "model 'calc' (pytorch) runs as a CPU stand-in: a Python-backend model running TorchScript "
        "(torch.jit.load) on its model.pt; latency and the backend's tuning parameters are not representative"
    ]


def _add_onnx(path: pathlib.Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    row = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", 4]) for n in ("A", "B", "SUM")]
    graph = helper.make_graph([helper.make_node("Add", ["A", "B"], ["SUM"])], "add", row[:2], row[2:])
    # Opset 17 / IR 8: what every supported release's ONNX Runtime reads (1.16 and newer).
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, str(path))


ADD_ONNX_CONFIG = """\
platform: "onnxruntime_onnx"
max_batch_size: 4
input { name: "A" data_type: TYPE_FP32 dims: [ 4 ] }
input { name: "B" data_type: TYPE_FP32 dims: [ 4 ] }
output { name: "SUM" data_type: TYPE_FP32 dims: [ 4 ] }
"""


@pytest.mark.triton
def test_an_onnx_stand_in_runs_the_onnx_runtime_of_the_endpoint_image(tmp_path: pathlib.Path) -> None:
    # Triton 25.04's image serves ONNX with ONNX Runtime 1.21.0; this machine's venv has a newer one.
    from deployment_spec.facts.serving_runtimes import runtime
    from model_build.verification import side_env

    model_dir = models.write_model(tmp_path / "repo", "add", ADD_ONNX_CONFIG, {})
    _add_onnx(model_dir / "1" / "model.onnx")
    tarball = models.pack(tmp_path / "repo", tmp_path / "add.tar.gz")
    a = np.arange(4, dtype=np.float32).reshape(1, 4)
    log = tmp_path / "triton.log"
    with SingleModelEndpoint(tarball, env={"SAGEMAKER_TRITON_LOG_VERBOSE": "0"}, cpu_stand_in=True,
                             triton_version="25.04", log_file=log) as endpoint:
        response = invoke_url(endpoint.url, encode_request(
            [NamedTensor("A", "FP32", a), NamedTensor("B", "FP32", a)], binary=False))
        notes = endpoint.stand_in_notes
    assert response.outputs[0].array.tolist() == (a + a).tolist()
    assert runtime("25.04").onnxruntime_wheel == "1.21.0"
    assert notes == [
        "model 'add' (onnxruntime) runs as a CPU stand-in: a Python-backend model running ONNX Runtime 1.21.0 "
        "(Triton 25.04's release) on its model.onnx; latency and the backend's tuning parameters are not "
        "representative"]
    site = side_env.ensure("onnxruntime", "1.21.0").site_dir
    assert f"tritonsm cpu stand-in: onnxruntime 1.21.0 from {site / 'onnxruntime'}" in log.read_text()


def test_an_unknown_triton_version_for_the_stand_in_is_refused(tmp_path: pathlib.Path) -> None:
    model_dir = models.write_model(tmp_path / "repo", "add", ADD_ONNX_CONFIG, {})
    _add_onnx(model_dir / "1" / "model.onnx")
    tarball = models.pack(tmp_path / "repo", tmp_path / "add.tar.gz")
    with pytest.raises(LocalEndpointError) as caught:
        SingleModelEndpoint(tarball, cpu_stand_in=True, triton_version="24.13").start()
    assert str(caught.value) == (
        "--triton-version '24.13' is not a supported release; allowed: 23.12, 24.01, 24.03, 24.05, 24.09, 25.04, "
        "25.09, 26.05 (the spec's triton_version)")


def test_a_serving_runtime_that_cannot_be_installed_is_explained(tmp_path: pathlib.Path, monkeypatch) -> None:
    from model_build.verification import side_env

    def refuse(package, version, log):
        raise side_env.ServingEnvError(f"cannot install {package}=={version} (no index)")

    monkeypatch.setattr(side_env, "ensure", refuse)
    model_dir = models.write_model(tmp_path / "repo", "add", ADD_ONNX_CONFIG, {})
    _add_onnx(model_dir / "1" / "model.onnx")
    tarball = models.pack(tmp_path / "repo", tmp_path / "add.tar.gz")
    with pytest.raises(LocalEndpointError) as caught:
        SingleModelEndpoint(tarball, cpu_stand_in=True, triton_version="25.04").start()
    assert str(caught.value) == ("--cpu-stand-in runs ONNX models in Triton 25.04's ONNX Runtime: cannot install "
                                 "onnxruntime==1.21.0 (no index)")
