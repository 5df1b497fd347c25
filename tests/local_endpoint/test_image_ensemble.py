"""examples/image-ensemble-sme.yaml end to end on this CPU machine: JPEG bytes -> DALI -> ResNet-50 (ONNX Runtime).

The example is built for real (`tritonsm build`: the pipeline serialized by Triton 26.05's DALI 2.1.0 and
checked against PIL, ResNet-50 exported and verified in ONNX Runtime 1.24.4), synthesized from that
build with cdk-nag, and served on the real Triton server with labelled CPU stand-ins for the dali and
onnxruntime models, where `tritonsm invoke --image` answers in JSON and binary+json. Heavy: about 90 s
of build (ResNet-50) and 1.3 GB of memory at peak.
"""
from __future__ import annotations

import contextlib
import io
import json
import pathlib
import tarfile

import numpy as np
import pytest

from deployment_spec import load_spec
from deployment_spec.builds.manifest import load_manifest
from model_build.backends.dali import check_images
from model_build.dali_pipeline import placement, reference

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "image-ensemble-sme.yaml"


@pytest.fixture(scope="module")
def built(module_tmp):
    from model_build import build

    root = module_tmp.mktemp("image-ensemble")
    spec = load_spec(EXAMPLE)
    report = build.run(spec, root / "assets", root / "work", log=lambda line: None)
    assert report.failed == {} and report.unavailable == {}
    return spec, root / "assets" / "manifest.json"


@pytest.fixture(scope="module")
def runtime(built, module_tmp):
    """The endpoint as `tritonsm serve` runs it: behind the local SageMaker Runtime, under its deployed name."""
    from deployment_spec import load_spec
    from deployment_spec.rules.container_env import endpoint_name
    from deployment_spec.sections.endpoint import EndpointKind
    from deployment_spec.served import resolve_endpoint
    from local_endpoint import SingleModelEndpoint
    from local_endpoint.runtime.local_runtime import LocalRuntime, NamedEndpoint

    _, manifest = built
    local = resolve_endpoint(EXAMPLE, "image-ensemble", None, manifest)
    server = SingleModelEndpoint(local.tarballs[0], default_model=local.default_model, env=local.env, cpu_stand_in=True,
                                 triton_version=local.triton_version, log_file=module_tmp.mktemp("logs") / "triton.log")
    spec = load_spec(EXAMPLE)
    name = endpoint_name(spec.project, next(iter(spec.environments)), "image-ensemble")
    with LocalRuntime([NamedEndpoint(name, EndpointKind.SINGLE_MODEL, server)], container_contract=True) as served:
        yield served


@pytest.fixture(scope="module")
def endpoint(runtime):
    return runtime.endpoints[0].server


@pytest.fixture(scope="module")
def photos(module_tmp) -> list[pathlib.Path]:
    folder = module_tmp.mktemp("photos")
    out = []
    for name, (width, height, seed) in {"photo.jpg": (800, 600, 7), "portrait.jpg": (300, 500, 8)}.items():
        (folder / name).write_bytes(check_images.jpeg(width, height, seed))
        out.append(folder / name)
    return out


def test_the_build_ships_a_gpu_pipeline_checked_on_the_cpu(built):
    spec, manifest_path = built
    manifest = load_manifest(manifest_path)
    check = manifest.models["preprocess"].verification
    # Serialized by the image's own DALI, operators on the GPU (ml.g5.xlarge), checked on DALI's CPU operators.
    assert (check.ran, check.version, check.details["placement"], check.cases) == (True, "2.1.0", "gpu", 6)
    assert check.details["max_levels"] <= 2.0 and check.details["mean_levels"] <= 0.5
    [artifact] = manifest.endpoints["image-ensemble"].artifacts
    with tarfile.open(manifest_path.parent / artifact.file) as tar:
        names = set(tar.getnames())
        config = tar.extractfile("preprocess/config.pbtxt").read().decode()
        pipeline = tar.extractfile("preprocess/1/model.dali").read()
    # One repository: the ensemble (the default model) with both steps, as the article lays it out.
    assert {"image-ensemble/config.pbtxt", "preprocess/1/model.dali", "classifier/1/model.onnx"} <= names
    assert 'backend: "dali"' in config and 'key: "num_threads"' in config
    assert placement.devices(pipeline)[1] == "decoders__Image:mixed"


