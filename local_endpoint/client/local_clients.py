"""boto3 clients of the local servers (the runtime of `tritonsm serve`, the asynchronous side's S3, SNS and SQS).

The local servers check no signature, so any key signs: the clients carry a fixed one and no AWS configuration
is needed. One attempt by default, so that a local failure is reported at once instead of retried.
"""
from __future__ import annotations

from typing import Any, Optional

# Any region: botocore builds a client only with one; the local servers read none but moto's topics' own.
LOCAL_REGION = "us-east-1"
KEYS = {"aws_access_key_id": "tritonsm-local", "aws_secret_access_key": "tritonsm-local"}


def local_client(service: str, url: str, region: Optional[str] = None, *, attempts: int = 1,
                 read_timeout: Optional[float] = None, max_connections: int = 10) -> Any:
    """A boto3 client of ``service`` pointed at the local server at ``url``."""
    import boto3
    from botocore.config import Config

    options: dict[str, Any] = {"max_pool_connections": max_connections, "retries": {"total_max_attempts": attempts}}
    if read_timeout is not None:
        options["read_timeout"] = read_timeout
    return boto3.client(service, endpoint_url=url, region_name=region or LOCAL_REGION, config=Config(**options),
                        **KEYS)
