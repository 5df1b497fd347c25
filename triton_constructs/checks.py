"""Synth-time checks of a spec endpoint against the build manifest and the instance type.

Pure functions (no constructs): each collects every problem and raises one SynthError.
"""
from __future__ import annotations

import dataclasses
import pathlib
from typing import Mapping, Optional

from deployment_spec import instances
from deployment_spec import sagemaker_rules
from deployment_spec.container_env import endpoint_name as _joined_name
from deployment_spec.endpoint import EndpointKind, EndpointSpec
from deployment_spec.manifest import Artifact, Manifest, ModelEntry
from deployment_spec.model import Backend, HardwareCompatibility, ModelSpec
from deployment_spec.rules import served_models
from deployment_spec.errors import raise_problems
from triton_constructs.errors import raise_if

REBUILD = "run `tritonsm build`"


@dataclasses.dataclass(frozen=True)
class BuiltEndpoint:
    """What the build produced for one endpoint, checked against the spec.

    Attributes:
        artifacts: The tarballs (single-model: exactly one).
        default_model: Single-model endpoints whose tarball holds several model directories: the
            model ``/invocations`` serves (``SAGEMAKER_TRITON_DEFAULT_MODEL_NAME``); else None.
    """

    artifacts: tuple[Artifact, ...]
    default_model: Optional[str]


def endpoint_name(project: str, environment: str, endpoint: str) -> str:
    """The SageMaker endpoint name of a spec endpoint in one environment.

    Deterministic on purpose: the auto-rollback alarms must exist before the
    endpoint and carry its name as a dimension, and the execution role may
    only write the endpoint's own log group; a CloudFormation-generated name
    would make both circular.
    """
    # The spec loader already refuses invalid names; this guards specs built in code.
    name = _joined_name(project, environment, endpoint)
    raise_problems(f"endpoint '{endpoint}'", sagemaker_rules.endpoint_name_valid(
        name, "endpoint_name", f"the SageMaker endpoint name {name!r} (<project>-<environment>-<endpoint>)",
        "rename the endpoint (no '_') or shorten the project or environment name"))
    return name


def expected_models(endpoint: EndpointSpec, models: Mapping[str, ModelSpec]) -> list[str]:
    """The Triton model names an endpoint's artifacts must hold (MME copies and ensemble steps included)."""
    return [name for model in served_models(endpoint, models) for name in model.triton_names()]


def built_endpoint(endpoint: EndpointSpec, models: Mapping[str, ModelSpec], triton_version: str,
                   manifest: Manifest, manifest_path: pathlib.Path) -> BuiltEndpoint:
    """Checks that the manifest holds every artifact the endpoint needs, on disk, content-versioned.

    Raises:
        SynthError: listing every missing or stale artifact; each problem says to run `tritonsm build`.
    """
    subject = f"endpoint '{endpoint.name}'"
    if manifest.triton_version != triton_version:
        raise_if(subject, [f"{manifest_path} was built for Triton {manifest.triton_version}, the spec asks for "
                           f"{triton_version}; {REBUILD}"])
    built = manifest.endpoints.get(endpoint.name)
    if built is None:
        raise_if(subject, _not_built(endpoint, models, manifest, manifest_path))
    if built.kind != endpoint.kind.value:
        raise_if(subject, [f"{manifest_path} built it as {built.kind}, the spec says {endpoint.kind.value}; "
                           f"{REBUILD}"])
    problems = []
    single = endpoint.kind is EndpointKind.SINGLE_MODEL
    if single and len(built.artifacts) != 1:
        problems.append(f"{manifest_path} lists {len(built.artifacts)} tarballs for this single-model endpoint, "
                        f"which serves exactly one; {REBUILD}")
    packed = [name for artifact in built.artifacts for name in artifact.models]
    for triton_name in expected_models(endpoint, models):
        if triton_name not in packed:
            problems.append(f"model '{triton_name}' has no artifact in {manifest_path}; {REBUILD}")
    for artifact in built.artifacts:
        problems += _file_problems(artifact, manifest)
    problems += _verified_for(packed, manifest, triton_version)
    problems += _environments_for_image(packed, manifest)
    default_model = None
    if single and built.artifacts and len(built.artifacts[0].models) > 1:
        default_model = endpoint.default_model or endpoint.models[0]
        if built.default_model not in (None, default_model):
            problems.append(f"{manifest_path} serves '{built.default_model}' by default, the spec says "
                            f"'{default_model}'; {REBUILD}")
    raise_if(subject, problems)
    return BuiltEndpoint(built.artifacts, default_model)


