"""`tritonsm serve ENDPOINT` for a spec endpoint with variants or a shadow: every variant until Ctrl-C or SIGTERM.

The signals, the start-up and the stop are ``runtime.cli.serve_one``'s (every variant's server stops with it, and
dies with it: each is a ``SingleModelEndpoint``'s Triton process).
"""
from __future__ import annotations

import pathlib
from typing import Optional

from deployment_spec.sections.endpoint import EndpointKind
from deployment_spec.served import LocalEndpoint
from local_endpoint.endpoints.single_model import DEFAULT_STARTUP_TIMEOUT
from local_endpoint.runtime.cli import serve_one
from local_endpoint.runtime.local_runtime import NamedEndpoint
from local_endpoint.server.supervision import RestartPolicy
from local_endpoint.variants.endpoint import VariantsEndpoint, for_spec_endpoint
from local_endpoint.variants.shadow import MAX_PENDING


def serve_variants(local: LocalEndpoint, name: str, variant: str, *, port: Optional[int],
                   capture_dir: pathlib.Path, log_dir: Optional[pathlib.Path] = None,
                   startup_timeout: float = DEFAULT_STARTUP_TIMEOUT, cpu_stand_in: bool = False,
                   restarts: RestartPolicy = RestartPolicy(), shadow_queue_size: int = MAX_PENDING) -> int:
    """Serve ``local``'s variants as EndpointName ``name`` (``variant``: its own production variant's name); each
    variant's server is restarted on its own when it fails, within ``restarts``; ``shadow_queue_size`` copies may
    wait for the shadow's."""
    endpoint = for_spec_endpoint(local, name, capture_dir=capture_dir, cpu_stand_in=cpu_stand_in,
                                 startup_timeout=startup_timeout, log_dir=log_dir,
                                 shadow_queue_size=shadow_queue_size)
    named = NamedEndpoint(name, EndpointKind.SINGLE_MODEL, endpoint, variant)
    return serve_one(named, port, lambda url: announce(endpoint, url), restarts)


def announce(endpoint: VariantsEndpoint, url: str) -> None:
    print(f"serving endpoint {endpoint.endpoint_name} at {url}: {endpoint.summary()}", flush=True)
    for line in [*endpoint.notes(), *endpoint.stand_in_notes]:
        print(f"  {line}", flush=True)
    print("  TargetVariant (X-Amzn-SageMaker-Target-Variant) pins a production variant; the answer names the one "
          "that served it (x-Amzn-Invoked-Production-Variant)", flush=True)
