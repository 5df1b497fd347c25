"""What a Triton endpoint serves: model repositories packed as ``.tar.gz``, from a build or brought by the user.

A single-model endpoint serves one archive (SageMaker unpacks it into ``/opt/ml/model``); a
multi-model endpoint serves every archive under one S3 prefix, each called by its object name
(``TargetModel``). Archives are either the output of ``tritonsm build`` (read from its manifest,
with what the build recorded about each model) or tarballs the user brings: a local file, copied into
the model bucket under a content-versioned name, or an object already in S3.
"""
from __future__ import annotations

import dataclasses
import pathlib
import re
from typing import Mapping, Optional, Sequence

from deployment_spec.facts import instances
from deployment_spec.parsing.errors import Problem, PropsError, describe, raise_problems
from deployment_spec.builds.manifest import Artifact, Manifest, ManifestError, ModelEntry, load_manifest
from deployment_spec.parsing.parse import typed_fields_problems
from deployment_spec.parsing.type_checks import type_problems
from deployment_spec.sections.model import NAME_HELP, NAME_PATTERN, Backend, HardwareCompatibility
from triton_constructs import build_signing
from triton_constructs.archive_listing import ArchiveListing, listing_problems, read_listing
from triton_constructs.errors import SynthError

REBUILD = "run `tritonsm build`"
_S3_URL = re.compile(r"s3://(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])/(?P<key>(?:[^/]+/)*(?P<name>[^/]+\.tar\.gz))")
_VERSIONED = re.compile(r"(?P<stem>.+)-(?P<sha12>[0-9a-f]{12})\.tar\.gz")


