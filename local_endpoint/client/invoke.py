"""Sending one request to a local endpoint or to a deployed SageMaker endpoint.

Both paths take the same `EncodedRequest` and give the same decoded result,
so a payload proven locally is the payload sent to SageMaker.
"""

from __future__ import annotations

import contextlib
import json
import urllib.parse
from typing import Any, Iterator

from local_endpoint.client.http_call import call
from local_endpoint.client.local_clients import local_client
from local_endpoint.client.payload import DecodedResponse, EncodedRequest, decode_response, error_message
from local_endpoint.errors import InvokeError

DEFAULT_TIMEOUT = 60.0  # InvokeEndpoint's own limit
# InvokeEndpoint's TargetModel (a multi-model endpoint's model) travels in this header (botocore's
# sagemaker-runtime model, InvokeEndpointInput.TargetModel: location header).
TARGET_MODEL_HEADER = "X-Amzn-SageMaker-Target-Model"
# InvokeEndpoint's InferenceComponentName travels in this header (botocore's sagemaker-runtime model,
# InvokeEndpointInput.InferenceComponentName: location header).
INFERENCE_COMPONENT_HEADER = "X-Amzn-SageMaker-Inference-Component"


def invoke_url(
    url: str, request: EncodedRequest, *, target_model: str | None = None, inference_component: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> DecodedResponse:
    """POST to `<url>/invocations` (a local endpoint) and decode the answer; the target model or inference
    component goes in the header SageMaker's runtime uses for it."""
    host, port, parsed = split_local_url(url if "://" in url else f"http://{url}")
    path = parsed.path.rstrip("/")
    path = path if path.endswith("/invocations") else f"{path}/invocations"
    headers = {"Content-Type": request.content_type}
    if target_model:
        headers[TARGET_MODEL_HEADER] = target_model
    if inference_component:
        headers[INFERENCE_COMPONENT_HEADER] = inference_component
    try:
        reply = call(host, port, "POST", path, body=request.body, headers=headers, timeout=timeout)
    except OSError as error:
        raise InvokeError(
            f"nothing answers at {url} ({error.strerror or error}); start the endpoint first "
            "(tritonsm serve ...) or fix --url"
        ) from None
    if reply.status != 200:
        raise InvokeError(f"the endpoint rejected the request (HTTP {reply.status}): {error_message(reply.body)}")
    return decode_response(reply.body, reply.content_type)


def invoke_sagemaker_endpoint(
    endpoint_name: str,
    request: EncodedRequest,
    *,
    region: str | None = None,
    target_model: str | None = None,
    inference_component: str | None = None,
    client: Any = None,
    endpoint_url: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> DecodedResponse:
    """Call `sagemaker-runtime` `InvokeEndpoint` with the same body and decode the answer: a deployed endpoint,
    or a local one behind `tritonsm serve` (``endpoint_url``), through the same boto3 call.

    Args:
        endpoint_name: The deployed endpoint's name.
        request: The encoded body and its content type.
        region: The endpoint's region. Defaults to boto3's configured region.
        target_model: For an MME, the tarball to run (`TargetModel`).
        inference_component: For an endpoint of inference components, the one to run
            (`InferenceComponentName`).
        client: A `sagemaker-runtime` client to use instead of a new one (tests
            pass one wrapped in botocore's Stubber).
        endpoint_url: The local SageMaker Runtime of `tritonsm serve` (e.g. http://127.0.0.1:8080). Defaults
            to AWS's endpoint of the region.
        timeout: Seconds to wait for the local runtime's answer (deployed: botocore's defaults).
    """
    arguments = {"EndpointName": endpoint_name, "Body": request.body, "ContentType": request.content_type}
    if target_model:
        arguments["TargetModel"] = target_model
    if inference_component:
        arguments["InferenceComponentName"] = inference_component
    with told_as_invoke_errors(endpoint_name, endpoint_url):
        response = (client or runtime_client(region, endpoint_url, timeout)).invoke_endpoint(**arguments)
        body = response["Body"].read()
    return decode_response(body, response.get("ContentType", ""))


def runtime_client(region: str | None, endpoint_url: str | None, timeout: float = DEFAULT_TIMEOUT) -> Any:
    """boto3's `sagemaker-runtime` client of the region, or of the local runtime at ``endpoint_url``."""
    import boto3

    return (boto3.client("sagemaker-runtime", region_name=region) if endpoint_url is None
            else local_runtime_client(endpoint_url, region, timeout))


@contextlib.contextmanager
def told_as_invoke_errors(endpoint_name: str, endpoint_url: str | None) -> Iterator[None]:
    """botocore's errors of a call to ``endpoint_name`` as one InvokeError each, saying what to do."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

    try:
        yield
    except NoRegionError:
        raise InvokeError(
            f"no AWS region for endpoint {endpoint_name!r}; pass --region or set AWS_REGION"
        ) from None
    except NoCredentialsError:
        raise InvokeError(
            "no AWS credentials found; configure them (aws configure, AWS_PROFILE or "
            "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY) to invoke a deployed endpoint"
        ) from None
    except ClientError as error:
        details = error.response.get("Error", {})
        status = error.response.get("OriginalStatusCode") or error.response.get(
            "ResponseMetadata", {}).get("HTTPStatusCode")
        raise InvokeError(
            f"endpoint {endpoint_name!r} rejected the request ({details.get('Code', 'error')}, "
            f"HTTP {status}): {details.get('Message', '')}"
        ) from None
    except BotoCoreError as error:
        where = f" at {endpoint_url} (is `tritonsm serve` still running?)" if endpoint_url else ""
        raise InvokeError(f"could not call endpoint {endpoint_name!r}{where}: {error}") from None


def local_runtime_client(endpoint_url: str, region: str | None, timeout: float = DEFAULT_TIMEOUT) -> Any:
    """A `sagemaker-runtime` client for the local runtime, ``timeout`` to read the answer."""
    return local_client("sagemaker-runtime", endpoint_url, region, read_timeout=timeout)


def split_local_url(url: str) -> tuple[str, int, urllib.parse.SplitResult]:
    """``url``'s host, port and parts, when it is http with a host and a port (what `tritonsm serve` prints);
    else InvokeError."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme != "http" or not parsed.hostname or not parsed.port:
        raise InvokeError(f"--url {url!r} must look like http://127.0.0.1:8080 (host and port of `tritonsm serve`)")
    return parsed.hostname, parsed.port, parsed


def endpoint_names_at(url: str, timeout: float = 5.0) -> list[str]:
    """The EndpointNames the local runtime at ``url`` serves (its ``GET /endpoints``)."""
    host, port, _ = split_local_url(url)
    try:
        reply = call(host, port, "GET", "/endpoints", timeout=timeout)
        names = json.loads(reply.body)["endpoints"] if reply.status == 200 else None
    except OSError as error:
        raise InvokeError(f"nothing answers at {url} ({error.strerror or error}); start the endpoint first "
                          "(tritonsm serve ...) or fix --url") from None
    except (ValueError, KeyError, TypeError):
        names = None
    if not isinstance(names, list):
        raise InvokeError(f"{url} does not answer as `tritonsm serve` does (GET /endpoints: HTTP {reply.status}); "
                          "point --url at a running `tritonsm serve`")
    return [str(name) for name in names]
