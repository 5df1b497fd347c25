"""The build manifest: what model_build produced, read by the CDK app and the local endpoint.

model_build writes it (``assets/manifest.json``); nothing here imports torch or aws_cdk.
Paths inside are relative to the manifest's folder.
"""
from __future__ import annotations

import dataclasses
import json
import pathlib
from typing import Any, Optional

SCHEMA_VERSION = 3  # 3: typed verification and execution_environment records (2: serving_check, python_env)
DEFAULT_MANIFEST = pathlib.Path("assets") / "manifest.json"


class ManifestError(ValueError):
    """The manifest is missing, unreadable or does not match the spec."""


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    name: str
    data_type: str            # Triton enum name, e.g. "TYPE_FP32"
    dims: tuple[int, ...]     # the model's own, without the batch dimension when max_batch_size > 0
    optional: bool = False    # an input a request may leave out (config.pbtxt ``optional: true``)

    def served_dims(self, batched: bool) -> tuple[int, ...]:
        """The dims clients send and receive, batch excluded. Triton refuses a tensor without dims ("must specify
        'dims'", core src/model_config_utils.cc), so one value per batch row (model shape [batch]) is served as
        [batch, 1] and config.pbtxt gives the model its own shape with ``reshape: { shape: [ ] }`` (Triton's
        model_configuration.md, "Reshape")."""
        return self.dims or ((1,) if batched else ())

    def reshaped(self, batched: bool) -> bool:
        """True where the served dims differ from the model's (config.pbtxt then carries ``reshape``)."""
        return self.served_dims(batched) != self.dims


@dataclasses.dataclass(frozen=True)
class BuilderFacts:
    """Tool versions and hardware a model was built with (TensorRT plans only run where they were built)."""

    versions: dict[str, str] = dataclasses.field(default_factory=dict)   # e.g. {"torch": "2.13.0", "tensorrt": "10.9.0"}
    gpu_name: Optional[str] = None
    gpu_compute_capability: Optional[str] = None                         # e.g. "8.6"; set for TensorRT plans


@dataclasses.dataclass(frozen=True)
class Verification:
    """The model's file run in the runtime release that serves it (model_build/verification/), or why it was not.

    ``details`` holds what only one backend measures: the int8 gate (``int8``), the runtime a user's
    file was compared with (``reference``), DALI's placement and pixel levels, a trace's torch release.
    """

    ran: bool
    triton_version: Optional[str] = None     # the release whose runtimes ran it, or would have
    why: Optional[str] = None                # why it did not run (or what the opt-in adds)
    runtime: Optional[str] = None            # "onnxruntime", "torch", "dali"
    version: Optional[str] = None            # that runtime's release
    device: Optional[str] = None             # "cpu"
    cases: Optional[int] = None              # inputs run (batch sizes, lengths, padded rows, images)
    graph: Optional[str] = None              # the file that shipped, e.g. "transformer-fused graph"
    max_abs_error: Optional[float] = None
    max_rel_error: Optional[float] = None
    invariance_error: Optional[float] = None  # mask and padding invariance, in the runtime against itself
    rejected: dict[str, str] = dataclasses.field(default_factory=dict)  # candidate -> why it did not ship
    details: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class ExecutionEnvironment:
    """A Python-backend model's execution environment, shipped in its model directory."""

    file: str                   # the archive beside config.pbtxt
    built_for: str              # "image" (the spec's Triton image) or "local" (tritonsm serve only)
    python: str                 # e.g. "3.12"
    target: str                 # what it was built for, in words
    archive_bytes: int
    unpacked_bytes: int
    packages: tuple[str, ...]   # "name==version"


@dataclasses.dataclass(frozen=True)
class ModelEntry:
    """One Triton model directory as built (a renamed MME copy is its own entry)."""

    name: str                 # Triton model name (directory name)
    spec_model: str           # the spec's model key it was built from
    backend: str
    max_batch_size: int
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    build_hash: str           # sha256 of the build inputs; unchanged => not rebuilt
    parity: Optional[dict[str, float]] = None   # max_abs_error, max_rel_error, atol, rtol
    builder: BuilderFacts = BuilderFacts()
    verification: Verification = Verification(ran=False)
    execution_environment: Optional[ExecutionEnvironment] = None
    # What it was built from (deployment_spec.builds.model_sources): sha256 of its settings, of each file or folder it read
    # (by its field under models.<name>) and of a user recipe's module; the stamps (names, sizes, mtimes) spare a
    # check re-reading unchanged files. Empty in a manifest written before they were recorded.
    sources: dict[str, str] = dataclasses.field(default_factory=dict)
    source_stamps: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Artifact:
    """One .tar.gz: an SME repository, or one MME model."""

    file: str                 # relative to the manifest folder
    sha256: str
    size: int
    models: tuple[str, ...]   # Triton model directories inside
    # The key every model directory is signed with (model_build.signing: "sha256:<hex>" of its PEM public key),
    # None for an unsigned build; and each directory's signature (<model>/model.sig) as sha256.
    signer: Optional[str] = None
    signatures: dict[str, str] = dataclasses.field(default_factory=dict)
    sbom: Optional[str] = None  # the CycloneDX bill of materials beside the tarball (model_build.sbom)

    @property
    def object_name(self) -> str:
        """The S3 object name / MME TargetModel: the tarball's file name, content-versioned."""
        return pathlib.PurePosixPath(self.file).name