def test_the_example_synthesizes_from_its_real_build(built, tmp_path):
    import app as app_module  # sets JSII_NODE to the venv's Node before aws_cdk loads
    import aws_cdk as cdk

    spec, manifest_path = built
    app = cdk.App(context=app_module.cdk_json_context(), outdir=str(tmp_path / "cdk.out"))
    app_module.build_app(spec, load_manifest(manifest_path), manifest_path, app=app)
    assembly = app.synth()  # cdk-nag runs here: any finding raises
    models = [r["Properties"] for p in pathlib.Path(assembly.directory).rglob("*.template.json")
              for r in json.loads(p.read_text())["Resources"].values() if r["Type"] == "AWS::SageMaker::Model"]
    # Every stage's model starts Triton on the ensemble, as the article's container environment does.
    assert len(models) == len(spec.environments)
    assert all(m["PrimaryContainer"]["Environment"]["SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"] == "image-ensemble"
               for m in models)


def _invoke(runtime, *options) -> str:
    from tritonsm.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["invoke", "--endpoint", "image-ensemble", "--spec", str(EXAMPLE), "--url", runtime.url,
                     *options])
    assert code == 0, out.getvalue()
    return out.getvalue()


def test_invoke_image_answers_in_json_and_binary_json_alike(runtime, photos, tmp_path):
    _invoke(runtime, "--image", *map(str, photos), "--output", str(tmp_path / "json.npz"))
    printed = _invoke(runtime, "--image", *map(str, photos), "--binary", "--output", str(tmp_path / "binary.npz"))
    # Two JPEGs of different sizes in one request (zero-padded rows): two rows of 1000 logits.
    assert "logits FP32 [2, 1000]" in printed
    with np.load(tmp_path / "json.npz") as as_json, np.load(tmp_path / "binary.npz") as as_binary:
        np.testing.assert_array_equal(as_json["logits"], as_binary["logits"])


def test_the_ensemble_equals_the_classifier_on_the_pil_reference(runtime, built, photos, tmp_path):
    import onnxruntime

    spec, manifest_path = built
    _invoke(runtime, "--image", str(photos[0]), "--output", str(tmp_path / "out.npz"))
    with np.load(tmp_path / "out.npz") as answer:
        logits = answer["logits"][0]
    manifest = load_manifest(manifest_path)
    [artifact] = manifest.endpoints["image-ensemble"].artifacts
    with tarfile.open(manifest_path.parent / artifact.file) as tar:
        graph = tar.extractfile("classifier/1/model.onnx").read()
    pixels = reference.preprocess(photos[0].read_bytes(), spec.models["preprocess"].dali)
    want = onnxruntime.InferenceSession(graph, providers=["CPUExecutionProvider"]).run(
        None, {"pixel_values": pixels[None]})[0][0]
    # DALI's pixels are within a level of PIL's; through ResNet-50 (random weights, logits ~ +-20) that stays small.
    assert np.argmax(logits) == np.argmax(want)
    np.testing.assert_allclose(logits, want, atol=0.05 * np.abs(want).max())


def test_the_stand_ins_are_labelled_and_the_smoke_test_replays_its_image_request(runtime, endpoint, built, tmp_path):
    from tritonsm.cli import main

    notes = " ".join(endpoint.stand_in_notes)
    assert "model 'preprocess' (dali) runs as a CPU stand-in" in notes and "not representative" in notes
    assert "tritonsm cpu stand-in: DALI 2.1.0" in endpoint.log_path.read_text()
    _, manifest_path = built
    args = ["smoke", "image-ensemble", "--spec", str(EXAMPLE), "--manifest", str(manifest_path), "--url", runtime.url]
    # The recorded request is a JPEG (the smoke test's sample); the replay must give the same logits.
    assert main([*args, "--record", str(tmp_path / "recording.json")]) == 0
    assert main([*args, "--expected", str(tmp_path / "recording.json")]) == 0
    recorded = json.loads((tmp_path / "recording.json").read_text())["models"]["image-ensemble"]["logits"]
    assert np.shape(recorded) == (1, 1000)