def _not_built(endpoint: EndpointSpec, models: Mapping[str, ModelSpec], manifest: Manifest,
               manifest_path: pathlib.Path) -> list[str]:
    """Why the build left the endpoint out, per model, and the ways forward."""
    reasons = [(m.name, manifest.not_built[f"models.{m.name}"]) for m in served_models(endpoint, models)
               if f"models.{m.name}" in manifest.not_built]
    if not reasons:
        return [f"{manifest_path} has no artifacts for this endpoint; {REBUILD}"]
    out = [f"model '{name}' was not built: {why.removeprefix(f'model {name}: ')}" for name, why in reasons]
    elsewhere = [name for name, _ in reasons if name in manifest.unavailable_here]
    if elsewhere:
        way = (f"build {', '.join(elsewhere)} where it can be built (a TensorRT plan: a host with a Docker engine and "
               f"the GPU of {endpoint.instance_type}) with `tritonsm build --require-all`, then synthesize with that "
               "build's manifest: `cdk synth -c manifest=PATH`")
    else:
        way = f"fix the error above and {REBUILD}"
    built = [name for name in manifest.endpoints if name != endpoint.name]
    if built:
        way += f"; or synthesize only the built endpoints: `cdk synth -c endpoints={','.join(built)}`"
    return out + [way]


def _verified_for(models: list[str], manifest: Manifest, triton_version: str) -> list[str]:
    """Each model must have been checked for the runtimes of the Triton release the spec names."""
    out = []
    for name in models:
        entry = manifest.models.get(name)
        checked = entry.serving_check.get("triton_version") if entry else None
        if entry is not None and checked != triton_version:
            what = (f"verified in the runtimes of Triton {checked}" if checked
                    else "not verified in any serving runtime (an older build)")
            out.append(f"model '{name}' was {what}, the spec serves it with Triton {triton_version}; {REBUILD}")
    return out


def _environments_for_image(models: list[str], manifest: Manifest) -> list[str]:
    """A Python environment built for the local endpoint's Python would not load in the image."""
    out = []
    for name in models:
        entry = manifest.models.get(name)
        env = entry.python_env if entry else None
        if env and env.get("for") == "local":
            out.append(f"model '{name}' carries a Python execution environment built for {env.get('target')}, "
                       "not for the endpoint's image (`tritonsm build --python-env-for local`); run "
                       "`tritonsm build` without that option")
    return out


def _file_problems(artifact: Artifact, manifest: Manifest) -> list[str]:
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


def instance_problems(endpoint: EndpointSpec) -> list[str]:
    """What SageMaker rejects about the endpoint's instance type for its kind."""
    itype = instances.lookup(endpoint.instance_type)
    if itype is None:
        return [f"instance type {endpoint.instance_type!r} is unknown here (families: {instances.known_families()})"]
    if endpoint.kind is not EndpointKind.MULTI_MODEL:
        return []
    supported = ", ".join(f"ml.{name}" for name, fam in instances.FAMILIES.items() if fam.mme)
    if not itype.family.mme:
        return [f"{endpoint.instance_type} cannot host a multi-model endpoint; supported families: {supported}"]
    if itype.gpu_count > 1:
        return [f"{endpoint.instance_type} has {itype.gpu_count} GPUs; GPU multi-model endpoints run on "
                "single-GPU instance types only (e.g. ml.g5.2xlarge)"]
    return []


def plan_problems(endpoint: EndpointSpec, built: BuiltEndpoint, manifest: Manifest,
                  models: Mapping[str, ModelSpec]) -> list[str]:
    """TensorRT plans run only on the compute capability they were built for (https://developer.nvidia.com/cuda-gpus and the EC2 accelerated-computing instance documentation)."""
    itype = instances.lookup(endpoint.instance_type)
    if itype is None:
        return []
    out = []
    for triton_name in [name for artifact in built.artifacts for name in artifact.models]:
        entry: Optional[ModelEntry] = manifest.models.get(triton_name)
        if entry is None or entry.backend != Backend.TENSORRT.value:
            continue
        built_cc = entry.builder.gpu_compute_capability
        if built_cc is None:
            out.append(f"model '{triton_name}' is a TensorRT plan without a recorded GPU compute capability; "
                       f"{REBUILD} on the target GPU")
            continue
        spec = models.get(entry.spec_model)
        mode = spec.tensorrt.hardware_compatibility if spec and spec.tensorrt else HardwareCompatibility.NONE
        target_cc = itype.family.compute_capability
        if target_cc is not None and mode.plan_runs(built_cc, target_cc):
            continue
        gpu = f"{itype.family.gpu}, compute capability {target_cc}" if target_cc else "no GPU"
        out.append(f"model '{triton_name}' is a TensorRT plan built for compute capability {built_cc} "
                   f"({entry.builder.gpu_name or 'unknown GPU'}); {endpoint.instance_type} has {gpu}. "
                   f"Build it on a {target_cc or 'GPU'} device or choose an instance family with compute "
                   f"capability {built_cc} ({_families_with(built_cc)})")
    return out


def _families_with(cc: str) -> str:
    names = [f"ml.{name}" for name, fam in instances.FAMILIES.items() if fam.compute_capability == cc]
    return ", ".join(names) or "none known"
