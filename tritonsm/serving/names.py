"""What `tritonsm serve ENDPOINT` and `tritonsm serve --all` share: the name an endpoint answers to, the flag rules."""
from __future__ import annotations

import argparse

from deployment_spec import load_spec
from deployment_spec.rules.container_env import endpoint_name
from deployment_spec.parsing.errors import UserError
from deployment_spec.served import LocalEndpoint, spec_endpoint


def runtime_name(args: argparse.Namespace, local: LocalEndpoint, name: str | None = None) -> tuple[str, str]:
    """(EndpointName, production variant) of spec endpoint ``name`` (default ``args.endpoint``) in
    ``args.environment``: what the local SageMaker Runtime answers to and reports as invoked."""
    # resolve_endpoint sets the spec endpoint; the constructs' default variant name otherwise.
    return deployed_name(args, name or args.endpoint), local.endpoint.variant_name if local.endpoint else "AllTraffic"


def deployed_name(args: argparse.Namespace, name: str) -> str:
    """The EndpointName of spec endpoint ``name`` in ``args.environment``."""
    spec = load_spec(args.spec)
    env_name, endpoint = spec_endpoint(spec, name, args.environment)
    return endpoint_name(spec.project, env_name, endpoint.name)


def check_image_flags(args: argparse.Namespace) -> None:
    if args.image and args.cpu_stand_in:
        raise UserError("--cpu-stand-in and --image exclude each other: the image runs every backend itself, "
                        "on the GPU; drop one of them")
