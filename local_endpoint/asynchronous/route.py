"""InvokeEndpointAsync on the local SageMaker Runtime, and InvokeEndpoint refused on an asynchronous endpoint.

The answer (botocore ``InvokeEndpointAsync``: ``responseCode`` 202; ``InvokeEndpointAsyncOutput``) carries
``InferenceId`` in the JSON body and the headers ``X-Amzn-SageMaker-OutputLocation`` and
``X-Amzn-SageMaker-FailureLocation``. Refusals are ValidationError (400), the only client error the operation
lists. That SageMaker refuses InvokeEndpoint on an asynchronous endpoint with a ValidationError is reported by
users (strands-agents/harness-sdk#1969); its wording, and the wording for InvokeEndpointAsync on a real-time
endpoint, are inferred.
"""
from __future__ import annotations

import json
import uuid
from typing import Mapping, Optional

from local_endpoint.asynchronous.request import parse_request
from local_endpoint.asynchronous.work_queue import AsyncQueue
from local_endpoint.runtime import errors
from local_endpoint.runtime.errors import JSON, LOCAL_ACCOUNT, RuntimeReply
from local_endpoint.runtime.routes import RuntimeTarget, unknown_endpoint

OUTPUT_LOCATION = "X-Amzn-SageMaker-OutputLocation"
FAILURE_LOCATION = "X-Amzn-SageMaker-FailureLocation"
ASYNC_SUFFIX = "/async-invocations"


def invoke_async(queues: Mapping[str, AsyncQueue], targets: Mapping[str, RuntimeTarget], name: str,
                 headers: Mapping[str, str], body: bytes) -> RuntimeReply:
    """One InvokeEndpointAsync call: checked, queued, answered 202 with where the answer or failure will be."""
    queue = queues.get(name)
    if queue is None:
        if name not in targets:
            return unknown_endpoint(name, {**targets, **queues})
        return errors.validation_error(
            f"Endpoint {name} of account {LOCAL_ACCOUNT} is not an asynchronous endpoint, and InvokeEndpointAsync "
            "calls asynchronous endpoints only. Call InvokeEndpoint for it, or give the endpoint an asynchronous: "
            "block in the spec and run `tritonsm serve` again")
    parsed = parse_request(headers, body, queue.settings)
    if isinstance(parsed, RuntimeReply):
        return parsed
    job = queue.submit(parsed)
    return RuntimeReply(202, {"Content-Type": JSON, OUTPUT_LOCATION: job.output.url, FAILURE_LOCATION: job.failure.url,
                              "x-amzn-RequestId": str(uuid.uuid4())},
                        json.dumps({"InferenceId": parsed.inference_id}).encode())


def realtime_refusal(queues: Mapping[str, AsyncQueue], name: str) -> Optional[RuntimeReply]:
    """InvokeEndpoint on an asynchronous endpoint: SageMaker's ValidationError; None for any other endpoint."""
    queue = queues.get(name)
    if queue is None:
        return None
    return errors.validation_error(
        f"Endpoint {name} of account {LOCAL_ACCOUNT} is an asynchronous endpoint and does not take InvokeEndpoint. "
        f"Upload the request body to S3 (e.g. under {queue.locations.input.url}) and call InvokeEndpointAsync "
        "with its InputLocation, or send up to 128,000 bytes inline as its Body")

