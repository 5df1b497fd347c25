"""Every synth-time refusal, matched on its exact message (what SageMaker would reject minutes into a deploy)."""
import dataclasses
import json

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

import app as app_module
from deployment_spec import load_spec
from deployment_spec.facts import images
from deployment_spec.sections.endpoint import EndpointKind
from deployment_spec.builds.manifest import load_manifest
from api_model_check import check_template
from fake_build import fake_build
from synth_helpers import ROOT, SPECS
from triton_constructs import PropsError, SynthError
from triton_constructs.checks import endpoint_name
from triton_constructs.image import TritonImage


def _bare(region="us-east-1"):
    return cdk.Stack(cdk.App(), "Bare", env=cdk.Environment(region=region))


def test_unsupported_triton_version():
    with pytest.raises(PropsError) as caught:
        TritonImage(_bare(), "Image", version="22.05")
    # The spec's triton_version rule, word for word (deployment_spec.rules.sagemaker.triton_version_known).
    assert str(caught.value) == (
        "Triton image: 1 problem\n  - triton_version: got '22.05'; allowed: a sagemaker-tritonserver release of the "
        f"SageMaker SDK ({', '.join(images.versions())}); fix: pick one of those tags")


def test_unsupported_region_lists_the_supported_ones():
    with pytest.raises(PropsError) as caught:
        TritonImage(_bare("us-gov-west-1"), "Image", version="25.09")
    assert str(caught.value) == (
        "Triton image: 1 problem\n  - region: got 'us-gov-west-1'; allowed: a region with "
        f"sagemaker-tritonserver:25.09-py3 ({', '.join(images.regions('25.09'))}); fix: choose one of those regions "
        "or another triton_version")
    assert "cn-north-1" not in images.regions("25.09")


def _build(spec, tmp_path, **fake_args):
    manifest_path = fake_build(spec, tmp_path / "assets", **fake_args)
    return manifest_path


def _app(spec, manifest_path, pool_manifests=()):
    return app_module.build_app(spec, load_manifest(manifest_path), manifest_path,
                                app=cdk.App(context=app_module.cdk_json_context()),
                                pool_manifests={p: load_manifest(p) for p in pool_manifests})


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
    def change(models):
        models["resnet50"]["verification"]["triton_version"] = "25.04"
        models["bert"]["verification"] = {"ran": False}

    assert _refusal_with(tmp_path, change) == (
        "TritonSageMakerEndpoint TritonDev/vision-nlp/Default: 2 problems\n"
        "  - models.resnet50: got a model verified in the runtimes of Triton 25.04; allowed: a model verified in the "
        "runtimes of Triton 25.09, which serves it; fix: run `tritonsm build` for triton_version 25.09\n"
        "  - models.bert: got a model never verified in a serving runtime (an older build); allowed: a model verified "
        "in the runtimes of Triton 25.09, which serves it; fix: run `tritonsm build` for triton_version 25.09")


def test_a_model_whose_check_did_not_run_what_serves_it_is_refused_with_the_build_s_reason(tmp_path):
    # A generating model's decoding is checked with the build machine's transformers and torch; an environment that
    # pins other releases is not what was checked, and the build recorded why (generation_check.served_by).
    def change(models):
        models["bert"]["verification"] = {
            "ran": True, "why": "its decoding was checked with transformers 5.23.0 and torch 2.13.0 on the build "
                                "machine, but its execution environment pins transformers 4.57.6 and torch 2.13.0"}

    assert _refusal_with(tmp_path, change) == (
        "TritonSageMakerEndpoint TritonDev/vision-nlp/Default: 1 problem\n"
        "  - models.bert: got a model not verified in its serving runtime (its decoding was checked with transformers "
        "5.23.0 and torch 2.13.0 on the build machine, but its execution environment pins transformers 4.57.6 and "
        "torch 2.13.0); allowed: a model verified in the runtimes of Triton 25.09, which serves it; fix: pin the "
        "releases the build machine checked with in the model's python.requirements (or build where the pinned ones "
        "are installed), then run `tritonsm build`")


