"""The local server for a spec endpoint (``deployment_spec.served.LocalEndpoint``), not yet started.

One place decides which local endpoint serves a spec endpoint, for `tritonsm serve --all` and
`tritonsm smoke --local`: inference components (one server per component behind a router), a
multi-model endpoint (SageMaker's model loading in front of Triton), a single-model one, or one with
variants or a shadow (one server per variant, routed by the local SageMaker Runtime).
"""
from __future__ import annotations

import pathlib
from typing import Any

from deployment_spec.sections.endpoint import EndpointKind
from deployment_spec.served import LocalEndpoint
from local_endpoint.endpoints.components import ComponentsEndpoint
from local_endpoint.endpoints.multi_model import MultiModelEndpoint
from local_endpoint.endpoints.single_model import DEFAULT_STARTUP_TIMEOUT, SingleModelEndpoint
from local_endpoint.variants.endpoint import VariantsEndpoint, for_spec_endpoint
from local_endpoint.variants.shadow import MAX_PENDING


def kind_of(local: LocalEndpoint) -> EndpointKind:
    if local.components:
        return EndpointKind.INFERENCE_COMPONENTS
    return EndpointKind.MULTI_MODEL if local.multi_model else EndpointKind.SINGLE_MODEL


Server = ComponentsEndpoint | MultiModelEndpoint | SingleModelEndpoint | VariantsEndpoint


def local_server(local: LocalEndpoint, *, cpu_stand_in: bool, mme_capacity: int | None = None,
                 startup_timeout: float = DEFAULT_STARTUP_TIMEOUT, endpoint_name: str = "",
                 capture_dir: pathlib.Path | None = None, shadow_queue_size: int = MAX_PENDING) -> Server:
    """The endpoint on the local Triton server, on a free port of its own. With variants or a shadow:
    ``endpoint_name`` (its EndpointName) and ``capture_dir`` say where the exchanges are captured (None: nowhere),
    ``shadow_queue_size`` how many copies may wait for the shadow's server."""
    if local.variants:
        return for_spec_endpoint(local, endpoint_name, capture_dir=capture_dir, cpu_stand_in=cpu_stand_in,
                                 startup_timeout=startup_timeout, shadow_queue_size=shadow_queue_size)
    kind = kind_of(local)
    if kind is EndpointKind.INFERENCE_COMPONENTS:
        return ComponentsEndpoint(local.components, startup_timeout=startup_timeout, cpu_stand_in=cpu_stand_in,
                                  triton_version=local.triton_version)
    if kind is EndpointKind.MULTI_MODEL:
        return MultiModelEndpoint(list(local.tarballs), env=local.env, capacity=mme_capacity,
                                  startup_timeout=startup_timeout, cpu_stand_in=cpu_stand_in,
                                  triton_version=local.triton_version)
    return SingleModelEndpoint(local.tarballs[0], default_model=local.default_model, env=local.env,
                               startup_timeout=startup_timeout, cpu_stand_in=cpu_stand_in,
                               triton_version=local.triton_version)


def describe(kind: EndpointKind, server: Any) -> str:
    """One line: what a started server (local, or in its image) serves and how a request names it."""
    if isinstance(server, VariantsEndpoint):
        return server.summary()
    if kind is EndpointKind.INFERENCE_COMPONENTS:
        return f"inference components (InferenceComponentName): {', '.join(server.component_names)}"
    if kind is EndpointKind.MULTI_MODEL:
        return f"multi-model (TargetModel): {', '.join(server.target_models)}"
    return f"single-model, default model {server.default_model}"
