"""Synth-time checks of a spec endpoint against the build manifest: did the build make what the spec serves?

Pure functions (no constructs): each collects every problem and raises one SynthError. What SageMaker
would refuse about serving the archives is checked by ``TritonSageMakerEndpoint``.
"""
from __future__ import annotations

import dataclasses
import pathlib
from typing import Mapping, Optional

from deployment_spec.builds.spec_match import REBUILD, build_problems, subject as built_subject
from deployment_spec.rules import sagemaker as sagemaker_rules
from deployment_spec.rules.container_env import endpoint_name as _joined_name
from deployment_spec.sections.endpoint import EndpointKind, EndpointSpec
from deployment_spec.parsing.errors import raise_problems
from deployment_spec.builds.manifest import Artifact, Manifest
from deployment_spec.sections.model import ModelSpec
from deployment_spec.rules.cross_section import served_models
from deployment_spec.sections.variants import BUILD_SEPARATOR
from triton_constructs.errors import SynthError
from triton_constructs.model_repositories import artifact_file_problems


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


def built_endpoint(endpoint: EndpointSpec, models: Mapping[str, ModelSpec], triton_version: str,
                   manifest: Manifest, manifest_path: pathlib.Path, *, spec_root: pathlib.Path) -> BuiltEndpoint:
    """Checks that the manifest holds every artifact the endpoint needs, on disk, content-versioned, built from the
    sources the spec names now (``spec_root``: the spec's folder, which its paths are relative to).

    Raises:
        SynthError: listing every missing or stale artifact or model; each problem says to run `tritonsm build`.
    """
    subject = built_subject(endpoint.name)
    if manifest.triton_version != triton_version:
        raise SynthError(subject, [f"{manifest_path} was built for Triton {manifest.triton_version}, the spec asks "
                                   f"for {triton_version}; {REBUILD}"])
    built = manifest.endpoints.get(endpoint.name)
    if built is None:
        raise SynthError(subject, _not_built(endpoint, models, manifest, manifest_path))
    if built.kind != endpoint.kind.value:
        raise SynthError(subject, [f"{manifest_path} built it as {built.kind}, the spec says {endpoint.kind.value}; "
                                   f"{REBUILD}"])
    problems = []
    single = endpoint.kind is EndpointKind.SINGLE_MODEL
    if single and len(built.artifacts) != 1:
        problems.append(f"{manifest_path} lists {len(built.artifacts)} tarballs for this single-model endpoint, "
                        f"which serves exactly one; {REBUILD}")
    # The models the spec serves there, built from what it names now: the rule `tritonsm serve` applies too.
    problems += build_problems(endpoint, models, manifest, manifest_path, spec_root)
    for artifact in built.artifacts:
        problems += artifact_file_problems(artifact, manifest)
    default_model = None
    if single and built.artifacts and len(built.artifacts[0].models) > 1:
        default_model = endpoint.default_model or endpoint.models[0]
        if built.default_model not in (None, default_model):
            problems.append(f"{manifest_path} serves '{built.default_model}' by default, the spec says "
                            f"'{default_model}'; {REBUILD}")
    if problems:
        raise SynthError(subject, problems)
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
    # `-c endpoints=` takes endpoint names: a variant's own build (<endpoint>.<variant>) is synthesized with its
    # endpoint, so an endpoint is offered only where none of its builds was left out.
    def endpoint_of(build: str) -> str:
        return build.removeprefix("endpoints.").split(BUILD_SEPARATOR, 1)[0]

    left_out = {endpoint_of(key) for key in manifest.not_built if key.startswith("endpoints.")}
    left_out.add(endpoint_of(endpoint.name))
    built = [name for name in dict.fromkeys(map(endpoint_of, manifest.endpoints)) if name not in left_out]
    if built:
        way += f"; or synthesize only the built endpoints: `cdk synth -c endpoints={','.join(built)}`"
    return out + [way]
