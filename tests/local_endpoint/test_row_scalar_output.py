"""A model that returns one value per batch row (shape [batch]) is served: Triton refuses a tensor without
dims ("model output 'confidence' must specify 'dims'"), so config.pbtxt serves it as [batch, 1] and hands
the model its own shape with ``reshape: { shape: [ ] }``. Before, the build packed a config Triton refused.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from deployment_spec.builds.manifest import load_manifest
from local_endpoint.client.invoke import invoke_url
from local_endpoint.client.payload import NamedTensor, encode_request
from local_endpoint.endpoints.single_model import SingleModelEndpoint
from tritonsm.cli import main as tritonsm_main

RECIPE = '''\
import torch
from model_build.recipes import ExportableModel


class Scorer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.head = torch.nn.Linear(4, 3)

    def forward(self, features):
        scores = self.head(features)
        return scores, torch.sigmoid(scores.max(dim=1).values)  # confidence: one value per row


def examples(batch, seed):
    return {"features": torch.linspace(-1.0, 1.0, batch * 4).reshape(batch, 4) * (seed + 1)}


def build(model):
    torch.manual_seed(0)
    return ExportableModel(Scorer().eval(), examples(2, 0), ("features",), ("scores", "confidence"),
                           {"features": {0: "batch"}, "scores": {0: "batch"}, "confidence": {0: "batch"}},
                           sample_inputs=examples)
'''

SPEC = """\
project: RowScalar
triton_version: "25.09"
models:
  scorer: {backend: onnxruntime, source: {recipe: 'row_scorer:build'}, max_batch_size: 4}
endpoints:
  ep: {kind: single-model, models: [scorer], instance_type: ml.c5.xlarge}
environments:
  dev: {region: us-east-1}
"""
FEATURES = np.array([[0.1, -0.2, 0.3, 0.4], [1.0, 0.5, -0.5, 0.0]], dtype=np.float32)


@pytest.fixture(scope="module")
def built(module_tmp):
    root = module_tmp.mktemp("row-scalar")
    (root / "row_scorer.py").write_text(RECIPE)
    (root / "spec.yaml").write_text(SPEC)
    assert tritonsm_main(["build", "--spec", str(root / "spec.yaml"), "--out", str(root / "assets"),
                          "--work-dir", str(root / "work")]) == 0
    return root


def test_the_config_serves_a_row_scalar_as_one_column_and_reshapes_it_for_the_model(built):
    import tarfile

    manifest = load_manifest(built / "assets" / "manifest.json")
    confidence = manifest.models["scorer"].outputs[1]
    # The manifest keeps the model's own shape; clients get the served one.
    assert (confidence.name, confidence.dims, confidence.served_dims(True)) == ("confidence", (), (1,))
    with tarfile.open(manifest.artifact_path(manifest.endpoints["ep"].artifacts[0])) as archive:
        member = next(m for m in archive.getmembers() if m.name.endswith("scorer/config.pbtxt"))
        text = archive.extractfile(member).read().decode()
    assert ('output {\n  name: "confidence"\n  data_type: TYPE_FP32\n  dims: 1\n  reshape {\n  }\n}' in text)
    assert text.count("reshape") == 1  # scores [batch, 3] keeps its own dims


@pytest.mark.triton
def test_the_local_triton_server_loads_it_and_answers_as_torch_does(built, tmp_path):
    import importlib.util

    manifest = load_manifest(built / "assets" / "manifest.json")
    tarball = manifest.artifact_path(manifest.endpoints["ep"].artifacts[0])
    with SingleModelEndpoint(tarball, default_model="scorer", cpu_stand_in=True) as endpoint:
        response = invoke_url(endpoint.url, encode_request([NamedTensor("features", "FP32", FEATURES)], binary=True))
    got = {tensor.name: tensor.array for tensor in response.outputs}
    spec = importlib.util.spec_from_file_location("row_scorer_test", built / "row_scorer.py")
    recipe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(recipe)
    made = recipe.build(None)
    with torch.no_grad():
        scores, confidence = made.module(torch.from_numpy(FEATURES))
    assert got["confidence"].shape == (2, 1)
    np.testing.assert_allclose(got["confidence"][:, 0], confidence.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["scores"], scores.numpy(), rtol=1e-5, atol=1e-6)
    record = tmp_path / "ep.json"
    assert tritonsm_main(["smoke", "ep", "--spec", str(built / "spec.yaml"), "--manifest",
                          str(built / "assets" / "manifest.json"), "--local", "--record", str(record)]) == 0
    assert np.shape(json.loads(record.read_text())["models"]["scorer"]["confidence"]) == (1, 1)
