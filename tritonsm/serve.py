"""`tritonsm serve` and `tritonsm invoke` on spec endpoints.

They resolve a spec endpoint into what the local endpoint needs (the tarballs of
the build manifest, the SAGEMAKER_TRITON_* environment the CDK app gives the
SageMaker model) and hand over to ``local_endpoint.cli``, which owns the server.
"""
from __future__ import annotations

import argparse
import dataclasses
import pathlib

from deployment_spec import Spec, load_spec
from deployment_spec.container_env import container_environment, endpoint_name
from deployment_spec.endpoint import EndpointKind, EndpointSpec
from deployment_spec.environment import RemovalPolicy
from deployment_spec.manifest import DEFAULT_MANIFEST, EndpointArtifacts, Manifest, ManifestError, load_manifest
from deployment_spec.parse import suggest
from tritonsm.cli import UserError


def register(add) -> None:
    serve = add("serve", "run a spec endpoint on the real Triton server, started as the SageMaker container "
                         "starts it, on the tarballs `tritonsm build` wrote", run_serve)
    serve.add_argument("endpoint", help="an endpoint name of the spec")
    _common(serve)
    serve.add_argument("--port", type=int, help="port to listen on (default: a free one)")
    serve.add_argument("--mme-capacity", type=int, help="multi-model: most models loaded at once (default: no limit)")
    serve.add_argument("--log-file", type=pathlib.Path, help="server log file (default: under the temp directory)")
    serve.add_argument("--startup-timeout", type=float, default=120.0, help="seconds to wait for readiness")
    # Spelled out here, not imported: importing local_endpoint would load numpy for every tritonsm command.
    serve.add_argument("--cpu-stand-in", action="store_true",
                       help="serve onnxruntime and pytorch models, which the local server lacks, as labelled "
                            "Python-backend stand-ins running ONNX Runtime / TorchScript on the CPU (latency not "
                            "representative), and KIND_GPU instance groups on the CPU; TensorRT plans cannot be stood in")

    invoke = add("invoke", "send one request to a local endpoint (--url) or a deployed one "
                           "(--endpoint with --deployed); other options as in `tritonsm invoke --url URL --help`",
                 run_invoke)
    invoke.add_argument("--endpoint", help="a spec endpoint: names the deployed endpoint and resolves --model")
    _common(invoke)
    invoke.add_argument("--deployed", action="store_true",
                        help="call the deployed SageMaker endpoint <project>-<environment>-<endpoint> through boto3")
    invoke.add_argument("--model", help="multi-model: a Triton model name of the endpoint, resolved to its "
                                        "current TargetModel (the content-versioned tarball name)")


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--environment", help="whose overrides apply (default: the spec's first environment)")
    parser.add_argument("--manifest", type=pathlib.Path, default=DEFAULT_MANIFEST,
                        help=f"build manifest (default: {DEFAULT_MANIFEST})")


@dataclasses.dataclass(frozen=True)
class LocalEndpoint:
    """A spec endpoint as the local endpoint serves it: built tarballs and the SageMaker container environment."""

    tarballs: tuple[pathlib.Path, ...]
    multi_model: bool
    default_model: str | None  # SME: SAGEMAKER_TRITON_DEFAULT_MODEL_NAME
    env: dict[str, str]
    manifest: Manifest
    triton_version: str  # the spec's release: the CPU stand-ins run its ONNX Runtime


def resolve_endpoint(spec_path: str | pathlib.Path, name: str, environment: str | None,
                     manifest_path: pathlib.Path) -> LocalEndpoint:
    """What `tritonsm serve <name>` serves; UserError (or SpecError) for anything the user must fix."""
    spec = load_spec(spec_path)
    env_name, endpoint = _endpoint(spec, name, environment)
    built = _built(manifest_path, endpoint.name, endpoint.models)
    multi = endpoint.kind is EndpointKind.MULTI_MODEL
    env = container_environment(endpoint.container, multi_model=multi, default_model=built.default_model,
                                verbose_default=spec.environments[env_name].removal_policy is RemovalPolicy.DESTROY)
    manifest = load_manifest(manifest_path)
    return LocalEndpoint(tuple(manifest.artifact_path(a) for a in built.artifacts), multi,
                         None if multi else built.default_model, env, manifest, spec.triton_version)


def run_serve(args: argparse.Namespace) -> int:
    local = resolve_endpoint(args.spec, args.endpoint, args.environment, args.manifest)
    argv = [str(tarball) for tarball in local.tarballs]
    argv += ["--mode", "mme" if local.multi_model else "sme", "--startup-timeout", str(args.startup_timeout)]
    if local.default_model:
        argv += ["--default-model", local.default_model]
    for key, value in local.env.items():
        argv += ["--env", f"{key}={value}"]
    if args.cpu_stand_in:
        argv += ["--cpu-stand-in", "--triton-version", local.triton_version]
    for flag, value in (("--port", args.port), ("--mme-capacity", args.mme_capacity), ("--log-file", args.log_file)):
        if value is not None:
            argv += [flag, str(value)]
    from local_endpoint.cli import serve_main
    return serve_main(argv)


def run_invoke(args: argparse.Namespace) -> int:
    rest = list(args.rest)
    if args.endpoint:
        spec = load_spec(args.spec)
        env_name, endpoint = _endpoint(spec, args.endpoint, args.environment)
        if args.deployed:
            rest += ["--endpoint-name", endpoint_name(spec.project, env_name, endpoint.name)]
            region = spec.environments[env_name].region
            if region and "--region" not in rest:
                rest += ["--region", region]
        if args.model:
            built = _built(args.manifest, endpoint.name, endpoint.models)
            rest += ["--target-model", _target_model(built, args.model)]
    elif args.deployed or args.model:
        raise UserError("--deployed and --model need --endpoint NAME (a spec endpoint)")
    from local_endpoint.cli import invoke_main
    return invoke_main(rest)


def _endpoint(spec: Spec, name: str, environment: str | None) -> tuple[str, EndpointSpec]:
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


def _built(manifest_path: pathlib.Path, endpoint: str, spec_models: tuple[str, ...] = ()) -> EndpointArtifacts:
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


def _target_model(built: EndpointArtifacts, model: str) -> str:
    for artifact in built.artifacts:
        if model in artifact.models or model == artifact.object_name:
            return artifact.object_name
    names = sorted(m for a in built.artifacts for m in a.models)
    raise UserError(f"--model {model!r} is not served by this endpoint (models: {', '.join(names)})")
