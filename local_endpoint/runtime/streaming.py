"""InvokeEndpointWithResponseStream: a decoupled model's responses, streamed as SageMaker streams them.

The operation (botocore ``sagemaker-runtime`` service model) is ``POST /endpoints/{EndpointName}/invocations-response-
stream``; it takes what InvokeEndpoint takes (``Accept`` travels as ``X-Amzn-SageMaker-Accept``) and answers an event
stream (``event_stream``) of ``PayloadPart`` events, the container's bytes as they come, with the container's content
type in ``X-Amzn-SageMaker-Content-Type``. Locally the container's streaming answer is Triton's generate-stream route
of a decoupled model (``local_endpoint.server.generate_route``): each of its ``data: {...}`` events goes on as one
PayloadPart as soon as it arrives. An error before the first event is InvokeEndpoint's (ModelError with the model's
status and message, ValidationError, ServiceUnavailable); once the stream has begun, an error event of Triton's
(``data: {"error": ...}``), a broken connection or a silent model ends it with a ``ModelStreamError``. A client that
hangs up closes the connection to Triton at once, which cancels the request (the model's
``response_sender.is_cancelled()`` turns true).
"""
from __future__ import annotations

import http.client
import json
import select
import socket
import threading
import uuid
from typing import Callable, Iterator, Mapping, Optional, Union

from local_endpoint.runtime import errors
from local_endpoint.runtime.errors import RuntimeReply
from local_endpoint.runtime.event_stream import CONTENT_TYPE, TIME_EXCEEDED, model_stream_error, payload_part
from local_endpoint.runtime.routes import (COMPONENTS, INFERENCE_COMPONENT, INVOKED_VARIANT, SME, RuntimeTarget,
                                          checked_target, sse_error, unavailable)

STREAM_SUFFIX = "/invocations-response-stream"
CONTAINER_CONTENT_TYPE = "X-Amzn-SageMaker-Content-Type"   # InvokeEndpointWithResponseStreamOutput.ContentType
READ_BYTES = 65536
HANG_UP_POLL_S = 0.1   # how often a streaming answer looks whether its client is still there


class UpstreamStream:
    """Triton's generate-stream answer, open after its first event: its events as event-stream messages."""

    def __init__(self, connection: http.client.HTTPConnection, response: http.client.HTTPResponse,
                 target: RuntimeTarget, name: str, timeout: float, log: str) -> None:
        self._connection, self._response = connection, response
        self._target, self._name, self._timeout, self._log = target, name, timeout, log
        self.cancelled = False   # the client hung up: the rest is nobody's
        self.headers = {"Content-Type": CONTENT_TYPE, INVOKED_VARIANT: target.variant,
                        CONTAINER_CONTENT_TYPE: response.getheader("Content-Type") or "text/event-stream",
                        "x-amzn-RequestId": str(uuid.uuid4())}

    def messages(self) -> Iterator[bytes]:
        """PayloadPart messages as Triton's events arrive, one per event; a ModelStreamError ends them early."""
        pending = b""
        try:
            while chunk := self._response.read1(READ_BYTES):
                # Triton sends each event whole; split anyway, so an error event is seen whatever the chunks.
                *events, pending = (pending + chunk).split(b"\n\n")
                for event in events:
                    failure = event_error(event)
                    if failure is not None:
                        yield self._error(f"Received error with message \"{failure}\"")
                        return
                    yield payload_part(event + b"\n\n")
        except (socket.timeout, TimeoutError):
            yield self._error(f"The model sent nothing for {self._timeout:g} s", TIME_EXCEEDED)
            return
        except (OSError, http.client.HTTPException, ValueError) as error:   # ValueError: read after close()
            if not self.cancelled:
                yield self._error(f"The connection to the model broke ({type(error).__name__}: {error})")
            return
        if pending.strip() and not self.cancelled:
            yield payload_part(pending)   # an unterminated last event, passed on as it came

    def _error(self, what: str, code: Optional[str] = None) -> bytes:
        text = errors.model_stream_error_message(self._name, self._target.variant, what, self._log)
        return model_stream_error(text) if code is None else model_stream_error(text, code)

    def close(self) -> None:
        """Close the connection to Triton; before the end of the stream, Triton cancels the request."""
        self._connection.close()

    def hang_up(self) -> None:
        """The client hung up (another thread): end the connection to Triton, which cancels the request, and wake
        the handler's read on it; the handler then closes it (``close``: its response is not another thread's)."""
        self.cancelled = True
        sock = self._connection.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass   # the stream ended meanwhile


