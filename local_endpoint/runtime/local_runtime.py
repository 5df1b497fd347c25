"""A local SageMaker Runtime: local endpoints behind one port, each addressed by its EndpointName.

An application calls a deployed endpoint through ``boto3.client("sagemaker-runtime").invoke_endpoint``;
pointed at this runtime (``endpoint_url=``, or ``AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME``, botocore's
service-specific endpoint variable), the same code reaches the local endpoints, each under the name
it has when deployed. Every endpoint starts on a free port of its own (its container contract), then the
front (``runtime_front``) on ``port``, bound to 127.0.0.1. Stopping goes front first, then each
endpoint, so nothing is sent to a server that is going away.

Asynchronous endpoints (``NamedEndpoint.asynchronous``) also answer InvokeEndpointAsync: their queues and the
local S3/SNS/SQS server (``local_endpoint.asynchronous``) start once the endpoints run and stop before them.
"""
from __future__ import annotations

import dataclasses
from typing import Iterable, Optional, Protocol, Sequence

from deployment_spec.sections.endpoint import EndpointKind
from local_endpoint.asynchronous import AsyncService, AsyncSetup
from local_endpoint.asynchronous.processing import Container
from local_endpoint.endpoints.lifecycle import LocalEndpointLifecycle, Server
from local_endpoint.endpoints.mme_front_door import FrontDoor
from local_endpoint.errors import UnsupportedBackendError
from local_endpoint.runtime.front import RuntimeHandler
from local_endpoint.runtime.routes import INVOKE_TIMEOUT, RuntimeTarget
from local_endpoint.server import ports
from local_endpoint.server.supervision import RestartPolicy

DEFAULT_VARIANT = "AllTraffic"   # the project's constructs' default variant name


class Endpoint(Server, Protocol):
    """A local endpoint (single-model, multi-model, inference components, or in its image), not started."""

    port: Optional[int]

    @property
    def log_path(self) -> object: ...  # its server log(s), once started

    @property
    def stand_in_notes(self) -> list[str]: ...  # one line per model served by a CPU stand-in

    def start(self) -> object: ...


@dataclasses.dataclass(frozen=True)
class NamedEndpoint:
    """One endpoint of the runtime: its EndpointName, kind and production variant, and the server itself;
    ``asynchronous``: what makes it an asynchronous endpoint (it then answers InvokeEndpointAsync only)."""

    name: str
    kind: EndpointKind
    server: Endpoint
    variant: str = DEFAULT_VARIANT
    asynchronous: Optional[AsyncSetup] = None


