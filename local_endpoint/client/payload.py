"""KServe v2 request bodies for SageMaker `/invocations`, and decoded responses.

Two encodings, both accepted by Triton's SageMaker front end
(src/sagemaker_server.cc): plain JSON, and binary+json, where a JSON header
of N bytes is followed by raw tensor bytes and the content type says
`application/vnd.sagemaker-triton.binary+json;json-header-size=N`. The
tensor encoding itself is tritonclient's (`InferInput`, `InferResult`).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import numpy as np

from local_endpoint.errors import InvokeError

JSON_CONTENT_TYPE = "application/json"
BINARY_CONTENT_TYPE_PREFIX = "application/vnd.sagemaker-triton.binary+json;json-header-size="


@dataclasses.dataclass(frozen=True)
class NamedTensor:
    """One input or output tensor: its name, Triton datatype and values."""

    name: str
    datatype: str
    array: np.ndarray


@dataclasses.dataclass(frozen=True)
class EncodedRequest:
    body: bytes
    content_type: str


@dataclasses.dataclass(frozen=True)
class DecodedResponse:
    model_name: str | None
    outputs: list[NamedTensor]


def encode_request(tensors: list[NamedTensor], *, binary: bool,
                   parameters: dict[str, Any] | None = None) -> EncodedRequest:
    """Encode inputs as KServe v2 JSON, or binary+json with binary outputs requested; ``parameters``: the
    request's own KServe v2 parameters (e.g. a detector's ``threshold``), which Triton hands to each step."""
    from tritonclient.http import InferenceServerClient, InferInput
    from tritonclient.utils import InferenceServerException

    inputs = []
    try:
        for tensor in tensors:
            infer_input = InferInput(tensor.name, list(tensor.array.shape), tensor.datatype)
            infer_input.set_data_from_numpy(tensor.array, binary_data=binary)
            inputs.append(infer_input)
    except InferenceServerException as error:
        raise InvokeError(f"input {tensor.name!r} cannot be encoded: {error.message()}") from None
    if not binary:
        # generate_request_body would ask for binary outputs; a JSON caller wants a JSON answer.
        document: dict[str, Any] = {"inputs": [infer_input._get_tensor() for infer_input in inputs]}
        if parameters:
            document["parameters"] = parameters
        body = json.dumps(document)
        return EncodedRequest(body.encode(), JSON_CONTENT_TYPE)
    # A JSON header of json_size bytes followed by the raw tensors; outputs come back binary too.
    body, json_size = InferenceServerClient.generate_request_body(inputs, parameters=parameters or None)
    return EncodedRequest(body, f"{BINARY_CONTENT_TYPE_PREFIX}{json_size}")


def decode_response(body: bytes, content_type: str) -> DecodedResponse:
    """Decode a successful inference response, JSON or binary+json."""
    header_length = None
    if content_type.startswith(BINARY_CONTENT_TYPE_PREFIX):
        header_length = int(content_type[len(BINARY_CONTENT_TYPE_PREFIX):])
    from tritonclient.http import InferResult

    try:
        result = InferResult.from_response_body(body, header_length=header_length)
    except Exception as error:  # rapidjson and struct raise several types
        raise InvokeError(
            f"the endpoint answered with a body that is not a KServe v2 inference response "
            f"({error}); first bytes: {body[:200]!r}"
        ) from None
    response = result.get_response()
    outputs = [
        NamedTensor(output["name"], output["datatype"], _as_bytes_if_text(result.as_numpy(output["name"])))
        for output in response.get("outputs", [])
    ]
    return DecodedResponse(response.get("model_name"), outputs)


def _as_bytes_if_text(array: np.ndarray) -> np.ndarray:
    # BYTES outputs decode to str from JSON but to bytes from binary; one type
    # for both keeps a JSON and a binary answer comparable.
    if array.dtype != np.object_:
        return array
    return np.vectorize(lambda v: v.encode() if isinstance(v, str) else v, otypes=[object])(array)


def error_message(body: bytes) -> str:
    """Triton's `{"error": "..."}` text, or the raw body."""
    try:
        return str(json.loads(body)["error"])
    except (ValueError, KeyError, TypeError):
        return body.decode(errors="replace").strip() or "(empty body)"
