"""A user's scripted TorchScript file, a loop and a data-dependent branch inside, with its tensors in
the spec: `tritonsm build` runs it on the spec's sizes, the local Triton server serves it (CPU
stand-in) and it answers as torch does; `tritonsm smoke` sends the first row of the spec's samples.
"""
from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest
import torch

from deployment_spec.builds.manifest import load_manifest
from local_endpoint.client.invoke import invoke_url
from local_endpoint.client.payload import NamedTensor, encode_request
from local_endpoint.endpoints.single_model import SingleModelEndpoint
from tritonsm.cli import main as tritonsm_main


class Scored(torch.nn.Module):
    """Features per image, then per row a branch on the row's own values (scripting keeps both arms)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.classes = torch.nn.Linear(4, 5)
        self.box = torch.nn.Linear(4, 2)

    def forward(self, image: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = torch.relu(self.conv(image)).mean((2, 3))
        rows = []
        for index in range(features.shape[0]):
            row = features[index]
            if bool(row.sum() > 1.0):
                row = row * 2.0
            else:
                row = row - 1.0
            rows.append(row)
        features = torch.stack(rows)
        return self.classes(features), self.box(features)


SPEC = """\
project: OwnModel
triton_version: "25.09"
models:
  scored:
    backend: pytorch
    source: {torchscript: scored.pt}
    max_batch_size: 4
    dynamic_batching: {max_queue_delay_us: 100}
    samples: samples.npz
    inputs: [{name: INPUT__0, data_type: TYPE_FP32, dims: [3, 16, 16]}]
    outputs: [{name: OUTPUT__0, data_type: TYPE_FP32, dims: [5]}, {name: OUTPUT__1, data_type: TYPE_FP32, dims: [2]}]
endpoints:
  ep: {kind: single-model, models: [scored], instance_type: ml.c5.xlarge}
environments:
  dev: {region: us-east-1}
"""


@pytest.fixture(scope="module")
def built(module_tmp):
    root = module_tmp.mktemp("own-torchscript")
    torch.manual_seed(0)
    module = Scored().eval()
    torch.jit.save(torch.jit.script(module), str(root / "scored.pt"))
    # Dim images take one arm of the branch, bright ones the other.
    images = np.random.default_rng(0).normal(size=(6, 3, 16, 16)).astype(np.float32)
    images *= np.array([0.1, 4.0, 0.1, 4.0, 0.1, 4.0], np.float32)[:, None, None, None]
    np.savez(root / "samples.npz", INPUT__0=images)
    (root / "spec.yaml").write_text(SPEC)
    assert tritonsm_main(["build", "--spec", str(root / "spec.yaml"), "--out", str(root / "assets"),
                          "--work-dir", str(root / "work")]) == 0
    return root, module, images


def _torch(module, images: np.ndarray) -> list[np.ndarray]:
    with torch.no_grad():
        return [out.numpy() for out in module(torch.from_numpy(images))]


def test_both_arms_of_the_branch_are_taken_by_the_samples(built):
    _, module, images = built
    features = torch.relu(module.conv(torch.from_numpy(images))).mean((2, 3)).sum(1)
    assert {bool(value > 1.0) for value in features} == {True, False}


@pytest.mark.triton
def test_the_served_file_answers_as_torch_does(built):
    root, module, images = built
    manifest = load_manifest(root / "assets" / "manifest.json")
    tarball = manifest.artifact_path(manifest.endpoints["ep"].artifacts[0])
    with SingleModelEndpoint(tarball, default_model="scored", env={"SAGEMAKER_TRITON_LOG_VERBOSE": "0"},
                             cpu_stand_in=True) as endpoint:
        response = invoke_url(endpoint.url, encode_request([NamedTensor("INPUT__0", "FP32", images[:4])], binary=True))
    got = {tensor.name: tensor.array for tensor in response.outputs}
    want = _torch(module, images[:4])
    np.testing.assert_allclose(got["OUTPUT__0"], want[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["OUTPUT__1"], want[1], rtol=1e-5, atol=1e-6)


@pytest.mark.triton
def test_smoke_sends_the_first_sample_row(built, tmp_path: pathlib.Path):
    root, module, images = built
    record = tmp_path / "ep.json"
    assert tritonsm_main(["smoke", "ep", "--spec", str(root / "spec.yaml"), "--manifest",
                          str(root / "assets" / "manifest.json"), "--local", "--record", str(record)]) == 0
    recorded = json.loads(record.read_text())["models"]["scored"]
    want = _torch(module, images[:1])
    np.testing.assert_allclose(recorded["OUTPUT__0"], want[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(recorded["OUTPUT__1"], want[1], rtol=1e-5, atol=1e-6)
