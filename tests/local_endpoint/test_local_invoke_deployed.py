"""The same request sent to a deployed endpoint through sagemaker-runtime (stubbed, no AWS)."""

from __future__ import annotations

import io
import json

import boto3
import numpy as np
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber

from local_endpoint.client.invoke import invoke_sagemaker_endpoint
from local_endpoint.client.payload import NamedTensor, encode_request
from local_endpoint.errors import InvokeError

REQUEST = encode_request([NamedTensor("INPUT", "FP32", np.array([[1.0, 2.0]], dtype=np.float32))], binary=True)


@pytest.fixture
def runtime():
    client = boto3.client(
        "sagemaker-runtime", region_name="eu-west-1", aws_access_key_id="test", aws_secret_access_key="test"
    )
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def test_invoke_endpoint_gets_the_same_body_and_target_model(runtime) -> None:
    # Body, content type and TargetModel pass through unchanged; the binary
    # answer is decoded like a local one.
    client, stubber = runtime
    header = json.dumps({"model_name": "t5.tar.gz", "outputs": [
        {"name": "OUTPUT", "datatype": "FP32", "shape": [1, 2], "parameters": {"binary_data_size": 8}}]}).encode()
    answer = header + np.array([[3.0, 5.0]], dtype=np.float32).tobytes()
    stubber.add_response(
        "invoke_endpoint",
        {
            "Body": StreamingBody(io.BytesIO(answer), len(answer)),
            "ContentType": f"application/vnd.sagemaker-triton.binary+json;json-header-size={len(header)}",
        },
        expected_params={
            "EndpointName": "nlp-mme",
            "Body": REQUEST.body,
            "ContentType": REQUEST.content_type,
            "TargetModel": "t5.tar.gz",
        },
    )
    response = invoke_sagemaker_endpoint("nlp-mme", REQUEST, target_model="t5.tar.gz", client=client)
    assert response.model_name == "t5.tar.gz"
    assert response.outputs[0].array.tolist() == [[3.0, 5.0]]


def test_a_model_error_is_reported_with_the_endpoint_and_message(runtime) -> None:
    # Triton's 400 reaches the caller as SageMaker's ModelError, message intact.
    client, stubber = runtime
    stubber.add_client_error(
        "invoke_endpoint",
        service_error_code="ModelError",
        service_message="Received client error (400) from primary with message \"unexpected shape for input 'INPUT'\"",
        http_status_code=424,
    )
    with pytest.raises(InvokeError) as caught:
        invoke_sagemaker_endpoint("vision-sme", REQUEST, client=client)
    assert str(caught.value) == (
        "endpoint 'vision-sme' rejected the request (ModelError, HTTP 424): Received client error (400) "
        "from primary with message \"unexpected shape for input 'INPUT'\""
    )


def test_missing_credentials_are_explained(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every source in botocore's credential chain, container (CodeBuild, ECS) and web identity (EKS,
    # GitHub OIDC) included, so the test means the same on a laptop and on a CI runner with a role.
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                     "AWS_DEFAULT_PROFILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                     "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN",
                     "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN",
                     "AWS_ROLE_SESSION_NAME", "AWS_CREDENTIAL_EXPIRATION"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    # boto3.client() uses boto3's default session, which keeps the credentials it found first: another test in
    # this pytest process (an xdist worker runs many modules) may have made it with keys. A fresh one, as the CLI
    # starts with.
    import boto3

    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    with pytest.raises(InvokeError) as caught:
        invoke_sagemaker_endpoint("vision-sme", REQUEST, region="eu-west-1")
    assert str(caught.value) == (
        "no AWS credentials found; configure them (aws configure, AWS_PROFILE or "
        "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY) to invoke a deployed endpoint"
    )
