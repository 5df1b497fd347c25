"""The CycloneDX bill of materials beside each tarball (model_build/sbom.py): valid CycloneDX 1.6 by the library's
own strict validator, the same bytes for the same input, and each part (models, files, sources, packages, tools,
the image, the dependency graph) where a scanner looks for it. No torch needed."""
from __future__ import annotations

import hashlib
import json
import pathlib

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

from model_build import sbom
from model_build.sbom import ModelRecord, SourceRecord

IMAGE = "785573368785.dkr.ecr.us-east-1.amazonaws.com/sagemaker-tritonserver:25.09-py3"
TOOLS = {"torch": "2.13.0", "onnx": "1.23.2", "tritonsm": "0.2.0.dev0"}
H = {c: c * 64 for c in "0123456789abcdef"}


def _models() -> list[ModelRecord]:
    return [
        ModelRecord("bert-model", {"1/model.onnx": H["a"], "config.pbtxt": H["b"]},
                    SourceRecord("hub", "google-bert/bert-base-uncased",
                                 revision="86b5e0934494bd15c9632b12f734a8a67f723594")),
        ModelRecord("bert-tokenize", {"1/model.py": H["c"], "config.pbtxt": H["d"]},
                    SourceRecord("checkpoint", "weights/bert", sha256=H["e"]),
                    {"tokenizers": "0.23.3", "NumPy": "1.26.4", "typing_extensions": "4.16.0",
                     "zope.interface": "8.0"}),
        ModelRecord("resnet", {"1/model.pt": H["f"]}, SourceRecord("file", "models/resnet.pt", sha256=H["1"]),
                    {"numpy": "1.26.4"}),
        ModelRecord("plain", {"1/model.onnx": H["2"]}),
    ]


def _bom(models=None, **overrides) -> bytes:
    kwargs = dict(artifact_name="endpoint-a.tar.gz", artifact_sha256=H["9"],
                  models=_models() if models is None else models, triton_image=IMAGE, triton_version="25.09",
                  tools=TOOLS)
    return sbom.model_bom(**{**kwargs, **overrides})


def _doc(data: bytes) -> dict:
    return json.loads(data)


def _components(doc: dict) -> dict[str, dict]:
    return {c["bom-ref"]: c for c in doc["components"]}


def _errors(doc: dict) -> list[str]:
    found = JsonStrictValidator(SchemaVersion.V1_6).validate_str(json.dumps(doc), all_errors=True)
    return [] if found is None else [e.data.message for e in found]


def test_the_document_is_valid_cyclonedx_1_6_by_the_librarys_strict_validator():
    data = _bom()
    doc = _doc(data)
    assert doc["bomFormat"] == "CycloneDX" and doc["specVersion"] == "1.6"
    assert doc["$schema"] == "http://cyclonedx.org/schema/bom-1.6.schema.json"
    assert _errors(doc) == []


def test_the_validator_catches_planted_defects():
    # The guard must be able to fail: the produced document with a required field taken away, an unknown property
    # added (the strict schema), a hash that is no SHA-256 each reported.
    doc = _doc(_bom())
    model = next(c for c in doc["components"] if c["type"] == "machine-learning-model")
    del model["name"]
    assert any("'name' is a required property" in e for e in _errors(doc))
    doc = _doc(_bom())
    doc["metadata"]["component"]["sha"] = H["9"]
    assert any("'sha' was unexpected" in e for e in _errors(doc))
    doc = _doc(_bom())
    doc["metadata"]["component"]["hashes"][0]["content"] = "not-hex"
    assert _errors(doc)
    del doc["bomFormat"]
    assert sbom.validation_error(json.dumps(doc)) is not None


def test_model_bom_refuses_what_does_not_validate():
    # Inside the function too: a digest that is no SHA-256 hex fails the schema's hash pattern, and no file is made.
    with pytest.raises(ValueError, match="not valid CycloneDX 1.6"):
        _bom(artifact_sha256="feed")
    with pytest.raises(ValueError, match="model names repeat"):
        _bom(models=_models() + [ModelRecord("plain", {})])


