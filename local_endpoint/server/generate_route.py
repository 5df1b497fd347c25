"""Triton's generate-stream route for a decoupled model, which the local server opens beside the SageMaker one.

From Triton 25.03, the SageMaker container serves a decoupled (streaming) model when started with
``SAGEMAKER_TRITON_INFERENCE_TYPE=generate_stream``: ``/invocations`` is then Triton's generate-stream route, which
takes the generate JSON (``{"text_input": ..., "parameters": {...}}``) and answers ``text/event-stream``, one
``data: {...}`` event per response (server PR #8047). The local server is nvidia-pytriton's 24.10, whose
``/invocations`` answers 501 for a decoupled model ("HTTP end point doesn't support models with decoupled
transaction policy"), while its KServe HTTP front end streams ``POST /v2/models/<model>/generate_stream`` (measured
2026-11-28/29). So for a decoupled default model the local endpoint also opens that front end, on a port of its own
on 127.0.0.1, and the local runtime sends InvokeEndpoint and InvokeEndpointWithResponseStream there
(``local_endpoint.runtime.streaming``).
"""
from __future__ import annotations

import dataclasses
import urllib.parse


@dataclasses.dataclass(frozen=True)
class GenerateRoute:
    """Where a decoupled model's generate-stream route answers: Triton's KServe HTTP ``port`` on 127.0.0.1."""

    port: int
    model: str

    @property
    def path(self) -> str:
        return f"/v2/models/{urllib.parse.quote(self.model, safe='')}/generate_stream"


def is_decoupled(config_text: str | None) -> bool:
    """Whether a config.pbtxt declares ``model_transaction_policy { decoupled: true }`` (Triton's own schema).

    Read from the file: a Python model that turns decoupled on only in ``auto_complete_config`` is not seen here.
    """
    if not config_text:
        return False
    # Lazy: the protobuf module pulls in grpc, which only serving needs (as backends.read_model_backend).
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    try:
        config = text_format.Parse(config_text, model_config_pb2.ModelConfig())
    except text_format.ParseError:
        return False   # backends.read_model_backend has refused it already, with the reason
    return bool(config.model_transaction_policy.decoupled)


def http_flags(port: int) -> list[str]:
    """Flags after the serve script's ``--allow-http=false``, which they override (the last value wins)."""
    return ["--allow-http=true", f"--http-port={port}"]
