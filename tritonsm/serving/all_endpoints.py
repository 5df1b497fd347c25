"""`tritonsm serve --all`: every endpoint of the spec behind one local SageMaker Runtime port.

An application with several endpoints sets one ``AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME`` and calls each
endpoint by the name it has when deployed (``<project>-<environment>-<endpoint>``).
"""
from __future__ import annotations

import argparse
import pathlib

from deployment_spec import load_spec
from deployment_spec.parsing.errors import UserError
from deployment_spec.sections.endpoint import EndpointSpec
from deployment_spec.served import resolve_endpoint, spec_endpoint
from deployment_spec.rules.variant_plan import build_for, served_by_variants
from tritonsm.serving.names import check_image_flags, deployed_name, runtime_name
from tritonsm.serving.shadow_queue import shadow_queue_size


def run_serve_all(args: argparse.Namespace) -> int:
    _check_flags(args)
    from local_endpoint.endpoints.spec_servers import describe, kind_of, local_server
    from local_endpoint.asynchronous import AsyncSetup
    from local_endpoint.errors import LocalEndpointError
    from local_endpoint.runtime.cli import serve_all
    from local_endpoint.runtime.local_runtime import Endpoint, NamedEndpoint

    named, skipped = [], {}
    spec = load_spec(args.spec)
    for name in spec.endpoints:
        not_built = _not_built(args.manifest, spec_endpoint(spec, name, args.environment)[1])
        if not_built:
            skipped[deployed_name(args, name)] = f"not built ({not_built}); run `tritonsm build` where it can be built"
            continue
        local = resolve_endpoint(args.spec, name, args.environment, args.manifest)
        from tritonsm.checks import signatures  # before any server starts: an archive that fails is never served
        signatures.check_before_serving(local.every_tarball, local.public_key, local.manifest, args.manifest)
        kind = kind_of(local)
        server: Endpoint
        if args.image and (local.components or local.variants):
            skipped[deployed_name(args, name)] = (
                "--image runs single-model and multi-model endpoints; serve this one on the local server (without "
                "--image)" if local.components else "--image runs one container per endpoint and this one has "
                "variants or a shadow (one server each); serve it on the local server (without --image)")
            continue
        endpoint_name, variant = runtime_name(args, local, name)
        if args.image:
            from local_endpoint.image.endpoints import for_spec_endpoint
            try:
                server = for_spec_endpoint(local, args.image, region=args.region, capacity=args.mme_capacity,
                                           startup_timeout=args.startup_timeout)
            except LocalEndpointError as error:
                raise UserError(str(error)) from None
        else:
            server = local_server(local, cpu_stand_in=args.cpu_stand_in, mme_capacity=args.mme_capacity,
                                  startup_timeout=args.startup_timeout or 120.0, endpoint_name=endpoint_name,
                                  capture_dir=args.capture_dir, shadow_queue_size=shadow_queue_size(args))
        named.append(NamedEndpoint(endpoint_name, kind, server, variant, AsyncSetup.of(local, name)))
    if not named:
        raise UserError("no endpoint of the spec has been built: " + "; ".join(
            f"{name}: {why}" for name, why in skipped.items()))
    from tritonsm.serving.restarts import restart_policy
    return serve_all(named, args.port, lambda endpoint: describe(endpoint.kind, endpoint.server), skipped,
                     restart_policy(args))


def _not_built(manifest_path: pathlib.Path, endpoint: EndpointSpec) -> str | None:
    """Why the build skipped endpoint ``name`` or the build of one of its variants (a TensorRT model without a GPU),
    if it did; a missing or broken manifest is left to ``resolve_endpoint``, which says how to fix it."""
    from deployment_spec.builds.manifest import ManifestError, load_manifest
    try:
        not_built = load_manifest(manifest_path).not_built
    except ManifestError:
        return None
    if f"endpoints.{endpoint.name}" in not_built:
        return not_built[f"endpoints.{endpoint.name}"]
    for variant, _, _ in served_by_variants(endpoint):
        why = not_built.get(f"endpoints.{build_for(endpoint, variant)}")
        if why:
            return f"variant {variant}: {why}"
    return None


def _check_flags(args: argparse.Namespace) -> None:
    if args.endpoint:
        raise UserError(f"--all serves every endpoint of the spec; leave out the endpoint name {args.endpoint!r}, "
                        "or drop --all to serve that endpoint alone")
    if args.component:
        raise UserError("--component applies to one endpoint of inference components; --all serves every component "
                        "of every endpoint: drop --component, or name that endpoint instead of --all")
    if args.log_file:
        raise UserError("--log-file applies to one endpoint; with --all each server logs to a file of its own under "
                        "the temp directory (the start-up lines name them): drop --log-file")
    check_image_flags(args)
