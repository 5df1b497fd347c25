"""A CycloneDX bill of materials per model tarball, written beside it (``<stem>.cdx.json``).

What a reviewer or a scanner needs to know about a tarball without opening it: the models in it with every
file's SHA-256, what each was built from (a checkpoint, a file, a Hub id, with its hash or revision), the
packages of each model's Python execution environment (as PyPI purls, so vulnerability scanners match them),
the build tools and the Triton image that serves it, by its full reference (the registry of the spec's first
environment's region; the other regions' as properties). CycloneDX 1.6, JSON: https://cyclonedx.org/docs/1.6/json/

Deterministic like the tarballs (model_build/reproducible.py): two builds of the same inputs give the same
bytes, so the document can be signed, diffed and cached. The library stamps the time and a random serial
number; both are replaced here: no timestamp, and a serialNumber derived from the content (uuid5).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import pathlib
import uuid
from typing import Any, Literal, Mapping, Optional, Sequence

from cyclonedx.model import HashAlgorithm, HashType, Property
from cyclonedx.model.bom import Bom
from cyclonedx.model.component import Component, ComponentType
from cyclonedx.output.json import JsonV1Dot6
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from packageurl import PackageURL

SCHEMA_VERSION = SchemaVersion.V1_6
# The serialNumber's namespace: a content hash named in it gives the same urn:uuid for the same document.
_SERIAL_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "urn:tritonsm:model-bom")


@dataclasses.dataclass(frozen=True)
class SourceRecord:
    """What a model was built from. ``name``: a Hugging Face id (hub) or a path relative to the spec."""
    kind: Literal["checkpoint", "file", "hub"]
    name: str
    sha256: Optional[str] = None
    revision: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class ModelRecord:
    """One Triton model of the tarball. ``files``: path inside the model directory -> sha256 hex;
    ``python_packages``: its Python execution environment, name -> version (empty if it has none)."""
    name: str
    files: Mapping[str, str]
    source: Optional[SourceRecord] = None
    python_packages: Mapping[str, str] = dataclasses.field(default_factory=dict)


def bom_file_name(tarball_name: str) -> str:
    """``<stem>.cdx.json`` for ``<stem>.tar.gz`` (the ``.cdx.json`` suffix is CycloneDX's recognised one)."""
    for suffix in (".tar.gz", ".tgz", ".tar"):
        if tarball_name.endswith(suffix):
            return tarball_name[: -len(suffix)] + ".cdx.json"
    raise ValueError(f"{tarball_name}: not a tarball name (.tar.gz)")


def model_record_from_dir(name: str, directory: pathlib.Path, source: Optional[SourceRecord],
                          python_packages: Mapping[str, str]) -> ModelRecord:
    """Every file under ``directory`` (nothing skipped: the BOM lists what ships), by sorted posix path."""
    files = {}
    for path in sorted(directory.rglob("*")):
        if path.is_file():
            with path.open("rb") as handle:
                files[path.relative_to(directory).as_posix()] = hashlib.file_digest(handle, "sha256").hexdigest()
    return ModelRecord(name=name, files=files, source=source, python_packages=dict(python_packages))


def _sha256(hex_digest: str) -> list[HashType]:
    return [HashType(alg=HashAlgorithm.SHA_256, content=hex_digest.lower())]


def _pypi_name(name: str) -> str:
    # The purl spec's pypi rule (lower case, "_" as "-"; https://github.com/package-url/purl-spec), for the
    # component's name too: the same package named "Pillow" by one model and "pillow" by another is one component.
    return name.lower().replace("_", "-")


def _package(name: str, version: str) -> Component:
    purl = PackageURL(type="pypi", name=_pypi_name(name), version=version)
    return Component(type=ComponentType.LIBRARY, name=_pypi_name(name), version=version, purl=purl,
                     bom_ref=purl.to_string())


def _source(source: SourceRecord) -> Component:
    ref = f"source:{source.kind}:{source.name}" + (f"@{source.revision}" if source.revision else "") \
        + (f"#sha256:{source.sha256.lower()}" if source.sha256 else "")
    purl = None
    if source.kind == "hub":
        # purl's huggingface type: the owner as namespace, the commit as version (lower case).
        owner, _, model = source.name.rpartition("/")
        purl = PackageURL(type="huggingface", namespace=owner or None, name=model,
                          version=source.revision.lower() if source.revision else None)
    # A checkpoint or Hub model is itself a model (the one this was derived from); a given file is a file.
    kind = ComponentType.FILE if source.kind == "file" else ComponentType.MACHINE_LEARNING_MODEL
    return Component(type=kind, name=source.name, version=source.revision, bom_ref=ref, purl=purl,
                     hashes=_sha256(source.sha256) if source.sha256 else None,
                     properties=[Property(name="tritonsm:source-kind", value=source.kind)])


def _image(image: str, triton_version: str, other_registries: Sequence[str] = ()) -> Component:
    """The serving container: ``[registry/]path[:tag][@digest]`` as purl's docker type (the registry as the
    repository_url qualifier, the digest or else the tag as version). ``other_registries``: the same release's
    references in the other regions the tarball serves in, each a ``tritonsm:image-other-region`` property (the
    library keeps properties sorted, so the name, not the order, tells them from ``tritonsm:image``)."""
    rest, _, digest = image.partition("@")
    path, tag = rest, ""
    if ":" in rest.rsplit("/", 1)[-1]:
        path, tag = rest.rsplit(":", 1)
    first, _, remainder = path.partition("/")
    registry = first if remainder and ("." in first or ":" in first or first == "localhost") else ""
    path = remainder if registry else path
    namespace, _, name = path.rpartition("/")
    version = digest or tag or None
    purl = PackageURL(type="docker", namespace=namespace or None, name=name, version=version,
                      qualifiers={"repository_url": registry} if registry else None)
    return Component(type=ComponentType.CONTAINER, name=path, version=version, purl=purl, bom_ref=purl.to_string(),
                     description=f"NVIDIA Triton Inference Server {triton_version}",
                     properties=[Property(name="tritonsm:image", value=image),
                                 *(Property(name="tritonsm:image-other-region", value=ref) for ref in other_registries),
                                 Property(name="tritonsm:triton-version", value=triton_version)])


def _model(record: ModelRecord) -> Component:
    # machine-learning-model: CycloneDX 1.6's component type for a model (https://cyclonedx.org/docs/1.6/json/,
    # components[].type); its files nested as `file` components, so each hash sits under its model.
    ref = f"model:{record.name}"
    model = Component(type=ComponentType.MACHINE_LEARNING_MODEL, name=record.name, bom_ref=ref)
    for path, digest in record.files.items():
        model.components.add(Component(type=ComponentType.FILE, name=path, bom_ref=f"{ref}/{path}",
                                       hashes=_sha256(digest)))
    return model


def model_bom(*, artifact_name: str, artifact_sha256: str, models: Sequence[ModelRecord], triton_image: str,
              triton_version: str, tools: Mapping[str, str], other_registries: Sequence[str] = ()) -> bytes:
    """The CycloneDX 1.6 JSON document for one tarball, as bytes; validated against the strict schema.

    ``triton_image``: the serving image's full reference (registry/repository:tag), the component a scanner pulls;
    ``other_registries``: the same release in the registries of the other regions it serves in (packaging.Provenance).
    """
    names = [record.name for record in models]
    if len(set(names)) != len(names):
        raise ValueError(f"{artifact_name}: model names repeat: {sorted(names)}")
    bom = Bom()
    artifact = Component(type=ComponentType.FILE, name=artifact_name, bom_ref=f"artifact:{artifact_name}",
                         hashes=_sha256(artifact_sha256))
    bom.metadata.component = artifact
    for tool, version in sorted(tools.items()):
        bom.metadata.tools.components.add(Component(type=ComponentType.APPLICATION, name=tool, version=version))
    image = _image(triton_image, triton_version, other_registries)
    bom.components.add(image)
    # Shared components (one checkpoint behind a task's steps, numpy in every Python model) by bom-ref, once.
    shared: dict[str, Component] = {}
    model_components = []
    for record in sorted(models, key=lambda r: r.name):
        model = _model(record)
        model_components.append(model)
        needs = [shared.setdefault(c.bom_ref.value or "", c) for c in
                 ([_source(record.source)] if record.source else [])
                 + [_package(n, v) for n, v in sorted(record.python_packages.items())]]
        bom.register_dependency(model, needs + [image])
    for component in [*model_components, *shared.values()]:
        bom.components.add(component)
    bom.register_dependency(artifact, model_components)
    return _deterministic(JsonV1Dot6(bom).output_as_string(), artifact_name)


def _deterministic(text: str, artifact_name: str) -> bytes:
    document: dict[str, Any] = json.loads(text)
    # The library stamps the time and a uuid4; neither says anything about the tarball, both break equal bytes.
    document["metadata"].pop("timestamp", None)
    document.pop("serialNumber", None)
    content = json.dumps(document, sort_keys=True, separators=(",", ":"))
    serial = uuid.uuid5(_SERIAL_NAMESPACE, hashlib.sha256(content.encode()).hexdigest())
    document["serialNumber"] = serial.urn
    out = json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    problem = validation_error(out)
    if problem is not None:
        raise ValueError(f"{artifact_name}: the bill of materials is not valid CycloneDX "
                         f"{SCHEMA_VERSION.to_version()}: {problem}")
    return out.encode()


def validation_error(document: str) -> Optional[str]:
    """The first error of the strict CycloneDX JSON schema (unknown properties refused too), or None."""
    error = JsonStrictValidator(SCHEMA_VERSION).validate_str(document)
    return None if error is None else str(getattr(error.data, "message", error))