def event_error(event: bytes) -> Optional[str]:
    """The ``error`` of a ``data: {"error": ...}`` event, else None."""
    for line in event.splitlines():
        if line.startswith(b"data:"):
            try:
                data = json.loads(line[len(b"data:"):])
            except ValueError:
                return None
            return str(data["error"]) if isinstance(data, dict) and "error" in data else None
    return None


def open_stream(targets: Mapping[str, RuntimeTarget], name: str, headers: Mapping[str, str], body: bytes,
                timeout: float) -> Union[UpstreamStream, RuntimeReply]:
    """The stream of one InvokeEndpointWithResponseStream call once its first event arrived, or the refusal."""
    headers = {key.lower(): value for key, value in headers.items()}
    target = checked_target(targets, name, headers, body)
    if isinstance(target, RuntimeReply):
        return target
    if target.traffic is not None:   # production variants: one answers, as for InvokeEndpoint (weights, TargetVariant)
        chosen = target.traffic.choose(target, headers)
        if isinstance(chosen, RuntimeReply):
            return chosen
        target = chosen
    route = target.stream_route(headers)
    if route is None:
        return not_streaming(target, headers)
    connection = http.client.HTTPConnection("127.0.0.1", route.port, timeout=timeout)
    try:
        # Triton answers the status line with its first response, so this waits for the first event.
        connection.request("POST", route.path, body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        if response.status < 400:
            return UpstreamStream(connection, response, target, name, timeout, target.log_for(headers))
        refusal = sse_error(response.read()).decode(errors="replace")
    except (socket.timeout, TimeoutError):
        connection.close()
        return errors.model_error(name, target.variant, 0, f"Your invocation timed out while waiting for a response "
                                  f"from container {target.variant} ({timeout:g} s). Review the server log, resolve "
                                  "the issue, and try again.", target.log_for(headers))
    except (OSError, http.client.HTTPException) as error:
        connection.close()
        return unavailable(target, name, error)
    connection.close()
    return errors.model_error(name, target.variant, response.status, refusal, target.log_for(headers))


def not_streaming(target: RuntimeTarget, headers: Mapping[str, str]) -> RuntimeReply:
    """ValidationError for an endpoint or inference component with nothing to stream (``headers``: lower case)."""
    if target.kind is COMPONENTS:
        component = headers.get(INFERENCE_COMPONENT.lower(), "")
        return errors.validation_error(
            f"Inference component {component} of endpoint {target.name} does not stream responses: its model does "
            "not declare model_transaction_policy { decoupled: true } in its config.pbtxt. Call InvokeEndpoint for "
            "the whole answer" + (f", or name a streaming component ({', '.join(sorted(target.component_routes))})"
                                  if target.component_routes else ""))
    what = (f"it is a {target.kind.value} endpoint" if target.kind is not SME else
            f"the model of its variant {target.variant} does not declare model_transaction_policy {{ decoupled: true }} "
            "in its config.pbtxt" if target.traffic is not None else
            "its model does not declare model_transaction_policy { decoupled: true } in its config.pbtxt")
    return errors.validation_error(
        f"Endpoint {target.name} does not stream responses: InvokeEndpointWithResponseStream streams here from a "
        f"single-model endpoint or an inference component whose model is decoupled (Triton's generate-stream "
        f"route), and {what}. Call InvokeEndpoint for the whole answer")


def watch_for_hang_up(client: socket.socket, hang_up: Callable[[], None]) -> threading.Event:
    """Call ``hang_up`` as soon as ``client`` closes its connection, until the returned event is set (the stream
    ended). A thread of its own: the handler's thread waits on Triton between two events, maybe for long."""
    ended = threading.Event()

    def watch() -> None:
        while not ended.is_set():
            try:
                readable, _, _ = select.select([client], [], [], HANG_UP_POLL_S)
                if readable:
                    if not client.recv(1, socket.MSG_PEEK):   # end of file: the client closed
                        hang_up()
                    return   # else the client sent more, so it is still there
            except (OSError, ValueError):   # reset, or closed under us
                hang_up()
                return

    threading.Thread(target=watch, name="stream-hang-up", daemon=True).start()
    return ended
