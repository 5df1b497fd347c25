"""A spec endpoint as the local endpoint serves it: its built tarballs and its container environment.

Shared by `tritonsm serve` / `tritonsm invoke` and the load benchmarks; standard library and the
spec loader only (no server code), so the command line stays light.
"""
from __future__ import annotations

import dataclasses
import pathlib

from deployment_spec.rules.component_endpoint import archive_default_model, component_name
from deployment_spec.rules.container_env import container_environment
from deployment_spec.sections.endpoint import EndpointKind, EndpointSpec
from deployment_spec.sections.environment import RemovalPolicy
from deployment_spec.parsing.errors import UserError
from deployment_spec.builds.manifest import Artifact, EndpointArtifacts, Manifest, ManifestError, load_manifest
from deployment_spec.parsing.parse import suggest
from deployment_spec.spec import Spec, load_spec
from deployment_spec.builds.spec_match import check_served
from deployment_spec.rules.variant_plan import build_for, own_builds, served_by_variants, weights_share


@dataclasses.dataclass(frozen=True)
class LocalComponent:
    """One inference component as the local endpoint serves it: its archive, run as a single-model container."""

    name: str                   # InferenceComponentName, as deployed in the chosen environment
    model: str                  # the model it serves
    tarball: pathlib.Path
    default_model: str | None   # SAGEMAKER_TRITON_DEFAULT_MODEL_NAME where the archive holds several models
    env: dict[str, str]


@dataclasses.dataclass(frozen=True)
class LocalVariant:
    """One variant of an endpoint with ``variants:`` or ``shadow:``, as the local endpoint serves it: its own
    single-model server on the archive of its build (``deployment_spec.rules.variant_plan.build_for``)."""

    name: str                   # VariantName (InvokedProductionVariant, TargetVariant)
    model: str                  # the spec model it serves
    build: str                  # its build manifest entry: the endpoint's, or <endpoint>.<variant>
    share: float                # a production variant's share of the traffic, 0-1; the shadow: 0
    shadow: bool
    tarball: pathlib.Path
    default_model: str | None   # SAGEMAKER_TRITON_DEFAULT_MODEL_NAME of its build
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
    # variants: or shadow: the production variants, then the shadow, each on a server of its own (none otherwise)
    variants: tuple[LocalVariant, ...] = ()
    public_key: pathlib.Path | None = None  # the spec's signing.public_key: what every tarball must be signed by

    @property
    def every_tarball(self) -> tuple[pathlib.Path, ...]:
        """Each archive a server of this endpoint loads: the endpoint's, its components', its variants' builds."""
        found = [*self.tarballs, *(c.tarball for c in self.components), *(v.tarball for v in self.variants)]
        return tuple(dict.fromkeys(found))


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
    tarballs = tuple(manifest.artifact_path(a) for a in built.artifacts)
    local = LocalEndpoint(tarballs, multi, None if multi else built.default_model, env, manifest,
                          spec.triton_version, endpoint, spec.environments[env_name].region, components,
                          public_key=spec.root / spec.signing.public_key if spec.signing.public_key else None)
    if endpoint.variants or endpoint.shadow is not None:
        disposable = spec.environments[env_name].removal_policy is RemovalPolicy.DESTROY
        local = dataclasses.replace(local, variants=_variants(local, endpoint, manifest_path, disposable))
    # Each build it serves holds the models the spec names now, built from their sources as they are now: synth's
    # rule (a shadow whose model changed since the build would otherwise answer with the old build).
    for build in (endpoint, *own_builds(endpoint).values()):
        check_served(build, spec.models, manifest, manifest_path, spec.root)
    return local


def _variants(local: LocalEndpoint, endpoint: EndpointSpec, manifest_path: pathlib.Path,
              disposable: bool) -> tuple[LocalVariant, ...]:
    """The production variants (beside a shadow: the endpoint's own model, as ``variant_name``), then the shadow."""
    shares = weights_share(endpoint)
    shadow = endpoint.shadow.name if endpoint.shadow is not None else None
    served = [(name, model, build_for(endpoint, name)) for name, model, _ in served_by_variants(endpoint)]
    if not endpoint.variants:
        served.insert(0, (endpoint.variant_name, local.default_model or endpoint.models[0], endpoint.name))
    out = []
    for name, model, build in served:
        if build == endpoint.name:
            tarball, default, env = local.tarballs[0], local.default_model, local.env
        else:
            built = _variant_build(local.manifest, manifest_path, endpoint.name, name, model, build)
            tarball, default = local.manifest.artifact_path(built.artifacts[0]), built.default_model
            env = container_environment(endpoint.container, multi_model=False, default_model=default,
                                        verbose_default=disposable, extra_args=endpoint.triton_args)
        out.append(LocalVariant(name, model, build, 0.0 if name == shadow else shares.get(name, 0.0),
                                name == shadow, tarball, default, env))
    return tuple(out)


def _variant_build(manifest: Manifest, manifest_path: pathlib.Path, endpoint: str, variant: str, model: str,
                   build: str) -> EndpointArtifacts:
    """The build of a variant serving a model of its own: `tritonsm build` writes it as ``<endpoint>.<variant>``."""
    if build not in manifest.endpoints:
        reason = manifest.not_built.get(f"endpoints.{build}")
        raise UserError(f"{manifest_path}: variant {variant!r} of endpoint {endpoint!r} (model {model}) has not been "
                        f"built: the manifest has no entry {build!r}"
                        + (f" ({reason}); run `tritonsm build` where it can be built" if reason else
                           "; run `tritonsm build` (it builds every variant's model)"))
    return built_artifacts(manifest_path, build, (model,))


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
