"""Every synth-time refusal, matched on its exact message (what SageMaker would reject minutes into a deploy)."""
import dataclasses
import json

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam

import app as app_module
from deployment_spec import images, load_spec
from deployment_spec.endpoint import Deployment, Strategy
from deployment_spec.manifest import load_manifest
from fake_build import fake_build
from synth_helpers import ROOT, SPECS
from triton_constructs import SynthError, TritonEndpoint, TritonImage, TritonModel
from triton_constructs.checks import endpoint_name


def _bare(region="us-east-1"):
    return cdk.Stack(cdk.App(), "Bare", env=cdk.Environment(region=region))


def test_unsupported_triton_version():
    with pytest.raises(SynthError) as caught:
        TritonImage(_bare(), "Image", version="22.05")
    assert str(caught.value) == ("Triton image:\n  - sagemaker-tritonserver '22.05' is not in the SageMaker SDK's "
                                 f"registry; supported versions: {', '.join(images.versions())}")


def test_unsupported_region_lists_the_supported_ones():
    with pytest.raises(SynthError) as caught:
        TritonImage(_bare("us-gov-west-1"), "Image", version="25.09")
    assert str(caught.value) == (
        "Triton image:\n  - sagemaker-tritonserver:25.09-py3 is not published in us-gov-west-1; supported regions: "
        + ", ".join(images.regions("25.09")))
    assert "cn-north-1" not in images.regions("25.09")


def _build(spec, tmp_path, **fake_args):
    manifest_path = fake_build(spec, tmp_path / "assets", **fake_args)
    return manifest_path


def _app(spec, manifest_path):
    return app_module.build_app(spec, load_manifest(manifest_path), manifest_path,
                                app=cdk.App(context=app_module.cdk_json_context()))


def test_manifest_without_the_endpoint(tmp_path):
    spec = load_spec(ROOT / "triton.yaml")
    manifest = _build(spec, tmp_path, endpoints={"vision-nlp": spec.endpoints["vision-nlp"]})
    with pytest.raises(SynthError) as caught:
        _app(spec, manifest)
    assert str(caught.value) == (f"endpoint 'classifier':\n  - {manifest} has no artifacts for this endpoint; "
                                 "run `tritonsm build`")


def test_missing_and_stale_tarballs(tmp_path):
    spec = load_spec(ROOT / "triton.yaml")
    manifest = _build(spec, tmp_path)
    body = json.loads(manifest.read_text())
    resnet, bert = body["endpoints"]["vision-nlp"]["artifacts"]
    (manifest.parent / resnet["file"]).unlink()
    (manifest.parent / bert["file"]).write_bytes(b"truncated")
    with pytest.raises(SynthError) as caught:
        _app(spec, manifest)
    assert str(caught.value) == (
        "endpoint 'vision-nlp':\n"
        f"  - artifact {resnet['file']} is missing ({manifest.parent / resnet['file']} does not exist); "
        "run `tritonsm build`\n"
        f"  - artifact {bert['file']} is 9 bytes, the manifest says {bert['size']} (a stale or partial build); "
        "run `tritonsm build`")


def test_model_missing_from_the_artifacts(tmp_path):
    spec = load_spec(ROOT / "triton.yaml")
    manifest = _build(spec, tmp_path)
    body = json.loads(manifest.read_text())
    body["endpoints"]["vision-nlp"]["artifacts"] = body["endpoints"]["vision-nlp"]["artifacts"][:1]
    manifest.write_text(json.dumps(body))
    with pytest.raises(SynthError) as caught:
        _app(spec, manifest)
    assert str(caught.value) == (f"endpoint 'vision-nlp':\n  - model 'bert' has no artifact in {manifest}; "
                                 "run `tritonsm build`")


def test_overwritable_object_names_are_refused(tmp_path):
    spec = load_spec(ROOT / "triton.yaml")
    manifest = _build(spec, tmp_path)
    body = json.loads(manifest.read_text())
    artifact = body["endpoints"]["classifier"]["artifacts"][0]
    (manifest.parent / artifact["file"]).rename(manifest.parent / "classifier.tar.gz")
    artifact["file"] = "classifier.tar.gz"
    manifest.write_text(json.dumps(body))
    with pytest.raises(SynthError) as caught:
        _app(spec, manifest)
    assert str(caught.value) == (
        "endpoint 'classifier':\n  - artifact classifier.tar.gz is not named <name>-<first 12 hex digits of its "
        "sha256>.tar.gz: S3 objects are never overwritten, because instances cache models by name; "
        "run `tritonsm build`")


def test_manifest_for_another_triton_version(tmp_path):
    spec = load_spec(ROOT / "triton.yaml")
    manifest = _build(spec, tmp_path)
    body = json.loads(manifest.read_text())
    body["triton_version"] = "24.09"
    manifest.write_text(json.dumps(body))
    with pytest.raises(SynthError) as caught:
        _app(spec, manifest)
    assert str(caught.value) == (f"endpoint 'vision-nlp':\n  - {manifest} was built for Triton 24.09, the spec "
                                 "asks for 25.09; run `tritonsm build`")