@dataclasses.dataclass(frozen=True)
class EndpointArtifacts:
    kind: str                                 # "single-model" | "multi-model"
    artifacts: tuple[Artifact, ...]           # SME: exactly one; MME: one per Triton model
    default_model: Optional[str] = None       # SME only: SAGEMAKER_TRITON_DEFAULT_MODEL_NAME


@dataclasses.dataclass(frozen=True)
class Manifest:
    triton_version: str
    models: dict[str, ModelEntry]
    endpoints: dict[str, EndpointArtifacts]
    root: pathlib.Path = pathlib.Path(".")
    schema: int = SCHEMA_VERSION
    # Optional: what the build could not produce and why, keyed by spec path
    # ("models.<name>", "endpoints.<name>"), e.g. a TensorRT model on a machine without a GPU.
    not_built: dict[str, str] = dataclasses.field(default_factory=dict)
    # Optional: the models among those that this build machine lacks the tools for (a TensorRT
    # plan without a GPU and Docker), as opposed to models that failed; synth says where to build them.
    unavailable_here: tuple[str, ...] = ()

    def artifact_path(self, artifact: Artifact) -> pathlib.Path:
        return self.root / artifact.file

    def to_json(self) -> str:
        body = dataclasses.asdict(self)
        body.pop("root")
        return json.dumps(body, indent=2, sort_keys=True) + "\n"


def load_manifest(path: str | pathlib.Path = DEFAULT_MANIFEST) -> Manifest:
    path = pathlib.Path(path)
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise ManifestError(f"{path}: no build manifest; run `tritonsm build` first (it writes {path})") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ManifestError(f"{path}: unreadable build manifest ({exc}); delete it and run `tritonsm build`") from None
    if not isinstance(raw, dict):
        raise ManifestError(f"{path}: not a build manifest (a JSON object is expected); run `tritonsm build`")
    if raw.get("schema") != SCHEMA_VERSION:
        raise ManifestError(f"{path}: manifest schema {raw.get('schema')!r}, this tool reads {SCHEMA_VERSION}; "
                            "run `tritonsm build` to rewrite it")
    try:
        return Manifest(
            triton_version=raw["triton_version"],
            models={k: _model(v) for k, v in raw["models"].items()},
            endpoints={k: _endpoint(v) for k, v in raw["endpoints"].items()},
            root=path.parent,
            not_built=dict(raw.get("not_built") or {}),
            unavailable_here=tuple(raw.get("unavailable_here") or ()),
        )
    except (KeyError, TypeError) as exc:
        raise ManifestError(f"{path}: malformed build manifest (missing {exc}); run `tritonsm build`") from None


def _tensor(raw: dict[str, Any]) -> TensorSpec:
    return TensorSpec(raw["name"], raw["data_type"], tuple(raw["dims"]))


def _model(raw: dict[str, Any]) -> ModelEntry:
    b = raw.get("builder") or {}
    return ModelEntry(
        name=raw["name"], spec_model=raw["spec_model"], backend=raw["backend"],
        max_batch_size=raw["max_batch_size"],
        inputs=tuple(_tensor(t) for t in raw["inputs"]), outputs=tuple(_tensor(t) for t in raw["outputs"]),
        build_hash=raw["build_hash"], parity=raw.get("parity"),
        builder=BuilderFacts(dict(b.get("versions", {})), b.get("gpu_name"), b.get("gpu_compute_capability")),
        verification=_verification(raw["verification"]),
        execution_environment=_environment(raw.get("execution_environment")),
        sources=dict(raw.get("sources") or {}), source_stamps=dict(raw.get("source_stamps") or {}),
    )


def _verification(raw: dict[str, Any]) -> Verification:
    return Verification(**{**raw, "rejected": dict(raw.get("rejected") or {}), "details": dict(raw.get("details") or {})})


def _environment(raw: Optional[dict[str, Any]]) -> Optional[ExecutionEnvironment]:
    return None if raw is None else ExecutionEnvironment(**{**raw, "packages": tuple(raw["packages"])})


def _endpoint(raw: dict[str, Any]) -> EndpointArtifacts:
    arts = tuple(Artifact(a["file"], a["sha256"], a["size"], tuple(a["models"]), a.get("signer"),
                          dict(a.get("signatures") or {}), a.get("sbom")) for a in raw["artifacts"])
    return EndpointArtifacts(raw["kind"], arts, raw.get("default_model"))
