"""Endpoint artifacts: which model directories go into which tarball, and packing them.

SME: one tarball per endpoint, one top-level directory per served model (ensemble + steps),
never a bare config.pbtxt (https://docs.aws.amazon.com/sagemaker/latest/dg/multi-model-endpoints.html and Triton's src/sagemaker_server.cc). MME: one tarball per Triton model; renamed copies get
their own directory name and config name; an ensemble travels with its steps (https://docs.aws.amazon.com/sagemaker/latest/dg/multi-model-endpoints.html and Triton's src/sagemaker_server.cc).
File names are ``<name>-<sha256[:12]>.tar.gz``: new content, new name (never overwrite an S3 key).
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import pathlib
from typing import Any, Mapping, Optional

from deployment_spec import Spec
from deployment_spec.facts import images, triton_images
from deployment_spec.sections.endpoint import EndpointKind, EndpointSpec
from deployment_spec.builds.manifest import Artifact, EndpointArtifacts, ModelEntry
from model_build import archive, checks, layout, model_config, signing


PROGRESS_MIN_BYTES = 50_000_000


@dataclasses.dataclass(frozen=True)
class Planned:
    """One tarball to make: its name stem and (Triton name, spec model) per top-level directory."""

    stem: str
    members: tuple[tuple[str, str], ...]

    @property
    def triton_names(self) -> tuple[str, ...]:
        return tuple(t for t, _ in self.members)


def plan(spec: Spec, endpoint: EndpointSpec) -> list[Planned]:
    if endpoint.kind is EndpointKind.SINGLE_MODEL:
        members = tuple((t, m.name) for m in spec.served_models(endpoint) for t in m.triton_names())
        return [Planned(endpoint.name, members)]
    out = []
    for name in endpoint.models:
        model = spec.models[name]
        steps = _steps(spec, name)
        for triton_name in model.triton_names():
            out.append(Planned(triton_name, ((triton_name, name),) + tuple((s, s) for s in steps)))
    return out


def _steps(spec: Spec, name: str) -> list[str]:
    """All models an ensemble calls, depth first, each once."""
    out: list[str] = []
    model = spec.models[name]
    for step in (model.ensemble.steps if model.ensemble else ()):
        for found in [step.model] + _steps(spec, step.model):
            if found not in out:
                out.append(found)
    return out


def default_model(spec: Spec, endpoint: EndpointSpec) -> Optional[str]:
    if endpoint.kind is not EndpointKind.SINGLE_MODEL:
        return None
    return endpoint.default_model or endpoint.models[0]


@dataclasses.dataclass(frozen=True)
class Provenance:
    """What the bill of materials beside each tarball says besides its files (model_build.sbom): per spec model what
    it was built from and its execution environment's packages, the build tools and the serving image."""

    sources: Mapping[str, Any] = dataclasses.field(default_factory=dict)          # spec model -> sbom.SourceRecord
    packages: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict)  # spec model -> name: version
    tools: Mapping[str, str] = dataclasses.field(default_factory=dict)
    triton_version: str = ""
    # The regions of the spec's environments, the first environment's first: where the tarball may serve.
    regions: tuple[str, ...] = ()

    @property
    def triton_images(self) -> tuple[str, ...]:
        """The serving image's full reference (registry/repository:tag) in each region's SageMaker registry, the
        first environment's region first. The registry differs per region (another account; amazonaws.com.cn in
        China): one tarball serving in two regions pulls the release from two registries. Without a region, the
        region-independent ``sagemaker-tritonserver:<release>-py3``."""
        found = tuple(images.image_uri(self.triton_version, region) for region in self.regions
                      if images.account(self.triton_version, region) is not None)
        return found or (f"{triton_images.REPOSITORY}:{triton_images.TAG_PREFIX.get(self.triton_version, '')}",)

    @property
    def triton_image(self) -> str:
        """The reference the bill of materials names: the one of the spec's first environment's region."""
        return self.triton_images[0]


def pack(out_dir: pathlib.Path, planned: Planned, dirs: Mapping[str, pathlib.Path],
         key: Optional[signing.AnyKey] = None, provenance: Optional[Provenance] = None) -> Artifact:
    """Writes one deterministic tarball, each model directory signed with ``key`` where given, and its CycloneDX bill
    of materials beside it; returns its manifest record."""
    tree, replace = {}, {}
    for triton_name, spec_model in planned.members:
        source = dirs[spec_model]
        tree[triton_name] = source
        if triton_name != spec_model:
            text = (source / layout.CONFIG).read_text()
            replace[f"{triton_name}/{layout.CONFIG}"] = model_config.renamed(text, triton_name).encode()
    digests = {name: _packed_digests(name, source, replace) for name, source in tree.items()}
    signatures = {} if key is None else {
        f"{name}/{signing.SIGNATURE_FILE}": signing.sign_model(key, name, digests[name]) for name in tree}
    tmp = out_dir / f".{planned.stem}.partial.tar.gz"
    try:
        with _progress_bar(planned.stem, archive.total_bytes(tree)) as update:
            sha = archive.write_tarball(tmp, tree, replace, progress=update, extra=signatures)
        final = out_dir / f"{planned.stem}-{sha[:12]}.tar.gz"
        size = tmp.stat().st_size
        bom = _write_bom(final, sha, planned, digests, signatures, provenance or Provenance())
        os.replace(tmp, final)  # last: a tarball is never there without its bill of materials
    finally:
        if tmp.exists():
            tmp.unlink()
    return Artifact(final.name, sha, size, planned.triton_names, signer=key.identity if key else None,
                    signatures={path.split("/")[0]: hashlib.sha256(data).hexdigest()
                                for path, data in sorted(signatures.items())}, sbom=bom)


