"""Streaming one request through InvokeEndpointWithResponseStream: a local endpoint of `tritonsm serve` or a
deployed one, through the same boto3 call.

The body is the generate JSON of Triton's generate-stream route (``{"text_input": ..., "parameters": {...}}``), the
answer Server-Sent Events (``data: {...}`` lines) cut into PayloadParts that need not end on a line, so the lines are
put together again here (``EventReader``) before each event's ``text_output`` is handed on.
"""
from __future__ import annotations

import base64
import json
from typing import Any, Callable

from local_endpoint.client.invoke import DEFAULT_TIMEOUT, runtime_client, told_as_invoke_errors
from local_endpoint.errors import InvokeError

TEXT_OUTPUT = "text_output"   # the generate route's output of a text-generation model (Triton's generate extension)


def generate_body(text: str, parameters: dict[str, object]) -> bytes:
    """The generate JSON: the text as ``text_input``, the request parameters under ``parameters``."""
    return json.dumps({"text_input": text, "parameters": parameters}).encode()


def audio_body(clip: bytes, parameters: dict[str, object]) -> bytes:
    """The generate JSON of a speech model: the file's bytes base64-encoded as ``audio`` (a JSON string cannot hold
    raw bytes), the request parameters under ``parameters``."""
    return json.dumps({"audio": base64.b64encode(clip).decode("ascii"), "parameters": parameters}).encode()


class EventReader:
    """The ``data:`` events of a Server-Sent Events stream fed in pieces cut anywhere."""

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        """The events whose line ``data`` completes, each its JSON object."""
        *lines, self._pending = (self._pending + data).split(b"\n")
        events = []
        for line in lines:
            if not line.startswith(b"data:"):
                continue   # the blank line ending an event, or a comment / field the generate route does not send
            text = line[len(b"data:"):].strip()
            try:
                event = json.loads(text)
            except ValueError:
                raise InvokeError(f"the endpoint streamed an event that is not JSON: {text[:200]!r}") from None
            events.append(event if isinstance(event, dict) else {TEXT_OUTPUT: event})
        return events


def stream_sagemaker_endpoint(endpoint_name: str, body: bytes, write: Callable[[str], None], *,
                              region: str | None = None, endpoint_url: str | None = None,
                              timeout: float = DEFAULT_TIMEOUT, client: Any = None,
                              inference_component: str | None = None) -> None:
    """Call InvokeEndpointWithResponseStream and ``write`` each event's ``text_output`` as it arrives; InvokeError
    for a refusal, a ``ModelStreamError`` or an ``{"error": ...}`` event (the container's own, passed on by SageMaker
    as payload). ``inference_component``: the InferenceComponentName on an endpoint of inference components."""
    from botocore.exceptions import EventStreamError

    with told_as_invoke_errors(endpoint_name, endpoint_url):
        runtime = client or runtime_client(region, endpoint_url, timeout)
        named = {"InferenceComponentName": inference_component} if inference_component else {}
        response = runtime.invoke_endpoint_with_response_stream(EndpointName=endpoint_name, Body=body,
                                                                ContentType="application/json", **named)
        reader = EventReader()
        try:
            for event in response["Body"]:
                for data in reader.feed(event.get("PayloadPart", {}).get("Bytes", b"")):
                    if "error" in data:
                        raise InvokeError(f"the response stream of endpoint {endpoint_name!r} failed: "
                                          f"{data['error']}")
                    write(str(data.get(TEXT_OUTPUT, "")))
        except EventStreamError as error:   # a ClientError: told here, not as a refusal of the request
            details = error.response.get("Error", {})
            raise InvokeError(f"the response stream of endpoint {endpoint_name!r} failed "
                              f"({details.get('Code', 'error')}): {details.get('Message', '')}") from None