def _refusal_with(tmp_path, change) -> str:
    """What synthesis says of the default spec's build after ``change`` edited its manifest's models."""
    spec = load_spec(ROOT / "triton.yaml")
    manifest = _build(spec, tmp_path)
    body = json.loads(manifest.read_text())
    change(body["models"])
    manifest.write_text(json.dumps(body))
    with pytest.raises(PropsError) as caught:
        _app(spec, manifest)
    return str(caught.value)


def _with_endpoint(spec, name, **changes):
    """The spec with one endpoint changed in every environment, past the loader's own checks."""
    envs = {k: dataclasses.replace(e, endpoints={**e.endpoints, name: dataclasses.replace(e.endpoints[name], **changes)})
            for k, e in spec.environments.items()}
    return dataclasses.replace(spec, environments=envs,
                               endpoints={**spec.endpoints, name: dataclasses.replace(spec.endpoints[name], **changes)})


@pytest.mark.parametrize("instance_type, problem", [
    ("ml.g6.xlarge", "instance_type: got 'ml.g6.xlarge'; allowed: a CPU type or a GPU family SageMaker lists for "
                     "multi-model endpoints (p2, p3, g4dn, g5); fix: pick an ml.g5 or ml.g4dn size, or make the endpoint "
                     "single-model"),
    ("ml.g5.12xlarge", "instance_type: got 'ml.g5.12xlarge'; allowed: a single-GPU instance type for a multi-model "
                       "endpoint; fix: use a single-GPU size such as ml.g5.2xlarge"),
])
def test_multi_model_endpoint_on_an_unsupported_instance_type(tmp_path, instance_type, problem):
    # A spec changed in code, past the loader: the construct applies the same rule, in the same words.
    spec = _with_endpoint(load_spec(ROOT / "triton.yaml"), "vision-nlp", instance_type=instance_type)
    manifest = _build(spec, tmp_path)
    with pytest.raises(PropsError) as caught:
        _app(spec, manifest)
    assert str(caught.value) == f"TritonSageMakerEndpoint TritonDev/vision-nlp/Default: 1 problem\n  - {problem}"


def test_tensorrt_plan_built_for_another_gpu(tmp_path):
    spec = load_spec(SPECS / "tensorrt.yaml")
    # Both plans built on a T4 (7.5); the endpoint runs A10G (8.6). The ampere_plus plan would run on
    # any 8.x GPU, so only the plain plan is refused.
    manifest = _build(spec, tmp_path, compute_capability="7.5")
    with pytest.raises(PropsError) as caught:
        _app(spec, manifest)
    assert str(caught.value) == (
        "TritonSageMakerEndpoint TrtDev/plans/Default: 1 problem\n  - models.bert-trt: got a TensorRT plan built for "
        "compute capability 7.5 (T4); allowed: a plan that runs on ml.g5.xlarge (A10G, compute capability 8.6); fix: "
        "build it on a 8.6 device or choose an instance family with compute capability 7.5 (ml.g4dn)")


def test_a_fallback_pool_whose_gpu_the_plan_does_not_run_on_is_refused_naming_the_pool(tmp_path):
    # Single-model, A10G (8.6) first, L4 (8.9) when there is no A10G capacity: the plain plan built on the A10G
    # does not run on the L4; the ampere_plus plan runs on both.
    spec = _with_endpoint(load_spec(SPECS / "tensorrt.yaml"), "plans", kind=EndpointKind.SINGLE_MODEL,
                          models=("bert-trt",), fallback_instance_types=("ml.g6.xlarge",))
    with pytest.raises(PropsError) as caught:
        _app(spec, _build(spec, tmp_path, compute_capability="8.6"))
    assert str(caught.value) == (
        "TritonSageMakerEndpoint TrtDev/plans/Default: 1 problem\n  - fallback_instance_types[0].models.bert-trt: got "
        "a TensorRT plan built for compute capability 8.6 (A10G); allowed: a plan that runs on ml.g6.xlarge (L4, "
        "compute capability 8.9); fix: build it on a 8.9 device or choose an instance family with compute capability "
        "8.6 (ml.g5), or build the models on that GPU and give the pool that build (construct: pool_models; app: "
        "tritonsm build --out DIR on that GPU, then cdk synth -c pool_manifests=DIR/manifest.json)")
    compatible = _with_endpoint(spec, "plans", models=("bert-any",))
    app = _app(compatible, _build(compatible, tmp_path / "any", compute_capability="8.6"))
    template = Template.from_stack(app.node.find_child("TrtDev").endpoints["plans"])
    [config] = template.find_resources("AWS::SageMaker::EndpointConfig").values()
    [variant] = config["Properties"]["ProductionVariants"]
    assert "InstanceType" not in variant and variant["InstancePools"] == [
        {"InstanceType": "ml.g5.xlarge", "Priority": 1}, {"InstanceType": "ml.g6.xlarge", "Priority": 2}]