def test_the_same_input_gives_the_same_bytes_whatever_its_order():
    first = _bom()
    assert _bom() == first
    # Models and mappings in another order: the same document (sorted components, sorted keys).
    shuffled = [ModelRecord(m.name, dict(reversed(list(m.files.items()))), m.source,
                            dict(reversed(list(m.python_packages.items())))) for m in reversed(_models())]
    assert _bom(models=shuffled, tools=dict(reversed(list(TOOLS.items())))) == first
    assert first.endswith(b"}\n") and not first.endswith(b"\n\n")
    doc = _doc(first)
    assert "timestamp" not in doc["metadata"]
    # The serial number is the content's, not random: urn:uuid, version 5.
    assert doc["serialNumber"].startswith("urn:uuid:") and doc["serialNumber"][23] == "5"


def test_a_changed_file_hash_changes_the_bytes_and_the_serial_number():
    first = _bom()
    models = _models()
    models[0] = ModelRecord(models[0].name, {**models[0].files, "1/model.onnx": H["3"]}, models[0].source)
    changed = _bom(models=models)
    assert changed != first
    assert _doc(changed)["serialNumber"] != _doc(first)["serialNumber"]
    assert _bom(artifact_sha256=H["8"]) != first


def test_models_are_machine_learning_models_with_their_files_and_hashes():
    components = _components(_doc(_bom()))
    model = components["model:bert-model"]
    assert model["type"] == "machine-learning-model"
    files = {f["name"]: f for f in model["components"]}
    assert set(files) == {"1/model.onnx", "config.pbtxt"}
    assert all(f["type"] == "file" for f in files.values())
    assert files["1/model.onnx"]["hashes"] == [{"alg": "SHA-256", "content": H["a"]}]


def test_the_tarball_is_the_metadata_component_with_its_hash_and_the_tools_are_listed():
    metadata = _doc(_bom())["metadata"]
    assert metadata["component"]["type"] == "file" and metadata["component"]["name"] == "endpoint-a.tar.gz"
    assert metadata["component"]["hashes"] == [{"alg": "SHA-256", "content": H["9"]}]
    assert {(t["name"], t["version"]) for t in metadata["tools"]["components"]} == set(TOOLS.items())


def test_python_packages_are_pypi_libraries_by_normalised_name_and_once():
    doc = _doc(_bom())
    libraries = [c for c in doc["components"] if c["type"] == "library"]
    assert sorted(c["purl"] for c in libraries) == [
        "pkg:pypi/numpy@1.26.4", "pkg:pypi/tokenizers@0.23.3", "pkg:pypi/typing-extensions@4.16.0",
        "pkg:pypi/zope.interface@8.0"]
    # The name as the purl has it (numpy, once, though one model wrote NumPy), and the purl as the reference.
    assert sorted(c["name"] for c in libraries) == ["numpy", "tokenizers", "typing-extensions", "zope.interface"]
    assert all(c["bom-ref"] == c["purl"] for c in libraries)


def test_sources_and_the_triton_image():
    components = _components(_doc(_bom()))
    hub = components["source:hub:google-bert/bert-base-uncased@86b5e0934494bd15c9632b12f734a8a67f723594"]
    assert hub["type"] == "machine-learning-model"
    assert hub["purl"] == "pkg:huggingface/google-bert/bert-base-uncased@86b5e0934494bd15c9632b12f734a8a67f723594"
    checkpoint = components[f"source:checkpoint:weights/bert#sha256:{H['e']}"]
    assert checkpoint["hashes"] == [{"alg": "SHA-256", "content": H["e"]}]
    assert components[f"source:file:models/resnet.pt#sha256:{H['1']}"]["type"] == "file"
    [image] = [c for c in components.values() if c["type"] == "container"]
    assert (image["name"], image["version"]) == ("sagemaker-tritonserver", "25.09-py3")
    assert image["purl"] == ("pkg:docker/sagemaker-tritonserver@25.09-py3"
                             "?repository_url=785573368785.dkr.ecr.us-east-1.amazonaws.com")
    assert {"name": "tritonsm:triton-version", "value": "25.09"} in image["properties"]


def test_the_image_in_the_other_regions_registries_is_named_too():
    west = "007439368137.dkr.ecr.us-west-2.amazonaws.com/sagemaker-tritonserver:25.09-py3"
    [image] = [c for c in _doc(_bom(other_registries=[west]))["components"] if c["type"] == "container"]
    assert image["purl"] == ("pkg:docker/sagemaker-tritonserver@25.09-py3"
                             "?repository_url=785573368785.dkr.ecr.us-east-1.amazonaws.com")
    assert [p["value"] for p in image["properties"] if p["name"] == "tritonsm:image"] == [IMAGE]
    assert [p["value"] for p in image["properties"] if p["name"] == "tritonsm:image-other-region"] == [west]