def _write_bom(tarball: pathlib.Path, sha: str, planned: Planned, digests: Mapping[str, Mapping[str, str]],
               signatures: Mapping[str, bytes], provenance: Provenance) -> str:
    """The tarball's CycloneDX document (its files as packed, signatures included), beside it; returns its name."""
    from model_build import sbom  # cyclonedx: only when packing

    models = []
    for triton_name, spec_model in planned.members:
        files = dict(digests[triton_name])
        signature = signatures.get(f"{triton_name}/{signing.SIGNATURE_FILE}")
        if signature is not None:
            files[signing.SIGNATURE_FILE] = hashlib.sha256(signature).hexdigest()
        models.append(sbom.ModelRecord(triton_name, files, provenance.sources.get(spec_model),
                                       dict(provenance.packages.get(spec_model, {}))))
    document = sbom.model_bom(artifact_name=tarball.name, artifact_sha256=sha, models=models,
                              triton_image=provenance.triton_image, triton_version=provenance.triton_version,
                              tools=provenance.tools, other_registries=provenance.triton_images[1:])
    name = sbom.bom_file_name(tarball.name)
    with archive.atomic_path(tarball.parent / name) as tmp:
        tmp.write_bytes(document)
    return name


def _packed_digests(name: str, source: pathlib.Path, replace: Mapping[str, bytes]) -> dict[str, str]:
    """sha256 of each file of one model directory as it goes into the tarball (a rewritten config included)."""
    out = {}
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        inside = path.relative_to(source).as_posix()
        data = replace.get(f"{name}/{inside}")
        if data is None:
            with open(path, "rb") as fh:
                out[inside] = hashlib.file_digest(fh, "sha256").hexdigest()
        else:
            out[inside] = hashlib.sha256(data).hexdigest()
    return out


@contextlib.contextmanager
def _progress_bar(stem: str, total: int):
    """A byte counter on a terminal for big tarballs (gzip of weights takes a while); silent in logs."""
    if total < PROGRESS_MIN_BYTES:
        yield None
        return
    from tqdm import tqdm
    with tqdm(total=total, unit="B", unit_scale=True, desc=f"pack {stem}", leave=False, disable=None) as bar:
        yield bar.update


def reusable(old: Optional[EndpointArtifacts], endpoint: EndpointSpec, default: Optional[str], planned: Planned,
             old_models: Mapping[str, ModelEntry], new_models: Mapping[str, ModelEntry],
             out_dir: pathlib.Path, signer: Optional[str] = None,
             triton_images: Optional[tuple[str, ...]] = None) -> Optional[Artifact]:
    """The previous build's tarball for ``planned`` if nothing in it changed, its signer included (no re-pack, no
    rewrite). ``triton_images`` (``Provenance.triton_images``): its bill of materials must name these, else it is
    packed again (the same tarball bytes, a bill naming the spec's regions' registries)."""
    if old is None or old.kind != endpoint.kind.value or old.default_model != default:
        return None
    for artifact in old.artifacts:
        if artifact.models != planned.triton_names or not artifact.file.startswith(planned.stem + "-"):
            continue
        if artifact.signer != signer:
            return None
        if any(t not in old_models or t not in new_models or old_models[t].build_hash != new_models[t].build_hash
               for t in artifact.models):
            return None
        path = out_dir / artifact.file
        bom = out_dir / artifact.sbom if artifact.sbom else None
        if path.is_file() and path.stat().st_size == artifact.size and bom is not None and bom.is_file() and (
                triton_images is None or bom_images(bom) == (triton_images[0], frozenset(triton_images[1:]))):
            return artifact
    return None


def bom_images(bom: pathlib.Path) -> Optional[tuple[str, frozenset[str]]]:
    """The serving image a bill of materials names (``sbom.model_bom``: its ``tritonsm:image``) and the other regions'
    references (``tritonsm:image-other-region``, a set: the library sorts properties); None for a bill that cannot be
    read or names no image."""
    try:
        document = json.loads(bom.read_text())
        properties = [(p["name"], p["value"]) for c in document.get("components", []) if c.get("type") == "container"
                      for p in c.get("properties", [])]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError):
        return None
    first = [value for name, value in properties if name == "tritonsm:image"]
    if len(first) != 1:
        return None
    return first[0], frozenset(value for name, value in properties if name == "tritonsm:image-other-region")


def check_endpoint(endpoint: EndpointSpec, planned: list[Planned]) -> None:
    if endpoint.kind is EndpointKind.MULTI_MODEL:
        checks.check_unique_names(endpoint.name, [p.stem for p in planned])
    for p in planned:
        checks.check_unique_names(endpoint.name, p.triton_names)
