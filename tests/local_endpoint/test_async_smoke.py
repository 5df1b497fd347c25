"""`tritonsm smoke` on an asynchronous endpoint: the request through the local S3 and InvokeEndpointAsync (an
asynchronous endpoint takes no InvokeEndpoint), its answer checked against the build as any endpoint's is; and
what --url needs to find the local S3, with its exact message."""
from __future__ import annotations

import pathlib

import pytest

from tritonsm.cli import main as tritonsm_main

RECIPE = '''\
import torch
from model_build.recipes import ExportableModel


class Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))

    def forward(self, features):
        return self.layers(features)


def examples(batch, seed):
    return {"features": torch.linspace(-1.0, 1.0, batch * 6).reshape(batch, 6) * (seed + 1)}


def build(model):
    torch.manual_seed(0)
    return ExportableModel(Head().eval(), examples(2, 0), ("features",), ("logits",),
                           {"features": {0: "batch"}, "logits": {0: "batch"}}, sample_inputs=examples)
'''
SPEC = """\
project: AsyncSmoke
triton_version: "25.09"
models:
  head: {backend: onnxruntime, source: {recipe: 'head_recipe:build'}, max_batch_size: 4}
endpoints:
  queued:
    kind: single-model
    models: [head]
    instance_type: ml.c5.xlarge
    asynchronous: {max_concurrent_invocations_per_instance: 2}
    scaling: {min_instances: 0, max_instances: 2}
environments:
  dev: {region: eu-west-1}
"""


@pytest.fixture(scope="module")
def built(module_tmp) -> pathlib.Path:
    root = module_tmp.mktemp("async-smoke")
    (root / "head_recipe.py").write_text(RECIPE)
    (root / "spec.yaml").write_text(SPEC)
    assert tritonsm_main(["build", "--spec", str(root / "spec.yaml"), "--out", str(root / "assets"),
                          "--work-dir", str(root / "work")]) == 0
    return root


@pytest.mark.triton
def test_smoke_local_sends_an_asynchronous_endpoint_its_request_through_s3(built, capsys) -> None:
    assert tritonsm_main(["smoke", "queued", "--spec", str(built / "spec.yaml"), "--manifest",
                          str(built / "assets" / "manifest.json"), "--local"]) == 0
    out = capsys.readouterr().out
    assert "smoke queued: all 1 model(s) answered" in out


def test_smoke_url_on_an_asynchronous_endpoint_needs_the_local_s3(built, capsys, monkeypatch) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    assert tritonsm_main(["smoke", "queued", "--spec", str(built / "spec.yaml"), "--manifest",
                          str(built / "assets" / "manifest.json"), "--url", "http://127.0.0.1:9"]) == 2
    assert capsys.readouterr().err == (
        "error: endpoint queued is asynchronous: its requests go through the local S3 of `tritonsm serve`; set "
        "AWS_ENDPOINT_URL_S3 to the URL its banner prints (local S3, SNS and SQS at ...) and run smoke again\n")
