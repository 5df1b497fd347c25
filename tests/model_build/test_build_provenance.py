"""What a tarball's bill of materials says each model came from (model_build.build._provenance): its execution
environment's packages as name -> version, a file source with the hash of what is on disk, a recipe by name."""
import dataclasses
import hashlib

from deployment_spec.facts import images
from deployment_spec.manifest import ExecutionEnvironment, ModelEntry
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
