"""What a tarball's bill of materials says each model came from (model_build.build._provenance): its execution
environment's packages as name -> version, a file source with the hash of what is on disk, a recipe by name."""
import dataclasses
import hashlib

from deployment_spec.facts import images
from deployment_spec.builds.manifest import ExecutionEnvironment, ModelEntry
from model_build import build, hashing
from mb_support import TINY_SPEC


def test_packages_sources_and_tools_reach_the_provenance(tmp_path):
    from deployment_spec import load_spec
    spec = load_spec(TINY_SPEC)
    env = ExecutionEnvironment("env.tar.gz", "image", "3.12", "the image", 1, 2, ("numpy==1.26.4", "Pillow==13.0.0"))
    entry = ModelEntry("preprocess", "preprocess", "python", 8, (), (), "0" * 64, execution_environment=env)
    onnx = tmp_path / "model.onnx"
    onnx.write_bytes(b"onnx bytes")
    models = dict(spec.models)
    models["vision"] = dataclasses.replace(models["vision"], source=dataclasses.replace(
        models["vision"].source, recipe=None, onnx=str(onnx)))
    spec = dataclasses.replace(spec, models=models)
    plain = ModelEntry("vision", "vision", "onnxruntime", 8, (), (), "1" * 64)
    provenance = build._provenance(spec, {"preprocess": entry, "vision": plain},
                                   hashing.FileHasher(tmp_path / "hashes.json"))
    assert provenance.packages == {"preprocess": {"numpy": "1.26.4", "Pillow": "13.0.0"}}
    assert provenance.sources["preprocess"].name == "recipe text-preprocess"
    vision = provenance.sources["vision"]
    assert (vision.kind, vision.name) == ("file", str(onnx))
    assert vision.sha256 == hashlib.sha256(b"onnx bytes").hexdigest()
    # The tiny spec's one environment is in us-east-1: the image as pulled from that region's registry.
    assert provenance.regions == ("us-east-1",)
    assert provenance.triton_image == images.image_uri("25.04", "us-east-1")
    assert provenance.triton_image.endswith(".dkr.ecr.us-east-1.amazonaws.com/sagemaker-tritonserver:25.04-py3")
    assert provenance.tools["onnx"] != "absent" and "triton-sagemaker-cdk" in provenance.tools


def test_a_kept_tarball_s_bill_follows_the_spec_s_image_reference(tiny_build, tmp_path):
    # A tarball is reused while its models are unchanged; its bill of materials must still name the registry of the
    # spec's first environment's region, else it is packed again (the same bytes) with a new bill.
    from deployment_spec.builds.manifest import load_manifest
    from model_build import packaging

    spec, _, work, _, _ = tiny_build
    out = tmp_path / "assets"
    quiet = {"log": lambda line: None}
    assert build.run(spec, out, work, **quiet).written
    artifact = load_manifest(out / "manifest.json").endpoints["single"].artifacts[0]
    tarball, bom = out / artifact.file, out / artifact.sbom
    packed = tarball.read_bytes()
    east = images.image_uri("25.04", "us-east-1")
    assert packaging.bom_images(bom) == (east, frozenset())
    assert build.run(spec, out, work, **quiet).written == []  # nothing changed: nothing written
    # A bill as the previous release wrote it, the image without its registry: written again.
    bom.write_text(bom.read_text().replace(f'"value": "{east}"', '"value": "sagemaker-tritonserver:25.04-py3"'))
    assert packaging.bom_images(bom) == ("sagemaker-tritonserver:25.04-py3", frozenset())
    assert {artifact.file, artifact.sbom} <= set(build.run(spec, out, work, **quiet).written)
    assert packaging.bom_images(bom) == (east, frozenset()) and tarball.read_bytes() == packed
    # The first environment moved to us-west-2: the bill names that registry, and us-east-1 no more.
    west = dataclasses.replace(spec, environments={
        name: dataclasses.replace(env, region="us-west-2") for name, env in spec.environments.items()})
    assert artifact.sbom in build.run(west, out, work, **quiet).written
    assert packaging.bom_images(bom) == (images.image_uri("25.04", "us-west-2"), frozenset())
    assert tarball.read_bytes() == packed
