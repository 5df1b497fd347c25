"""Python-backend models that ask for KIND_GPU instances, on this GPU-less machine."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

import triton_model_fixtures as models
from local_endpoint.client.invoke import invoke_url
from local_endpoint.client.payload import NamedTensor, encode_request
from local_endpoint.endpoints.single_model import SingleModelEndpoint
from local_endpoint.errors import UnsupportedBackendError

pytestmark = pytest.mark.skipif(
    __import__("shutil").which("nvidia-smi") is not None, reason="this machine has a GPU: KIND_GPU loads as is")


@pytest.fixture(scope="module")
def gpu_add_tarball(module_tmp) -> pathlib.Path:
    root = module_tmp.mktemp("gpu-groups")
    gpu_config = models.ADD_CONFIG.replace("kind: KIND_CPU count: 1", "kind: KIND_GPU count: 2")
    models.write_model(root / "repo", "add", gpu_config, {"model.py": models.ADD_MODEL})
    return models.pack(root / "repo", root / "add.tar.gz")


def test_gpu_instances_are_named_before_start(gpu_add_tarball: pathlib.Path) -> None:
    # Triton's own "no GPUs are available" would only show in the log tail after a failed start.
    with pytest.raises(UnsupportedBackendError) as caught:
        SingleModelEndpoint(gpu_add_tarball).start()
    assert str(caught.value) == (
        "cannot serve locally, this machine has no GPU:\n"
        f"  model 'add' in {gpu_add_tarball} asks for KIND_GPU instances (instance_group)\n"
        "rerun with --cpu-stand-in to run those instances on the CPU (labelled; latency is not representative), "
        "or test on a deployed endpoint"
    )


@pytest.mark.triton
def test_cpu_stand_in_runs_gpu_instances_on_the_cpu(gpu_add_tarball: pathlib.Path) -> None:
    with SingleModelEndpoint(gpu_add_tarball, cpu_stand_in=True) as endpoint:
        # Labelled at start-up, then served with the same count of (CPU) instances.
        assert endpoint.stand_in_notes == [
            "model 'add': its KIND_GPU instance groups run as KIND_CPU on this GPU-less machine (same counts); "
            "latency is not representative"]
        a = np.arange(4, dtype=np.float32).reshape(1, 4)
        request = encode_request([NamedTensor("A", "FP32", a), NamedTensor("B", "FP32", a)], binary=False)
        response = invoke_url(endpoint.url, request)
        np.testing.assert_array_equal(response.outputs[0].array, a + a)