def test_a_model_verified_in_another_release_s_runtimes_is_refused(tmp_path):
    # The manifest says 25.09, but one model's serving check ran in Triton 25.04's runtimes (ONNX
    # Runtime 1.21.0) or in none: its answers on a 25.09 endpoint were never checked.
    spec = load_spec(ROOT / "triton.yaml")
    manifest = _build(spec, tmp_path)
    body = json.loads(manifest.read_text())
    body["models"]["resnet50"]["serving_check"]["triton_version"] = "25.04"
    body["models"]["bert"]["serving_check"] = {}
    manifest.write_text(json.dumps(body))
    with pytest.raises(SynthError) as caught:
        _app(spec, manifest)
    assert str(caught.value) == (
        "endpoint 'vision-nlp':\n"
        "  - model 'resnet50' was verified in the runtimes of Triton 25.04, the spec serves it with Triton 25.09; "
        "run `tritonsm build`\n"
        "  - model 'bert' was not verified in any serving runtime (an older build), the spec serves it with "
        "Triton 25.09; run `tritonsm build`")


def _with_endpoint(spec, name, **changes):
    """The spec with one endpoint changed in every environment, past the loader's own checks."""
    envs = {k: dataclasses.replace(e, endpoints={**e.endpoints, name: dataclasses.replace(e.endpoints[name], **changes)})
            for k, e in spec.environments.items()}
    return dataclasses.replace(spec, environments=envs,
                               endpoints={**spec.endpoints, name: dataclasses.replace(spec.endpoints[name], **changes)})


@pytest.mark.parametrize("instance_type, problem", [
    ("ml.g6.xlarge", "ml.g6.xlarge cannot host a multi-model endpoint; supported families: ml.g4dn, ml.g5, ml.p3, "
                     "ml.c5, ml.c5d, ml.c6i, ml.m5, ml.m5d, ml.m6i, ml.r5"),
    ("ml.g5.12xlarge", "ml.g5.12xlarge has 4 GPUs; GPU multi-model endpoints run on single-GPU instance types only "
                       "(e.g. ml.g5.2xlarge)"),
])
def test_multi_model_endpoint_on_an_unsupported_instance_type(tmp_path, instance_type, problem):
    spec = _with_endpoint(load_spec(ROOT / "triton.yaml"), "vision-nlp", instance_type=instance_type)
    manifest = _build(spec, tmp_path)
    with pytest.raises(SynthError) as caught:
        _app(spec, manifest)
    assert str(caught.value) == f"endpoint 'vision-nlp':\n  - {problem}"


def test_tensorrt_plan_built_for_another_gpu(tmp_path):
    spec = load_spec(SPECS / "tensorrt.yaml")
    # Both plans built on a T4 (7.5); the endpoint runs A10G (8.6). The ampere_plus plan would run on
    # any 8.x GPU, so only the plain plan is refused.
    manifest = _build(spec, tmp_path, compute_capability="7.5")
    with pytest.raises(SynthError) as caught:
        _app(spec, manifest)
    assert str(caught.value) == (
        "endpoint 'plans':\n  - model 'bert-trt' is a TensorRT plan built for compute capability 7.5 (T4); "
        "ml.g5.xlarge has A10G, compute capability 8.6. Build it on a 8.6 device or choose an instance family "
        "with compute capability 7.5 (ml.g4dn)")


def test_tensorrt_plan_built_for_the_right_gpu_synthesizes(tmp_path):
    spec = load_spec(SPECS / "tensorrt.yaml")
    app = _app(spec, _build(spec, tmp_path, compute_capability="8.6"))
    assert app.node.find_child("TrtDev").endpoints["plans"].stack_name == "Trt-dev-plans"


def test_endpoint_names_sagemaker_cannot_take():
    with pytest.raises(SynthError) as caught:
        endpoint_name("Triton", "dev", "my_endpoint")
    assert str(caught.value) == (
        "endpoint 'my_endpoint':\n  - the SageMaker endpoint name 'Triton-dev-my_endpoint' "
        "(<project>-<environment>-<endpoint>) must be 1-63 letters, digits or '-'; rename the endpoint (no '_') "
        "or shorten the project or environment name")


def test_deployment_timeout_shorter_than_the_traffic_shift():
    stack = _bare()
    model = TritonModel(stack, "Model", image=TritonImage(stack, "Image", version="25.04"),
                        role=iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com")),
                        model_data_url="s3://bucket/m-0123456789ab.tar.gz")
    with pytest.raises(SynthError) as caught:
        TritonEndpoint(stack, "Endpoint", model=model, endpoint_name="Bare-endpoint", instance_type="ml.g5.xlarge",
                       deployment=Deployment(strategy=Strategy.LINEAR, linear_step_percent=10, auto_rollback=False,
                                             max_execution_timeout_s=1800))
    assert str(caught.value) == (
        "endpoint Bare-endpoint:\n"
        "  - deployment.max_execution_timeout_s (1800) is shorter than the update it must cover (new fleet start "
        "1200 s + 10 steps x wait_s 300 + termination_wait_s 120 = 4320 s); raise it, shorten wait_s, or leave it "
        "out to have it computed\n"
        "  - a linear traffic shift needs 2+ instances (each step at most 50 % of the variant); got 1: use "
        "Strategy.ALL_AT_ONCE or more instances")


def test_multi_model_data_must_be_a_prefix():
    stack = _bare()
    with pytest.raises(SynthError) as caught:
        TritonModel(stack, "Model", image=TritonImage(stack, "Image", version="25.04"), multi_model=True,
                    role=iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com")),
                    model_data_url="s3://bucket/models/one.tar.gz")
    assert str(caught.value) == ("SageMaker model Bare/Model:\n  - a multi-model endpoint's model data must be an "
                                 "S3 prefix ending in '/'; got 's3://bucket/models/one.tar.gz'")