def test_the_build_names_the_image_with_its_registry_the_first_environment_s_region_first():
    # The build's provenance (model_build.packaging.Provenance, from the spec's environments' regions): SageMaker's
    # registry per region (deployment_spec.facts.images), the first environment's first; no region, no registry.
    from deployment_spec.facts import images
    from model_build.packaging import Provenance

    provenance = Provenance(triton_version="25.09", regions=("us-west-2", "us-east-1"))
    assert provenance.triton_images == (images.image_uri("25.09", "us-west-2"), images.image_uri("25.09", "us-east-1"))
    assert provenance.triton_image == (
        f"{images.account('25.09', 'us-west-2')}.dkr.ecr.us-west-2.amazonaws.com/sagemaker-tritonserver:25.09-py3")
    china = Provenance(triton_version="25.04", regions=("cn-north-1",)).triton_image
    assert china == f"{images.account('25.04', 'cn-north-1')}.dkr.ecr.cn-north-1.amazonaws.com.cn/" \
                    "sagemaker-tritonserver:25.04-py3"
    # A region without the release (the spec loader refuses it for an environment) names no registry.
    assert images.account("25.09", "cn-north-1") is None
    assert Provenance(triton_version="25.09", regions=("cn-north-1",)).triton_images == (
        "sagemaker-tritonserver:25.09-py3",)
    assert Provenance(triton_version="25.09").triton_images == ("sagemaker-tritonserver:25.09-py3",)


@pytest.mark.parametrize("image, purl", [
    ("nvcr.io/nvidia/tritonserver:25.09-py3", "pkg:docker/nvidia/tritonserver@25.09-py3?repository_url=nvcr.io"),
    ("tritonserver:25.09-py3", "pkg:docker/tritonserver@25.09-py3"),
    ("localhost:5000/triton@sha256:" + H["4"], f"pkg:docker/triton@sha256:{H['4']}?repository_url=localhost:5000"),
])
def test_image_references_as_docker_purls(image, purl):
    [container] = [c for c in _doc(_bom(triton_image=image))["components"] if c["type"] == "container"]
    assert container["purl"] == purl


def test_the_dependency_graph():
    doc = _doc(_bom())
    graph = {d["ref"]: set(d.get("dependsOn", ())) for d in doc["dependencies"]}
    image = next(c["bom-ref"] for c in doc["components"] if c["type"] == "container")
    assert graph["artifact:endpoint-a.tar.gz"] == {"model:bert-model", "model:bert-tokenize", "model:resnet",
                                                   "model:plain"}
    assert graph["model:bert-tokenize"] == {image, f"source:checkpoint:weights/bert#sha256:{H['e']}",
                                            "pkg:pypi/numpy@1.26.4", "pkg:pypi/tokenizers@0.23.3",
                                            "pkg:pypi/typing-extensions@4.16.0", "pkg:pypi/zope.interface@8.0"}
    assert graph["model:plain"] == {image}
    # Every reference names a component of the document.
    refs = {c["bom-ref"] for c in doc["components"]} | {doc["metadata"]["component"]["bom-ref"]}
    assert set(graph) | set().union(*graph.values()) <= refs


def test_model_record_from_dir_hashes_every_file(tmp_path: pathlib.Path):
    (tmp_path / "1").mkdir()
    (tmp_path / "1" / "model.onnx").write_bytes(b"onnx")
    (tmp_path / "config.pbtxt").write_text("name: 'm'\n")
    (tmp_path / ".hidden").write_bytes(b"")
    source = SourceRecord("file", "models/m.onnx", sha256=H["0"])
    record = sbom.model_record_from_dir("m", tmp_path, source, {"numpy": "1.26.4"})
    assert list(record.files) == [".hidden", "1/model.onnx", "config.pbtxt"]
    assert record.files["1/model.onnx"] == hashlib.sha256(b"onnx").hexdigest()
    assert (record.name, record.source, dict(record.python_packages)) == ("m", source, {"numpy": "1.26.4"})


def test_bom_file_name():
    assert sbom.bom_file_name("endpoint-a.tar.gz") == "endpoint-a.cdx.json"
    with pytest.raises(ValueError):
        sbom.bom_file_name("endpoint-a.zip")
