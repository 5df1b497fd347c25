"""Specs with a model this machine cannot build: synth names it and the ways forward, and
`-c endpoints=...` synthesizes the built endpoints alone, saying what it leaves out."""
import json

import pytest
from aws_cdk.assertions import Template

import app as app_module
from deployment_spec import load_spec
from fake_build import fake_build
from synth_helpers import ROOT, Synth, run_app as _run_app
from triton_constructs import SynthError

BERT_LARGE = ROOT / "examples" / "bert-large-tuned-sme.yaml"
NO_GPU = ("model bert-large-trt: a TensorRT plan needs an NVIDIA GPU and a Docker engine (or a local trtexec): "
          "no NVIDIA GPU (nvidia-smi not found)")


def _cpu_build(tmp_path):
    """The manifest `tritonsm build` writes for bert-large-tuned-sme on a machine without a GPU."""
    spec = load_spec(BERT_LARGE)
    manifest = fake_build(spec, tmp_path / "assets", endpoints={"bert-large-pt": spec.endpoints["bert-large-pt"]})
    body = json.loads(manifest.read_text())
    body["not_built"] = {"endpoints.bert-large-trt": "models not built: bert-large-trt", "models.bert-large-trt": NO_GPU}
    body["unavailable_here"] = ["bert-large-trt"]
    manifest.write_text(json.dumps(body))
    return spec, manifest


def test_the_full_synth_names_the_unbuilt_model_and_the_ways_forward(tmp_path):
    spec, manifest = _cpu_build(tmp_path)
    with pytest.raises(SynthError) as caught:
        Synth(spec, manifest, tmp_path / "cdk.out")
    assert str(caught.value) == (
        "endpoint 'bert-large-trt':\n"
        "  - model 'bert-large-trt' was not built: a TensorRT plan needs an NVIDIA GPU and a Docker engine (or a local "
        "trtexec): no NVIDIA GPU (nvidia-smi not found)\n"
        "  - build bert-large-trt where it can be built (a TensorRT plan: a host with a Docker engine and the GPU of "
        "ml.g4dn.xlarge) with `tritonsm build --require-all`, then synthesize with that build's manifest: "
        "`cdk synth -c manifest=PATH`; or synthesize only the built endpoints: `cdk synth -c endpoints=bert-large-pt`")


def test_a_model_that_failed_is_not_sent_to_a_gpu_host(tmp_path):
    spec, manifest = _cpu_build(tmp_path)
    body = json.loads(manifest.read_text())
    body["not_built"]["models.bert-large-trt"] = "model bert-large-trt: models.bert-large-trt.weights: no such folder"
    body["unavailable_here"] = []
    manifest.write_text(json.dumps(body))
    with pytest.raises(SynthError) as caught:
        Synth(spec, manifest, tmp_path / "cdk.out")
    assert str(caught.value).splitlines()[1:] == [
        "  - model 'bert-large-trt' was not built: models.bert-large-trt.weights: no such folder",
        "  - fix the error above and run `tritonsm build`; or synthesize only the built endpoints: "
        "`cdk synth -c endpoints=bert-large-pt`"]


def test_the_built_endpoint_synthesizes_alone_and_the_app_says_what_it_left_out(tmp_path):
    _, manifest = _cpu_build(tmp_path)
    done = _run_app(tmp_path, {"spec": str(BERT_LARGE), "manifest": str(manifest), "endpoints": "bert-large-pt"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.splitlines()[-1] == (
        "note: -c endpoints=bert-large-pt: this cloud assembly leaves out the stacks of endpoint(s) bert-large-trt in "
        "every environment. A stack left out is neither diffed nor deployed, and never deleted: cdk deploy acts "
        "only on the stacks it is given")
    stacks = sorted(p.name for p in (tmp_path / "cdk.out").glob("assembly-*/*.template.json"))
    # Each of the three stages: its storage stack and the TorchScript endpoint's; no TensorRT endpoint anywhere.
    assert len(stacks) == 6 and sum("Storage" in s for s in stacks) == 3, stacks
    assert not any("trt" in s.lower() for s in stacks), stacks


def test_an_unknown_endpoint_in_the_selection_is_refused(tmp_path):
    done = _run_app(tmp_path, {"endpoints": "classifer,vision-nlp"})
    assert done.returncode == 2
    assert done.stderr == (
        "error: -c endpoints=classifer,vision-nlp:\n"
        "  - got 'classifer'; allowed: endpoints of triton.yaml: vision-nlp, classifier; give a comma-separated "
        "list, e.g. -c endpoints=vision-nlp, or leave it out for all\n")


def test_leaving_an_endpoint_out_changes_no_other_stack(tmp_path, default_synth):
    spec = default_synth.spec
    partial = Synth(spec, default_synth.manifest_path, tmp_path / "cdk.out", endpoints=["classifier"])
    for env in spec.environments:
        stage = partial.stage(env)
        assert sorted(stage.endpoints) == ["classifier"]
        # The storage stack and the kept endpoint's stack are exactly what the full synth makes.
        for name in ("Storage", "classifier"):
            assert Template.from_stack(partial.stack(env, name)).to_json() == default_synth.template(env, name).to_json()
