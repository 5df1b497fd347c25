"""The HTTP handler of the local SageMaker Runtime: InvokeEndpoint, and the container contract passed on.

``POST /endpoints/{EndpointName}/invocations`` is InvokeEndpoint (``runtime_routes``);
``POST /endpoints/{EndpointName}/invocations-response-stream`` is InvokeEndpointWithResponseStream (``streaming``),
written out with chunked transfer encoding one event at a time;
``POST /endpoints/{EndpointName}/async-invocations`` is InvokeEndpointAsync, for the asynchronous endpoints
(``local_endpoint.asynchronous``), which refuse InvokeEndpoint as SageMaker does. In front of one
endpoint (``tritonsm serve ENDPOINT``) every other request (``GET /ping``, ``POST /invocations``, an MME's
``GET /models``) goes on unchanged to that endpoint, so the port also keeps the container contract that
``curl`` and Triton's own clients speak. ``GET /endpoints`` lists the endpoint names (a local
convenience: ``tritonsm invoke --url`` asks it which name to call). The server is
``mme_front_door.FrontDoor``: threaded, bound to 127.0.0.1 only.
"""
from __future__ import annotations

import json
from typing import Mapping, Optional, Protocol

from local_endpoint.asynchronous import AsyncService
from local_endpoint.asynchronous.route import ASYNC_SUFFIX, invoke_async, realtime_refusal
from local_endpoint.client.http_call import HttpReply, call
from local_endpoint.endpoints.mme_front_door import FrontDoorHandler
from local_endpoint.endpoints.model_cache import JSON, error_reply
from local_endpoint.runtime.errors import RuntimeReply
from local_endpoint.runtime.routes import FORWARDED, RuntimeTarget, endpoint_in_path, invoke
from local_endpoint.runtime.streaming import STREAM_SUFFIX, UpstreamStream, open_stream, watch_for_hang_up

PING_TIMEOUT = 5.0


class Runtime(Protocol):
    """What the handler reads (``local_runtime.LocalRuntime``)."""

    targets: Mapping[str, RuntimeTarget]
    invoke_timeout: float
    asynchronous: Optional[AsyncService]

    @property
    def passthrough(self) -> Optional[RuntimeTarget]: ...


class RuntimeHandler(FrontDoorHandler):
    @property
    def runtime(self) -> Runtime:
        return self.server.cache  # type: ignore[return-value]  # FrontDoor holds what its handler serves

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = dict(self.headers.items())
        queues = self.runtime.asynchronous.queues if self.runtime.asynchronous else {}
        name = endpoint_in_path(self.path)
        asynchronous_name = endpoint_in_path(self.path, ASYNC_SUFFIX)
        streaming_name = endpoint_in_path(self.path, STREAM_SUFFIX)
        if streaming_name is not None:
            refusal = realtime_refusal(queues, streaming_name)
            stream = refusal or open_stream(self.runtime.targets, streaming_name, headers, body,
                                            self.runtime.invoke_timeout)
            if isinstance(stream, UpstreamStream):
                self._send_stream(stream)
            else:
                self._send_runtime(stream)
        elif asynchronous_name is not None:
            self._send_runtime(invoke_async(queues, self.runtime.targets, asynchronous_name, headers, body))
        elif name is not None:
            self._send_runtime(realtime_refusal(queues, name) or invoke(self.runtime.targets, name, headers, body,
                                                                        self.runtime.invoke_timeout))
        else:
            self._pass_on("POST", body)

    def do_GET(self) -> None:  # noqa: N802
        if self.path == "/endpoints":
            names = sorted(self.runtime.targets)
            self._send(HttpReply(200, JSON, json.dumps({"endpoints": names}).encode()))
        elif self.path == "/ping" and self.runtime.passthrough is None:
            self._relay(self._ping_all)
        else:
            self._pass_on("GET", None)

    def _pass_on(self, method: str, body: Optional[bytes]) -> None:
        target = self.runtime.passthrough
        if target is None:
            self._send(error_reply(404, f"no route {method} {self.path}; this local SageMaker Runtime serves "
                                        "POST /endpoints/{EndpointName}/invocations (InvokeEndpoint), "
                                        "POST /endpoints/{EndpointName}/invocations-response-stream "
                                        "(InvokeEndpointWithResponseStream), "
                                        "POST /endpoints/{EndpointName}/async-invocations (InvokeEndpointAsync) "
                                        "and GET /ping"))
            return
        headers = {key: self.headers[key] for key in FORWARDED if self.headers.get(key)}
        self._relay(lambda: call("127.0.0.1", target.port, method, self.path, body=body, headers=headers,
                                 timeout=self.runtime.invoke_timeout))

    def _ping_all(self) -> HttpReply:
        """200 when every endpoint answers its own ping with 200."""
        states = {name: call("127.0.0.1", t.port, "GET", "/ping", timeout=PING_TIMEOUT).status
                  for name, t in self.runtime.targets.items()}
        status = 200 if all(code == 200 for code in states.values()) else 503
        return HttpReply(status, JSON, json.dumps({"endpoints": states}).encode())

    def _send_runtime(self, reply: RuntimeReply) -> None:
        self.send_response(reply.status)
        for key, value in reply.headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        self.wfile.write(reply.body)

    def _send_stream(self, stream: UpstreamStream) -> None:
        """Each event-stream message as one HTTP chunk, sent as it comes (``wfile`` is unbuffered)."""
        self.send_response(200)
        for key, value in stream.headers.items():
            self.send_header(key, value)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        ended = watch_for_hang_up(self.connection, stream.hang_up)
        try:
            for message in stream.messages():
                self.wfile.write(b"%x\r\n%s\r\n" % (len(message), message))
            if stream.cancelled:
                self.close_connection = True
            else:
                self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):   # hung up while we wrote
            self.close_connection = True
        finally:
            ended.set()
            stream.close()
