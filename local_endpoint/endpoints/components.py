"""A local endpoint of inference components: one container per component behind one port.

On SageMaker each copy of a component is its own model container, started as a single-model endpoint's
container is (the SageMaker Triton image without ``SAGEMAKER_MULTI_MODEL``, its own archive under
/opt/ml/model, ``SAGEMAKER_TRITON_DEFAULT_MODEL_NAME`` where the archive holds an ensemble and its steps), and
the runtime sends each request to a copy of the component named by ``InferenceComponentName``, the header
``X-Amzn-SageMaker-Inference-Component`` (botocore's sagemaker-runtime model). Locally: one
``SingleModelEndpoint`` per component (one copy each; reservations and copy placement are SageMaker's and
are not emulated) on a private port, and a front door on ``port`` that routes by that header.
"""
from __future__ import annotations

import json
import pathlib
from typing import Protocol, Sequence

from deployment_spec.facts.serving_runtimes import DEFAULT_TRITON_VERSION
from local_endpoint.client.http_call import HttpReply, call
from local_endpoint.client.invoke import INFERENCE_COMPONENT_HEADER
from local_endpoint.endpoints.lifecycle import LocalEndpointLifecycle
from local_endpoint.endpoints.mme_front_door import FrontDoor, FrontDoorHandler
from local_endpoint.endpoints.model_cache import JSON, error_reply
from local_endpoint.endpoints.single_model import DEFAULT_STARTUP_TIMEOUT, SingleModelEndpoint
from local_endpoint.errors import LocalEndpointError
from local_endpoint.server import ports
from local_endpoint.server.generate_route import GenerateRoute


class Component(Protocol):
    """What the local endpoint needs of a component (``deployment_spec.served.LocalComponent``, frozen: read-only)."""

    @property
    def name(self) -> str: ...

    @property
    def tarball(self) -> pathlib.Path: ...

    @property
    def default_model(self) -> str | None: ...

    @property
    def env(self) -> dict[str, str]: ...


class ComponentsEndpoint(LocalEndpointLifecycle):
    """The real Triton server once per component, behind SageMaker's inference-component routing.

    Use as a context manager; every server stops on exit.

    Args:
        components: The components to serve, at least one; each is addressed by its ``name``.
        port: The front door's port. Defaults to a free port.
        log_dir: Where the servers' logs go, one file per component. Defaults to the temp directory.
        startup_timeout: Seconds to wait for each server's readiness.
        cpu_stand_in: Serve onnxruntime and pytorch models as labelled CPU stand-ins (``SingleModelEndpoint``).
        triton_version: The image's release (the stand-ins run its ONNX Runtime).
    """

    def __init__(self, components: Sequence[Component], *, port: int | None = None,
                 log_dir: pathlib.Path | None = None, startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
                 cpu_stand_in: bool = False, triton_version: str = DEFAULT_TRITON_VERSION) -> None:
        names = [c.name for c in components]
        if not components or len(set(names)) != len(names):
            raise LocalEndpointError(f"an endpoint of inference components needs one or more uniquely named "
                                     f"components; got {', '.join(names) or 'none'}")
        self._requested_port = port
        self.port: int | None = None
        self.servers = {c.name: SingleModelEndpoint(
            c.tarball, default_model=c.default_model, env=c.env,
            log_file=log_dir / f"triton-{c.name}.log" if log_dir else None, startup_timeout=startup_timeout,
            cpu_stand_in=cpu_stand_in, triton_version=triton_version) for c in components}
        for name, server in self.servers.items():   # whose server failed, in a restart's messages
            server.server_name = f"the Triton server of component {name}"

    @property
    def component_names(self) -> list[str]:
        return list(self.servers)

    @property
    def generate_routes(self) -> dict[str, GenerateRoute]:
        """The generate-stream route of each component whose default model is decoupled (open once started)."""
        routes = {name: server.generate_route for name, server in self.servers.items()}
        return {name: route for name, route in routes.items() if route is not None}

    @property
    def stand_in_notes(self) -> list[str]:
        return [f"{name}: {note}" for name, server in self.servers.items() for note in server.stand_in_notes]

    @property
    def log_path(self) -> str:
        return ", ".join(self.component_logs.values())

    @property
    def component_logs(self) -> dict[str, str]:
        """Each component's server log (once started), by component name: a failed request names its own."""
        return {name: str(s.log_path) for name, s in self.servers.items() if s.log_path}

    def start(self) -> ComponentsEndpoint:
        """Start every component's server (one at a time: each loads its models), then the front door."""
        self.port = ports.claim(self._requested_port)
        try:
            for server in self.servers.values():
                server.start()
            self._front_door = FrontDoor(self.port, self, self.log_path, handler=ComponentsHandler)  # type: ignore[arg-type]
            self._front_door.start_in_background()
        except BaseException:
            self.stop()
            raise
        return self

    def _servers(self) -> list[SingleModelEndpoint]:
        return list(self.servers.values())

    def route(self, name: str | None, body: bytes, content_type: str) -> HttpReply:
        """One request to the named component's server, as SageMaker's runtime forwards it."""
        if not name or name not in self.servers:
            got = f"{name!r} is not one of its components" if name else "no component named"
            return error_reply(400, f"this endpoint hosts inference components and {got}: name one with the "
                                    f"{INFERENCE_COMPONENT_HEADER} header (InferenceComponentName in InvokeEndpoint, "
                                    f"--inference-component in tritonsm invoke): {', '.join(self.servers)}")
        server = self.servers[name]
        return call("127.0.0.1", server.port, "POST", "/invocations", body=body,
                    headers={"Content-Type": content_type})

    def ping(self) -> HttpReply:
        """200 when every component's server is ready (SageMaker serves an endpoint once its copies are)."""
        states = {name: call("127.0.0.1", s.port, "GET", "/ping", timeout=5).status for name, s in self.servers.items()}
        status = 200 if all(code == 200 for code in states.values()) else 503
        return HttpReply(status, JSON, json.dumps({"components": states}).encode())


class ComponentsHandler(FrontDoorHandler):
    """`POST /invocations` routed by the inference-component header; `GET /ping` for all components."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        components: ComponentsEndpoint = self.server.cache  # type: ignore[assignment]
        if self.path == "/ping":
            self._relay(components.ping)
        else:
            self._send(error_reply(404, f"no route GET {self.path}; this endpoint serves /ping and /invocations"))

    def do_POST(self) -> None:  # noqa: N802
        components: ComponentsEndpoint = self.server.cache  # type: ignore[assignment]
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path != "/invocations":
            self._send(error_reply(404, f"no route POST {self.path}; send requests to /invocations"))
            return
        name, content_type = self.headers.get(INFERENCE_COMPONENT_HEADER), self.headers.get("Content-Type", "")
        self._relay(lambda: components.route(name, body, content_type))
