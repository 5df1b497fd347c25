"""The local endpoint: the real Triton server started as SageMaker starts it, and an invoke client.

Public API (plain parameters, no spec objects, so any front end can wire it):

- `SingleModelEndpoint(tarball, default_model=, env=, port=, log_file=, startup_timeout=, cpu_stand_in=)`
- `MultiModelEndpoint(tarballs, env=, port=, capacity=, log_file=, startup_timeout=, cpu_stand_in=)`
  (`cpu_stand_in`: onnxruntime/pytorch models run as labelled Python-backend
  stand-ins on the CPU, see `local_endpoint.stand_in.cpu_stand_in`)
- `encode_request(tensors, binary=)`, `read_input_file(path, input_name)`,
  `tokenize_text(text, tokenizer_dir, ...)`, `text_tensor(text, input_name)`
- `LocalRuntime([NamedEndpoint(name, kind, endpoint)], port=)`: endpoints behind the SageMaker Runtime API
  (`POST /endpoints/{EndpointName}/invocations`, SageMaker's error classes), for boto3, the AWS CLI and the
  SageMaker SDK with `endpoint_url` / `AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME` set to its URL;
  `NamedEndpoint(..., asynchronous=local_endpoint.asynchronous.AsyncSetup(settings, storage_name, region))`
  makes one an asynchronous endpoint (InvokeEndpointAsync, a queue, local S3/SNS/SQS: `local_endpoint.asynchronous`)
- `invoke_url(url, request, target_model=)` (the container contract),
  `invoke_sagemaker_endpoint(endpoint_name, request, region=, target_model=, client=, endpoint_url=)`
- `local_endpoint.cli.serve_main(argv, asynchronous=)`, `local_endpoint.cli.invoke_main(argv)`

Heavy modules (transformers, boto3, grpc protobufs) load only when used.
"""

from local_endpoint.client.invoke import invoke_sagemaker_endpoint, invoke_url
from local_endpoint.client.payload import DecodedResponse, EncodedRequest, NamedTensor, encode_request
from local_endpoint.client.request_inputs import read_input_file, text_tensor, tokenize_text
from local_endpoint.endpoints.multi_model import MultiModelEndpoint
from local_endpoint.endpoints.single_model import SingleModelEndpoint
from local_endpoint.errors import (
    EnvironmentVariableError,
    InvokeError,
    LocalEndpointError,
    PortInUseError,
    ServerCrashedError,
    ServerStartError,
    TarballError,
    UnsupportedBackendError,
)
from local_endpoint.runtime.local_runtime import LocalRuntime, NamedEndpoint

__all__ = [
    "DecodedResponse",
    "EncodedRequest",
    "EnvironmentVariableError",
    "InvokeError",
    "LocalEndpointError",
    "LocalRuntime",
    "MultiModelEndpoint",
    "NamedEndpoint",
    "NamedTensor",
    "PortInUseError",
    "ServerCrashedError",
    "ServerStartError",
    "SingleModelEndpoint",
    "TarballError",
    "UnsupportedBackendError",
    "encode_request",
    "invoke_sagemaker_endpoint",
    "invoke_url",
    "read_input_file",
    "text_tensor",
    "tokenize_text",
]