@dataclasses.dataclass(frozen=True)
class ModelArchive:
    """One Triton model repository packed as ``.tar.gz``: a local file or an object already in S3.

    Build one with ``ModelArchive.from_file`` or ``ModelArchive.from_s3``.

    Attributes:
        models: The Triton model directories at the archive's root, the one it serves first (an
            ensemble before its steps). A single-model endpoint whose archive holds several serves the
            first (``SAGEMAKER_TRITON_DEFAULT_MODEL_NAME``).
        path: The local file; it is uploaded as a CDK asset and copied into the model bucket.
        s3_url: ``s3://bucket/key.tar.gz`` of an object already uploaded; read in place.
        sha256: The local file's sha256 (computed when not given); it names the copy, so an object is
            never overwritten (multi-model instances cache models by name).
        size: The local file's size in bytes.
        signed_by: The key (``sha256:`` of its PEM) whose signed build statement binds the file's sha256, size,
            models and signatures, checked at synth (``public_key``); the copy function is told the digest is the
            statement's. None: not checked against a statement.
    """

    models: tuple[str, ...]
    path: Optional[pathlib.Path] = None
    s3_url: Optional[str] = None
    sha256: Optional[str] = None
    size: Optional[int] = None
    signed_by: Optional[str] = None

    def __post_init__(self) -> None:
        raise_problems("ModelArchive", typed_fields_problems(self) or self._problems())

    @classmethod
    def from_file(cls, path: str | pathlib.Path, models: Optional[Sequence[str]] = None, *,
                  sha256: Optional[str] = None, public_key: Optional[str | pathlib.Path] = None,
                  statement: Optional[str | pathlib.Path] = None) -> "ModelArchive":
        """A local ``.tar.gz``, opened at synth: its root must hold the Triton model directories.

        Args:
            path: The archive (``tar -czf NAME.tar.gz -C REPOSITORY MODEL...``).
            models: The model directories to serve, the served one first; each must be at the archive's
                root. Defaults to every model directory there, ensembles first.
            sha256: The file's expected sha256; refused when the file differs. Defaults to none.
            public_key: The team's PEM public key (the spec's ``signing.public_key``): the archive must be one
                that ``tritonsm build --signing-key`` wrote, as its signed build statement binds it (sha256, size,
                models, each ``model.sig``); refused otherwise. Defaults to none: not checked.
            statement: The signed build statement. Defaults to ``build-statement.dsse.json`` beside the archive.
        """
        file = pathlib.Path(path)
        given = _declared(models)
        declared = None if isinstance(given, Problem) else given
        problems = ([given] if isinstance(given, Problem) else []) + _names_problems(declared or ())
        problems += _file_problems(file)
        listing: ArchiveListing | Problem | None = None
        if not problems:
            listing = read_listing(file)
            if isinstance(listing, Problem):
                problems.append(listing)
            else:
                problems += listing_problems(file, listing, declared or ())
                if sha256 is not None and sha256 != listing.sha256:
                    problems.append(Problem("sha256", repr(sha256), f"the file's sha256 ({listing.sha256})",
                                            "give the sha256 of this file, or leave it out"))
        signer = None
        if public_key is not None and isinstance(listing, ArchiveListing) and not problems:
            signer, signed = build_signing.archive_problems(file, listing, pathlib.Path(public_key),
                                                            pathlib.Path(statement) if statement else None)
            problems += signed
        raise_problems("ModelArchive", problems)
        assert isinstance(listing, ArchiveListing)  # no problem: the file was read
        return cls(tuple(declared or listing.models), path=file, sha256=listing.sha256, size=listing.size,
                   signed_by=signer)

    @staticmethod
    def built_from(value: object) -> Optional[str]:
        """How a path or an S3 URL given where a ``ModelArchive`` belongs is made into one (for messages)."""
        if isinstance(value, (str, pathlib.Path)):
            text = str(value)
            return f"ModelArchive.from_s3({text!r}, [MODEL])" if text.startswith("s3://") \
                else f"ModelArchive.from_file({text!r})"
        return None

    @classmethod
    def from_s3(cls, url: str, models: Sequence[str]) -> "ModelArchive":
        """An object already in S3 (``s3://bucket/prefix/name.tar.gz``), read where it is.

        Its contents are not read at synth (the app may have no access to the bucket): ``models`` are taken
        as given and checked by name only; the endpoint's health check is the first to open the archive.
        """
        declared = _declared(models)
        if isinstance(declared, Problem):
            raise PropsError("ModelArchive", [declared])
        return cls(tuple(declared or ()), s3_url=url)

    @property
    def object_name(self) -> str:
        """The name in the bucket and, on a multi-model endpoint, the ``TargetModel``: ``<name>-<sha12>.tar.gz``."""
        if self.s3_url is not None:
            match = _S3_URL.fullmatch(self.s3_url)
            return match.group("name") if match else self.s3_url.rsplit("/", 1)[-1]
        name = self.path.name if self.path else "model.tar.gz"
        if _VERSIONED.fullmatch(name) or not self.sha256:
            return name
        return f"{name.removesuffix('.tar.gz')}-{self.sha256[:12]}.tar.gz"

    @property
    def s3_prefix(self) -> Optional[tuple[str, str]]:
        """(bucket, key prefix ending in '/') of an S3 archive; None for a local file."""
        match = _S3_URL.fullmatch(self.s3_url or "")
        if match is None:
            return None
        return match.group("bucket"), match.group("key")[:-len(match.group("name"))]

    def _problems(self) -> list[Problem]:
        out = _names_problems(self.models)
        if not self.models:
            out.append(Problem("models", "an empty list", "the Triton model directories in the archive, the served "
                               "one first", "name them, e.g. ['resnet50']"))
        if (self.path is None) == (self.s3_url is None):
            out.append(Problem("path", "both a file and an S3 URL" if self.path else "neither a file nor an S3 URL",
                               "exactly one of them", "use ModelArchive.from_file or ModelArchive.from_s3"))
        if self.path is not None:
            out += _file_problems(self.path)
        if self.s3_url is not None and not _S3_URL.fullmatch(self.s3_url):
            out.append(Problem("s3_url", describe(self.s3_url), "s3://<bucket>/<key>.tar.gz",
                               "give the object's URL, e.g. s3://my-models/resnet50/resnet50-v3.tar.gz"))
        return out


def _declared(models: Optional[Sequence[str]]) -> Optional[tuple[str, ...]] | Problem:
    """The model names as given: None when left out; a string on its own is a mistake, not a list of letters."""
    if models is None:
        return None
    if isinstance(models, str):
        return Problem("models", f"{describe(models)} (str)", "a list of model directory names",
                       f"write [{models!r}]")
    return tuple(models)


def _names_problems(models: Sequence[str]) -> list[Problem]:
    return [Problem(f"models[{i}]", describe(name), NAME_HELP, "use the model directory's name")
            for i, name in enumerate(models) if not isinstance(name, str) or not re.fullmatch(NAME_PATTERN, name)]


