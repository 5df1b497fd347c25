"""A spec endpoint as the local endpoint serves it: its built tarballs and its container environment.

Shared by `tritonsm serve` / `tritonsm invoke` and the load benchmarks; standard library and the
spec loader only (no server code), so the command line stays light.
"""
from __future__ import annotations

import dataclasses
import pathlib

from deployment_spec.component_endpoint import archive_default_model, component_name
from deployment_spec.container_env import container_environment
from deployment_spec.endpoint import EndpointKind, EndpointSpec
from deployment_spec.environment import RemovalPolicy
from deployment_spec.errors import UserError
from deployment_spec.manifest import Artifact, EndpointArtifacts, Manifest, ManifestError, load_manifest
from deployment_spec.parse import suggest
from deployment_spec.spec import Spec, load_spec


@dataclasses.dataclass(frozen=True)
class LocalComponent:
    """One inference component as the local endpoint serves it: its archive, run as a single-model container."""

    name: str                   # InferenceComponentName, as deployed in the chosen environment
    model: str                  # the model it serves
    tarball: pathlib.Path
    default_model: str | None   # SAGEMAKER_TRITON_DEFAULT_MODEL_NAME where the archive holds several models
    env: dict[str, str]


@dataclasses.dataclass(frozen=True)
class LocalEndpoint:
    """A spec endpoint as the local endpoint serves it: built tarballs and the SageMaker container environment."""

    tarballs: tuple[pathlib.Path, ...]
    multi_model: bool
    default_model: str | None  # SME: SAGEMAKER_TRITON_DEFAULT_MODEL_NAME
    env: dict[str, str]
    manifest: Manifest
    triton_version: str  # the spec's release: the CPU stand-ins run its ONNX Runtime
    endpoint: EndpointSpec | None = None  # the spec's endpoint (instance type, start-up timeout), for `--image`
    region: str | None = None             # the environment's region, if the spec names one
    components: tuple[LocalComponent, ...] = ()  # kind: inference-components: one container per component


def resolve_endpoint(spec_path: str | pathlib.Path, name: str, environment: str | None,
                     manifest_path: pathlib.Path) -> LocalEndpoint:
    """What `tritonsm serve <name>` serves; UserError (or SpecError) for anything the user must fix."""
    spec = load_spec(spec_path)
    env_name, endpoint = spec_endpoint(spec, name, environment)
    built = built_artifacts(manifest_path, endpoint.name, endpoint.models)
    multi = endpoint.kind is EndpointKind.MULTI_MODEL
    env = container_environment(endpoint.container, multi_model=multi, default_model=built.default_model,
                                verbose_default=spec.environments[env_name].removal_policy is RemovalPolicy.DESTROY,
                                extra_args=endpoint.triton_args)
    manifest = load_manifest(manifest_path)
    components: tuple[LocalComponent, ...] = ()
    if endpoint.kind is EndpointKind.INFERENCE_COMPONENTS:
        disposable = spec.environments[env_name].removal_policy is RemovalPolicy.DESTROY
        components = tuple(_component(spec.project, env_name, endpoint, artifact, manifest, disposable)
                           for artifact in built.artifacts)
    return LocalEndpoint(tuple(manifest.artifact_path(a) for a in built.artifacts), multi,
                         None if multi else built.default_model, env, manifest, spec.triton_version,
                         endpoint, spec.environments[env_name].region, components)


def _component(project: str, env_name: str, endpoint: EndpointSpec, artifact: Artifact, manifest: Manifest,
               disposable: bool) -> LocalComponent:
    """The archive's first model is the component's model (model_build.packaging); its steps follow it."""
    model, default = artifact.models[0], archive_default_model(artifact.models)
    return LocalComponent(component_name(project, env_name, endpoint.name, model), model,
                          manifest.artifact_path(artifact), default,
                          container_environment(endpoint.container, multi_model=False, default_model=default,
                                                verbose_default=disposable))


def spec_endpoint(spec: Spec, name: str, environment: str | None) -> tuple[str, EndpointSpec]:
    env_name = environment or next(iter(spec.environments))
    if env_name not in spec.environments:
        raise UserError(f"--environment {env_name!r} is not in {spec.path.name} "
                        f"(environments: {', '.join(spec.environments)})")
    endpoints = spec.environments[env_name].endpoints
    if name not in endpoints:
        near = suggest(name, endpoints)
        hint = f"; did you mean '{near}'?" if near else ""
        raise UserError(f"endpoint {name!r} is not in {spec.path.name} (endpoints: {', '.join(endpoints)}){hint}")
    return env_name, endpoints[name]


def built_artifacts(manifest_path: pathlib.Path, endpoint: str, spec_models: tuple[str, ...] = ()) -> EndpointArtifacts:
    try:
        manifest = load_manifest(manifest_path)
    except ManifestError as exc:
        raise UserError(str(exc)) from None
    if endpoint not in manifest.endpoints:
        # The build records why it skipped an endpoint (e.g. a TensorRT model on a machine without a GPU).
        reason = manifest.not_built.get(f"endpoints.{endpoint}")
        if reason:
            details = [why for key, why in sorted(manifest.not_built.items())
                       if key.removeprefix("models.") in spec_models]
            raise UserError(f"{manifest_path}: endpoint {endpoint!r} has not been built ({reason})"
                            + "".join(f": {why}" for why in details)
                            + "; run `tritonsm build` where the models can be built")
        raise UserError(f"{manifest_path}: endpoint {endpoint!r} has not been built; run `tritonsm build`")
    built = manifest.endpoints[endpoint]
    missing = [a.file for a in built.artifacts if not manifest.artifact_path(a).exists()]
    if missing:
        raise UserError(f"{manifest_path}: {', '.join(missing)} listed but missing on disk; run `tritonsm build`")
    return built
