"""`docker login` to the SageMaker image registry with an ECR token of the user's AWS credentials.

The SageMaker Triton images live in AWS's Deep Learning Containers registries (one account per
region: `deployment_spec/facts/triton_images.py`, from the SageMaker SDK); pulling one needs a login to
that registry, as AWS documents it: `aws ecr get-login-password --region REGION | docker login
--username AWS --password-stdin ACCOUNT.dkr.ecr.REGION.amazonaws.com`
(https://github.com/aws/deep-learning-containers/blob/master/available_images.md, and
https://docs.aws.amazon.com/AmazonECR/latest/userguide/Registries.html#registry_auth). Here the token comes
from boto3's `ecr.get_authorization_token` (what `get-login-password` calls): base64 of
`AWS:<password>`, valid 12 hours. No `registryIds`: botocore marks it deprecated, since "the
returned authorization token can be used to access any Amazon ECR registry that the IAM principal
has access to". The password goes to docker on stdin, never on a command line.
"""
from __future__ import annotations

import base64
import subprocess
from typing import Any, Callable, Optional

from local_endpoint.errors import LocalEndpointError


def configured_region() -> Optional[str]:
    """The region of the user's AWS configuration (AWS_REGION, AWS_DEFAULT_REGION, the profile), if any."""
    import boto3
    return boto3.session.Session().region_name


def login_argv(registry: str) -> list[str]:
    return ["docker", "login", "--username", "AWS", "--password-stdin", registry]


def ecr_password(region: str, client: Any = None) -> str:
    """The password half of an ECR authorization token for `region`."""
    import botocore.exceptions
    if client is None:
        import boto3
        client = boto3.client("ecr", region_name=region)
    try:
        data = client.get_authorization_token()["authorizationData"][0]
    except botocore.exceptions.NoCredentialsError:
        raise LocalEndpointError("--image sagemaker needs AWS credentials to pull the SageMaker image (an ECR "
                                 "login): configure them (aws configure, AWS_PROFILE, ...), or use --image ngc") from None
    except botocore.exceptions.ClientError as error:
        raise LocalEndpointError(f"ECR refused an authorization token in {region} ({error}); the credentials need "
                                 "ecr:GetAuthorizationToken, and ecr:BatchGetImage and ecr:GetDownloadUrlForLayer on "
                                 "the sagemaker-tritonserver repository; or use --image ngc") from None
    user, _, password = base64.b64decode(data["authorizationToken"]).decode().partition(":")
    if user != "AWS" or not password:
        raise LocalEndpointError(f"ECR returned an authorization token of an unexpected form (user {user!r}); "
                                 "expected AWS:<password>")
    return password


def docker_login(registry: str, region: str, *, client: Any = None,
                 run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> None:
    """Log docker in to `registry` (an ECR host) with a fresh token."""
    password = ecr_password(region, client)
    result = run(login_argv(registry), input=password, text=True, capture_output=True)
    if result.returncode != 0:
        raise LocalEndpointError(f"docker login {registry} failed (exit {result.returncode}): "
                                 f"{(result.stderr or result.stdout).strip()}")