def _file_problems(path: pathlib.Path) -> list[Problem]:
    if path.name.endswith(".tar.gz") and path.is_file():
        return []
    return [Problem("path", describe(str(path)), "an existing .tar.gz file (a Triton model repository: one "
                    "directory per model at its root)",
                    "pack it with `tar -czf NAME.tar.gz -C REPOSITORY MODEL...`, or run `tritonsm build`")]


@dataclasses.dataclass(frozen=True)
class ModelFacts:
    """What a build recorded about one Triton model, checked against where it will be served.

    Attributes:
        backend: The Triton backend (``onnxruntime``, ``tensorrt``, ``python``, ...).
        verified_for: The Triton release whose runtimes the build ran it in; None when never verified.
        python_env_for: A Python-backend model's execution environment: ``image`` or ``local``.
        python_env_target: What that environment was built for (shown in messages).
        compute_capability: The GPU a TensorRT plan was built on, e.g. ``8.6``.
        gpu_name: That GPU's name.
        hardware_compatibility: The plan's TensorRT hardware-compatibility level.
        unverified_why: Why the build could not verify it in the serving runtime, when it says.
    """

    backend: str
    verified_for: Optional[str] = None
    python_env_for: Optional[str] = None
    python_env_target: Optional[str] = None
    compute_capability: Optional[str] = None
    gpu_name: Optional[str] = None
    hardware_compatibility: HardwareCompatibility = HardwareCompatibility.NONE
    unverified_why: Optional[str] = None

    @classmethod
    def from_entry(cls, entry: ModelEntry,
                   hardware_compatibility: HardwareCompatibility = HardwareCompatibility.NONE) -> "ModelFacts":
        env = entry.execution_environment
        return cls(entry.backend, entry.verification.triton_version, env.built_for if env else None,
                   env.target if env else None, entry.builder.gpu_compute_capability, entry.builder.gpu_name,
                   hardware_compatibility, entry.verification.why if entry.verification.ran else None)