def test_a_pool_serves_the_plan_built_for_its_gpu_through_model_name_override(tmp_path):
    # The same spec built twice, on an A10G (8.6, the main build) and on an L4 (8.9, for the g6 pool).
    spec = _with_endpoint(load_spec(SPECS / "tensorrt.yaml"), "plans", kind=EndpointKind.SINGLE_MODEL,
                          models=("bert-trt",), fallback_instance_types=("ml.g6.xlarge",))
    main = _build(spec, tmp_path / "g5", compute_capability="8.6")
    l4 = _build(spec, tmp_path / "g6", compute_capability="8.9")
    template = Template.from_stack(_app(spec, main, pool_manifests=[l4]).node.find_child("TrtDev").endpoints["plans"])
    models = {lid: r for lid, r in template.find_resources("AWS::SageMaker::Model").items()}
    assert len(models) == 2  # the endpoint's model and the g6 pool's
    [config] = template.find_resources("AWS::SageMaker::EndpointConfig").values()
    [variant] = config["Properties"]["ProductionVariants"]
    pool_model = variant["InstancePools"][1]["ModelNameOverride"]["Fn::GetAtt"][0]
    assert variant["InstancePools"][0] == {"InstanceType": "ml.g5.xlarge", "Priority": 1}
    assert variant["InstancePools"][1]["InstanceType"] == "ml.g6.xlarge"
    assert variant["ModelName"]["Fn::GetAtt"][0] != pool_model and pool_model in models
    # Each model reads its own tarball: the L4 build's object for the pool, both under the endpoint's prefix.
    urls = {lid: json.dumps(m["Properties"]["PrimaryContainer"]["ModelDataUrl"]) for lid, m in models.items()}
    l4_object = load_manifest(l4).endpoints["plans"].artifacts[0].object_name
    assert l4_object in urls[pool_model] and l4_object not in urls[variant["ModelName"]["Fn::GetAtt"][0]]
    assert check_template(template.to_json()).findings == []  # ModelNameOverride as SageMaker's API model has it
    # A pool build for another GPU again (a second A10G build) does not fit the pool: refused as before.
    with pytest.raises(PropsError) as caught:
        _app(spec, main, pool_manifests=[_build(spec, tmp_path / "again", compute_capability="8.6")])
    assert "fallback_instance_types[0].models.bert-trt: got a TensorRT plan built for compute capability 8.6" in str(
        caught.value)


def test_tensorrt_plan_built_for_the_right_gpu_synthesizes(tmp_path):
    spec = load_spec(SPECS / "tensorrt.yaml")
    app = _app(spec, _build(spec, tmp_path, compute_capability="8.6"))
    assert app.node.find_child("TrtDev").endpoints["plans"].stack_name == "Trt-dev-plans"


def test_endpoint_names_sagemaker_cannot_take():
    with pytest.raises(PropsError) as caught:
        endpoint_name("Triton", "dev", "my_endpoint")
    assert str(caught.value) == (
        "endpoint 'my_endpoint': 1 problem\n  - endpoint_name: got the SageMaker endpoint name "
        "'Triton-dev-my_endpoint' (<project>-<environment>-<endpoint>); allowed: 1-63 letters, digits or '-' (a "
        "SageMaker endpoint name); fix: rename the endpoint (no '_') or shorten the project or environment name")
