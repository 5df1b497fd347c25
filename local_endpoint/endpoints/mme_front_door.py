"""The HTTP front of a local MME: what SageMaker's runtime offers a client.

A client of a real MME calls `InvokeEndpoint` with a `TargetModel`; the
runtime turns it into `POST /invocations` plus the header
`X-Amzn-SageMaker-Target-Model`. This server accepts exactly that and hands
it to the model cache. `GET /ping` is passed to Triton; `GET /models` lists
the loaded target models (a local convenience, least recently used first).
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from local_endpoint.client.http_call import HttpReply, call
from local_endpoint.client.invoke import TARGET_MODEL_HEADER
from local_endpoint.endpoints.model_cache import JSON, MultiModelCache, error_reply


class FrontDoor(ThreadingHTTPServer):
    """Threaded HTTP server bound to what it serves from; serves until `shutdown()`.

    ``cache`` is the MME model cache for ``FrontDoorHandler``; another handler class (the inference-component
    router, ``local_endpoint.endpoints.components``) reads its own object there.
    """

    daemon_threads = True

    def __init__(self, port: int, cache: MultiModelCache, log_path: str,
                 handler: type[BaseHTTPRequestHandler] | None = None) -> None:
        super().__init__(("127.0.0.1", port), handler or FrontDoorHandler)  # local testing only: loopback
        self.cache = cache
        self.log_path = log_path
        self._thread: threading.Thread | None = None

    def handle_error(self, request: object, client_address: tuple[str, int]) -> None:
        # socketserver prints a traceback to our stderr, which is the CLI's. A client that hangs up (a
        # timed-out curl, Ctrl-C in a load test) is not news; anything else is told in one line.
        error = sys.exc_info()[1]
        if not isinstance(error, ConnectionError):
            print(f"warning: a request from {client_address[0]}:{client_address[1]} failed: "
                  f"{type(error).__name__}: {error}", file=sys.stderr, flush=True)

    def start_in_background(self) -> None:
        self._thread = threading.Thread(target=self.serve_forever, name="mme-front-door", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        if self._thread is not None:
            self._thread.join()


class FrontDoorHandler(BaseHTTPRequestHandler):
    # Keep-alive, so load tests and clients reuse connections.
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY (socketserver.StreamRequestHandler): the headers and the body go out as two writes, and on a
    # kept-alive connection Nagle's algorithm held the body until the client's delayed ACK, ~40 ms per answer.
    disable_nagle_algorithm = True
    server: FrontDoor

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        if self.path == "/ping":
            self._relay(lambda: call("127.0.0.1", self.server.cache.triton_port, "GET", "/ping", timeout=5))
        elif self.path == "/models":
            body = json.dumps({"models": self.server.cache.loaded_models()}).encode()
            self._send(HttpReply(200, JSON, body))
        else:
            self._send(error_reply(404, f"no route GET {self.path}; this endpoint serves /ping and /invocations"))

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path != "/invocations":
            self._send(error_reply(404, f"no route POST {self.path}; send requests to /invocations"))
            return
        target_model = self.headers.get(TARGET_MODEL_HEADER)
        if not target_model:
            self._send(error_reply(
                400,
                f"this is a multi-model endpoint: name the model with the {TARGET_MODEL_HEADER} header "
                f"(TargetModel in InvokeEndpoint, --target-model in tritonsm invoke), one of: "
                f"{', '.join(sorted(self.server.cache.archives))}",
            ))
            return
        content_type = self.headers.get("Content-Type", "")
        self._relay(lambda: self.server.cache.invoke(target_model, body, content_type))

    def _relay(self, exchange: Callable[[], HttpReply]) -> None:
        try:
            reply = exchange()
        except OSError as error:
            reply = error_reply(
                502,
                f"the Triton server behind this endpoint did not answer ({error}); "
                f"see its log: {self.server.log_path}",
            )
        self._send(reply)

    def _send(self, reply: HttpReply) -> None:
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type or "text/plain")
        self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        self.wfile.write(reply.body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass  # one line per request on stderr would drown the CLI's output