@dataclasses.dataclass(frozen=True)
class ModelRepositories:
    """The archives one endpoint serves, and what is known about each model in them.

    Build one with ``ModelRepositories.from_manifest`` (the output of ``tritonsm build``) or
    ``ModelRepositories.from_archives`` (tarballs you bring).

    Attributes:
        archives: One per single-model endpoint; one per model (or ensemble) on a multi-model endpoint.
        default_model: The model a single-model endpoint serves when its archive holds several. Defaults
            to the archive's first model.
        facts: What the build recorded, by Triton model name; empty for archives you bring.
        origin: Where they came from, for messages.
    """

    archives: tuple[ModelArchive, ...]
    default_model: Optional[str] = None
    facts: Mapping[str, ModelFacts] = dataclasses.field(default_factory=dict)
    origin: str = "archives"

    @staticmethod
    def built_from(value: object) -> Optional[str]:
        """How an archive, a tarball's path or a manifest's path given for ``models`` becomes one (messages)."""
        if isinstance(value, ModelArchive):
            return "ModelRepositories.from_archives([archive])"
        if isinstance(value, (str, pathlib.Path)) and str(value).endswith(".json"):
            return f"ModelRepositories.from_manifest({str(value)!r}, [MODEL])"
        archive = ModelArchive.built_from(value)
        return f"ModelRepositories.from_archives([{archive}])" if archive else None

    @classmethod
    def from_archives(cls, archives: Sequence[ModelArchive], *,
                      default_model: Optional[str] = None) -> "ModelRepositories":
        """Tarballs you bring; each ``ModelArchive`` names the Triton models inside."""
        raise_problems("ModelRepositories.from_archives", type_problems("archives", archives, Sequence[ModelArchive]))
        return cls(tuple(archives), default_model)

    @classmethod
    def from_manifest(cls, manifest: str | pathlib.Path | Manifest, models: Sequence[str], *,
                      hardware_compatibility: Optional[Mapping[str, HardwareCompatibility]] = None,
                      public_key: Optional[str | pathlib.Path] = None) -> "ModelRepositories":
        """The archives ``tritonsm build`` made for ``models`` (Triton model names), from its manifest.

        Each name picks the archive that serves it (its first model): a single-model endpoint names one
        model (an ensemble brings its steps), a multi-model endpoint one per archive.

        Args:
            manifest: ``assets/manifest.json`` (or its path), written by ``tritonsm build``.
            models: The models to serve.
            hardware_compatibility: TensorRT plans built with a hardware-compatibility level, by model
                name (the spec's ``tensorrt.hardware_compatibility``). Defaults to none: each plan runs
                only on the compute capability it was built on.
            public_key: The team's PEM public key (the spec's ``signing.public_key``): the build's signed
                statement beside the manifest must verify with it, and each archive (read at synth, not trusted
                from the manifest) and the manifest must be what it binds. Defaults to none: not checked.

        Raises:
            SynthError: the manifest is missing or lacks a model, a file is missing or stale, or (with
                ``public_key``) the build is not the one its signed statement binds.
        """
        path = pathlib.Path(manifest.root / "manifest.json") if isinstance(manifest, Manifest) else pathlib.Path(manifest)
        try:
            loaded = manifest if isinstance(manifest, Manifest) else load_manifest(path)
        except ManifestError as exc:
            raise SynthError("ModelRepositories.from_manifest", [str(exc)]) from None
        by_top = {a.models[0]: a for built in loaded.endpoints.values() for a in built.artifacts if a.models}
        missing = [name for name in models if name not in by_top]
        if missing or not models:
            served = ", ".join(sorted(by_top)) or "none"
            raise SynthError("ModelRepositories.from_manifest", [
                f"{path} serves no archive for {', '.join(repr(m) for m in missing) or 'an empty model list'}; "
                f"it has archives for: {served}; add the model to the spec and {REBUILD}, or name one of those"])
        return cls.from_built(loaded, [by_top[name] for name in models], origin=str(path),
                              hardware_compatibility=hardware_compatibility, public_key=public_key)

    @classmethod
    def from_built(cls, manifest: Manifest, artifacts: Sequence[Artifact], *, origin: str,
                   default_model: Optional[str] = None,
                   hardware_compatibility: Optional[Mapping[str, HardwareCompatibility]] = None,
                   public_key: Optional[str | pathlib.Path] = None) -> "ModelRepositories":
        """Archives of a loaded manifest, after checking each file is there and unchanged (with ``public_key``:
        as ``from_manifest`` says).

        Raises:
            SynthError: a missing, resized or not content-versioned file, or a build its statement does not bind.
        """
        signer = None
        if public_key is not None:  # first: with a key, the signed statement decides what the manifest may say
            signer, signed = build_signing.built_problems(manifest, pathlib.Path(origin), artifacts,
                                                          pathlib.Path(public_key))
            if signed:
                raise SynthError(f"model archives from {origin}", [str(p) for p in signed])
        problems = [p for artifact in artifacts for p in artifact_file_problems(artifact, manifest)]
        if problems:
            raise SynthError(f"model archives from {origin}", problems)
        compat = hardware_compatibility or {}
        archives = tuple(ModelArchive(a.models, path=manifest.artifact_path(a), sha256=a.sha256, size=a.size,
                                      signed_by=signer) for a in artifacts)
        facts = {name: ModelFacts.from_entry(manifest.models[name], compat.get(
                    manifest.models[name].spec_model, HardwareCompatibility.NONE))
                 for a in artifacts for name in a.models if name in manifest.models}
        return cls(archives, default_model, facts, origin)

    @property
    def model_names(self) -> list[str]:
        """Every Triton model directory in the archives."""
        return [name for archive in self.archives for name in archive.models]

    def served_default(self) -> Optional[str]:
        """SAGEMAKER_TRITON_DEFAULT_MODEL_NAME of a single-model endpoint whose archive holds several models."""
        if len(self.archives) != 1 or len(self.archives[0].models) < 2:
            return None
        return self.default_model or self.archives[0].models[0]

    def problems(self, *, multi_model: bool, triton_version: str, instance_type: str,
                 instance_facts: Optional[instances.InstanceFacts] = None) -> list[Problem]:
        """What SageMaker or Triton would refuse about serving these archives there (paths under ``models``)."""
        out = []
        if not multi_model and len(self.archives) != 1:
            out.append(Problem("models", f"{len(self.archives)} archives", "exactly one on a single-model endpoint "
                               "(SageMaker unpacks one ModelDataUrl into /opt/ml/model)",
                               "pack the models into one archive, or use a multi-model endpoint"))
        if self.default_model is not None and self.default_model not in self.model_names:
            out.append(Problem("models.default_model", describe(self.default_model),
                               f"a model in the archive ({', '.join(self.model_names)})", "name one of them"))
        names = [a.object_name for a in self.archives]
        for name in sorted({n for n in names if names.count(n) > 1}):
            out.append(Problem("models", f"two archives named {name}", "unique object names (a multi-model "
                               "endpoint's TargetModel)", "rename one file"))
        prefixes = {a.s3_prefix for a in self.archives if a.s3_url is not None}
        local = [a for a in self.archives if a.path is not None]
        if multi_model and (len(prefixes) > 1 or (prefixes and local)):
            out.append(Problem("models", "archives under different S3 prefixes", "one prefix for a multi-model "
                               "endpoint (its ModelDataUrl), or local files (copied under one prefix)",
                               "upload the archives under one prefix, or give them all as local files"))
        for name in self.model_names:
            facts = self.facts.get(name)
            if facts is not None:
                out += (verified_for(name, facts, triton_version) + environment_for_image(name, facts)
                        + plan_runs_on(name, facts, instance_type, instance_facts))
        return out