class LocalRuntime(LocalEndpointLifecycle):
    """Start ``endpoints`` and answer InvokeEndpoint for each of them on one port.

    Use as a context manager; every server stops on exit.

    Args:
        endpoints: The endpoints, uniquely named, none started and none given a port.
        port: The runtime's port. Defaults to a free port.
        invoke_timeout: Seconds a container may take to answer (InvokeEndpoint's 60 by default).
        container_contract: With one endpoint: also pass every other request (``/ping``, ``/invocations``)
            on to it, so the port serves both APIs. Defaults to no.
        skip_unsupported: Leave out an endpoint whose models the local server cannot run (a TensorRT plan),
            recording why in ``skipped``, instead of failing; at least one must run. Defaults to no.
    """

    def __init__(self, endpoints: Sequence[NamedEndpoint], *, port: Optional[int] = None,
                 invoke_timeout: float = INVOKE_TIMEOUT, container_contract: bool = False,
                 skip_unsupported: bool = False) -> None:
        names = [e.name for e in endpoints]
        if not endpoints or len(set(names)) != len(names):
            raise ValueError(f"a local runtime needs one or more uniquely named endpoints; got {names}")
        if container_contract and len(endpoints) != 1:
            raise ValueError("container_contract passes requests on to one endpoint; got several")
        self.endpoints = list(endpoints)
        self.invoke_timeout = invoke_timeout
        self.targets: dict[str, RuntimeTarget] = {}
        self._container_contract = container_contract
        self._skip_unsupported = skip_unsupported
        self.skipped: dict[str, str] = {}   # EndpointName: why the local server cannot run it
        self.asynchronous: Optional[AsyncService] = None   # the asynchronous endpoints' queues and local S3/SNS/SQS
        self._requested_port = port
        self.port: Optional[int] = None

    @property
    def passthrough(self) -> Optional[RuntimeTarget]:
        """The endpoint that takes the container-contract requests, if any."""
        return next(iter(self.targets.values())) if self._container_contract and self.targets else None

    @property
    def aws_environment(self) -> str:
        """The line that points boto3, the AWS CLI and the SageMaker SDK here (botocore's service-specific
        endpoint variable for the service id "SageMaker Runtime")."""
        return f"AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME={self.url}"

    def start(self) -> LocalRuntime:
        self.port = ports.claim(self._requested_port)
        try:
            for endpoint in self.endpoints:
                try:
                    endpoint.server.start()
                except UnsupportedBackendError as error:
                    if not self._skip_unsupported:
                        raise
                    self.skipped[endpoint.name] = str(error)   # refused before any server started
                    continue
                self.targets[endpoint.name] = _target(endpoint)
            if not self.targets:
                raise UnsupportedBackendError("the local server can run none of the endpoints: " + "; ".join(
                    f"{name}: {why}" for name, why in self.skipped.items()))
            self._start_asynchronous()
            logs = ", ".join(target.log for target in self.targets.values())
            self._front_door = FrontDoor(self.port, self, logs, handler=RuntimeHandler)  # type: ignore[arg-type]
            self._front_door.start_in_background()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_asynchronous(self) -> None:
        queued = {e.name: (e.asynchronous, Container(self.targets[e.name], e.server.check_running))
                  for e in self.endpoints if e.asynchronous is not None and e.name in self.targets}
        if queued:
            self.asynchronous = AsyncService(queued).start()

    def supervise(self, policy: RestartPolicy, label: str = "") -> None:
        """Each endpoint's servers, restarted when they fail (``LocalEndpointLifecycle.supervise``), each told under
        its EndpointName; the local S3/SNS/SQS server is only checked: it holds the asynchronous answers in its
        memory, and a new one would have none of them."""
        if self.asynchronous is not None:
            self.asynchronous.check_running()
        for endpoint in self.endpoints:
            supervise = getattr(endpoint.server, "supervise", None)
            if supervise is None:
                endpoint.server.check_running()
            else:
                supervise(policy, f"endpoint {endpoint.name}")

    def _servers(self) -> Iterable[Server]:
        return [*([self.asynchronous] if self.asynchronous else []), *(e.server for e in self.endpoints)]

    def _stop_groups(self) -> list[list[Server]]:
        # The queues first: what they still hold gets its failure object while the endpoints and S3 still run.
        return [[self.asynchronous] if self.asynchronous else [], [e.server for e in self.endpoints]]


def _target(endpoint: NamedEndpoint) -> RuntimeTarget:
    server = endpoint.server
    if server.port is None:
        raise RuntimeError(f"endpoint {endpoint.name} has no port after start()")  # a programming error
    cache = getattr(server, "cache", None)
    return RuntimeTarget(
        endpoint.name, endpoint.kind, server.port, endpoint.variant,
        target_models=tuple(getattr(server, "target_models", ())) if endpoint.kind is EndpointKind.MULTI_MODEL else (),
        components=tuple(getattr(server, "component_names", ())),
        loaded=cache.loaded_models if cache is not None else None, log=str(server.log_path or ""),
        generate=getattr(server, "generate_route", None),   # a decoupled model (single-model endpoint)
        component_routes=dict(getattr(server, "generate_routes", {})),   # inference components that stream
        component_logs=dict(getattr(server, "component_logs", {})),
        traffic=getattr(server, "traffic", None),   # an endpoint with variants or a shadow (local_endpoint.variants)
        health=server if isinstance(server, LocalEndpointLifecycle) else None)   # supervised by `tritonsm serve`
