"""Every asynchronous endpoint of one local runtime: one local S3/SNS/SQS server, one queue per endpoint.

``LocalRuntime`` starts it once its endpoints run (the queues need their ports) and stops it before them: the
queues first (what is left gets its failure object while the local S3 still answers), then moto's server.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Mapping, Optional

from deployment_spec.sections.asynchronous import Asynchronous
from deployment_spec.served import LocalEndpoint
from local_endpoint.asynchronous.aws_server import LocalAws
from local_endpoint.asynchronous.locations import locations_for, topic_accounts
from local_endpoint.asynchronous.processing import Container
from local_endpoint.asynchronous.work_queue import AsyncQueue
from local_endpoint.errors import LocalEndpointError
from local_endpoint.runtime.errors import LOCAL_ACCOUNT

DEFAULT_REGION = "us-east-1"   # botocore's region when nothing names one: the local topics' then


@dataclasses.dataclass(frozen=True)
class AsyncSetup:
    """What makes a served endpoint asynchronous.

    Args:
        settings: The spec's ``asynchronous`` block.
        storage_name: Names its S3 prefixes (``async/<storage_name>/...``) and default topics: the spec's endpoint
            name, as the deployed stack names them.
        region: Where its default topics are (the spec environment's region): the application's SNS client must
            use it.
    """

    settings: Asynchronous
    storage_name: str
    region: str = DEFAULT_REGION

    @classmethod
    def of(cls, local: LocalEndpoint, storage_name: str) -> Optional[AsyncSetup]:
        """A spec endpoint's setup (None when it is real-time): topics in the environment's region, else in the
        region the AWS configuration of this shell names."""
        settings = local.endpoint.asynchronous if local.endpoint else None
        if settings is None:
            return None
        region = local.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or DEFAULT_REGION
        return cls(settings, storage_name, region)


class AsyncService:
    """The local S3/SNS/SQS server and the queues of ``endpoints`` (EndpointName: its setup and its container)."""

    def __init__(self, endpoints: Mapping[str, tuple[AsyncSetup, Container]]) -> None:
        accounts = set().union(*(topic_accounts(setup.settings) for setup, _ in endpoints.values()))
        if len(accounts) > 1:
            raise LocalEndpointError(
                f"the asynchronous endpoints' topics are in {len(accounts)} AWS accounts "
                f"({', '.join(sorted(accounts))}); "
                "the local SNS holds one: name topics of one account in success_topic_arn and error_topic_arn, or "
                "leave them out for local ones")
        self.aws = LocalAws(account=next(iter(accounts), LOCAL_ACCOUNT))
        self._endpoints = dict(endpoints)
        self.queues: dict[str, AsyncQueue] = {}

    def start(self) -> AsyncService:
        self.aws.start()
        try:
            for name, (setup, container) in self._endpoints.items():
                locations = locations_for(setup.storage_name, setup.settings, setup.region, self.aws.account)
                self.aws.provision(locations)
                self.queues[name] = AsyncQueue(name, setup.settings, locations, self.aws, container).start()
        except BaseException:
            self.stop()
            raise
        return self

    def check_running(self) -> None:
        self.aws.check_running()

    def stop(self) -> None:
        """The queues (each request left gets its failure object), then the server. Safe to call twice."""
        for queue in self.queues.values():
            queue.stop()
        self.aws.stop()

    def announcement(self, runtime_url: str) -> list[str]:
        """What `tritonsm serve` prints: where to call, where to point boto3, the buckets, prefixes and topics."""
        url = self.aws.url
        lines = [f"local S3, SNS and SQS (moto) at {url}; point boto3 and the AWS CLI there: export "
                 f"AWS_ENDPOINT_URL_S3={url} AWS_ENDPOINT_URL_SNS={url} AWS_ENDPOINT_URL_SQS={url}"]
        for name, queue in self.queues.items():
            where, settings = queue.locations, queue.settings
            lines += [
                f"asynchronous endpoint {name}: InvokeEndpointAsync at "
                f"{runtime_url}/endpoints/{name}/async-invocations "
                f"({settings.max_concurrent_invocations_per_instance} at a time, payloads up to "
                f"{settings.max_payload_mb} MB, RequestTTLSeconds {settings.request_ttl_s}, "
                f"InvocationTimeoutSeconds {settings.max_processing_s} by default)",
                f"  inputs: upload under {where.input.url}",
                f"  answers: {where.output.url}<uuid>.out; failures: {where.failure.url}<uuid>-error.out",
                f"  notifications: SNS {where.success_topic.arn} (success), {where.error_topic.arn} (error); "
                f"subscribe an SQS queue of yours in {where.success_topic.region}"]
        return lines