def artifact_file_problems(artifact: Artifact, manifest: Manifest) -> list[str]:
    """The file must be where the manifest says, of the size it says, named by its content."""
    path = manifest.artifact_path(artifact)
    if not path.is_file():
        return [f"artifact {artifact.file} is missing ({path} does not exist); {REBUILD}"]
    out = []
    size = path.stat().st_size
    if size != artifact.size:
        out.append(f"artifact {artifact.file} is {size} bytes, the manifest says {artifact.size} (a stale or "
                   f"partial build); {REBUILD}")
    if not artifact.object_name.endswith(f"-{artifact.sha256[:12]}.tar.gz"):
        out.append(f"artifact {artifact.file} is not named <name>-<first 12 hex digits of its sha256>.tar.gz: "
                   f"S3 objects are never overwritten, because instances cache models by name; {REBUILD}")
    return out


def verified_for(name: str, facts: ModelFacts, triton_version: str) -> list[Problem]:
    """Each model must have been checked in the runtimes of the Triton release that serves it."""
    if facts.verified_for == triton_version:
        return []
    allowed = f"a model verified in the runtimes of Triton {triton_version}, which serves it"
    if facts.unverified_why and not facts.verified_for:  # the build said why: its fix is the packages, not a rebuild
        return [Problem(f"models.{name}", f"a model not verified in its serving runtime ({facts.unverified_why})",
                        allowed, "pin the releases the build machine checked with in the model's python.requirements "
                        f"(or build where the pinned ones are installed), then {REBUILD}")]
    got = (f"a model verified in the runtimes of Triton {facts.verified_for}" if facts.verified_for
           else "a model never verified in a serving runtime (an older build)")
    return [Problem(f"models.{name}", got, allowed, f"{REBUILD} for triton_version {triton_version}")]


def environment_for_image(name: str, facts: ModelFacts) -> list[Problem]:
    """A Python environment built for the local endpoint's Python would not load in the image."""
    if facts.python_env_for != "local":
        return []
    return [Problem(f"models.{name}", f"a Python execution environment built for {facts.python_env_target} "
                    "(`tritonsm build --python-env-for local`)", "an environment built for the endpoint's image",
                    f"{REBUILD} without --python-env-for local")]


def plan_runs_on(name: str, facts: ModelFacts, instance_type: str,
                 instance_facts: Optional[instances.InstanceFacts] = None) -> list[Problem]:
    """TensorRT plans run only on the compute capability they were built for (https://developer.nvidia.com/cuda-gpus
    and the EC2 accelerated-computing instance documentation), unless built hardware-compatible."""
    itype = instances.lookup(instance_type, instance_facts)
    if itype is None or facts.backend != Backend.TENSORRT.value:
        return []
    built_cc = facts.compute_capability
    if built_cc is None:
        return [Problem(f"models.{name}", "a TensorRT plan without a recorded GPU compute capability",
                        "a plan whose build recorded its GPU", f"{REBUILD} on the target GPU")]
    target_cc = itype.family.compute_capability
    if target_cc is not None and facts.hardware_compatibility.plan_runs(built_cc, target_cc):
        return []
    gpu = f"{itype.family.gpu}, compute capability {target_cc}" if target_cc else "no GPU"
    families = ", ".join(f"ml.{n}" for n, fam in instances.FAMILIES.items() if fam.compute_capability == built_cc)
    return [Problem(f"models.{name}", f"a TensorRT plan built for compute capability {built_cc} "
                    f"({facts.gpu_name or 'unknown GPU'})", f"a plan that runs on {instance_type} ({gpu})",
                    f"build it on a {target_cc or 'GPU'} device or choose an instance family with compute capability "
                    f"{built_cc} ({families or 'none known'})")]
