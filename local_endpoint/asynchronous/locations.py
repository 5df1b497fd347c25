"""Where an asynchronous endpoint's requests, answers, failures and notifications live in the local S3 and SNS.

The cloud's layout (``triton_constructs.async_inference``): ``async/<endpoint>/input/``, ``output/`` and
``failure/`` under the stage bucket, unless the spec's ``asynchronous`` block names ``output_path`` /
``failure_path``; topics the stack creates, unless it names ``success_topic_arn`` / ``error_topic_arn``. Locally
the stage bucket is ``tritonsm-local``, and the topics are ``<endpoint>-async-success`` and
``<endpoint>-async-error`` (or the spec's, under their own names, regions and account).
"""
from __future__ import annotations

import dataclasses
import re
from typing import Optional

from deployment_spec.sections.asynchronous import Asynchronous, endpoint_prefix
from local_endpoint.runtime.errors import LOCAL_ACCOUNT   # the local runtime's account: its topics' too

LOCAL_BUCKET = "tritonsm-local"          # the local stand-in for the stage bucket

_S3_URL = re.compile(r"s3://(?P<bucket>[^/]+)/?(?P<key>.*)")
# InvokeEndpointAsync's InputLocation may also be an https:// S3 URL (botocore: "^(https|s3)://([^/]+)/?(.*)$"):
# virtual-hosted (https://BUCKET.s3.REGION.amazonaws.com/KEY) or path style
# (https://s3.REGION.amazonaws.com/BUCKET/KEY).
_HTTPS_VIRTUAL = re.compile(r"https://(?P<bucket>[^/]+)\.s3[.-][^/]*amazonaws\.com/(?P<key>.*)")
_HTTPS_PATH = re.compile(r"https://s3[.-][^/]*amazonaws\.com/(?P<bucket>[^/]+)/(?P<key>.*)")
_TOPIC_ARN = re.compile(r"arn:aws[a-z-]*:sns:(?P<region>[a-z0-9-]+):(?P<account>\d{12}):(?P<name>.+)")


@dataclasses.dataclass(frozen=True)
class S3Location:
    """A bucket and a key (an object) or a prefix ending in ``/`` (a folder)."""

    bucket: str
    key: str = ""

    @classmethod
    def parse(cls, url: str) -> Optional[S3Location]:
        """``s3://bucket/key``, or an https:// S3 URL; None for anything else."""
        for pattern in (_S3_URL, _HTTPS_VIRTUAL, _HTTPS_PATH):
            found = pattern.fullmatch(url)
            if found:
                return cls(found.group("bucket"), found.group("key"))
        return None

    @classmethod
    def folder(cls, url: str) -> S3Location:
        """An ``s3://`` prefix from the spec (validated there), ending in ``/``: SageMaker writes under it."""
        location = cls.parse(url)
        if location is None:
            raise ValueError(f"not an s3:// location: {url!r}")  # the spec's pattern refuses it first
        key = location.key if not location.key or location.key.endswith("/") else location.key + "/"
        return cls(location.bucket, key)

    def child(self, name: str) -> S3Location:
        return S3Location(self.bucket, self.key + name)

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.key}"


@dataclasses.dataclass(frozen=True)
class Topic:
    """An SNS topic: its name in the region and account the local server creates it in."""

    name: str
    region: str
    account: str = LOCAL_ACCOUNT

    @classmethod
    def from_arn(cls, arn: str) -> Topic:
        found = _TOPIC_ARN.fullmatch(arn)
        if found is None:
            raise ValueError(f"not an SNS topic ARN: {arn!r}")  # the spec's pattern refuses it first
        return cls(found.group("name"), found.group("region"), found.group("account"))

    @property
    def arn(self) -> str:
        return f"arn:aws:sns:{self.region}:{self.account}:{self.name}"


@dataclasses.dataclass(frozen=True)
class AsyncLocations:
    """One asynchronous endpoint's places: where callers put inputs, where answers, failures and news go."""

    input: S3Location
    output: S3Location
    failure: S3Location
    success_topic: Topic
    error_topic: Topic

    @property
    def buckets(self) -> list[str]:
        return sorted({self.input.bucket, self.output.bucket, self.failure.bucket})


def locations_for(storage_name: str, settings: Asynchronous, region: str,
                  account: str = LOCAL_ACCOUNT) -> AsyncLocations:
    """The cloud's layout for ``storage_name`` (the spec's endpoint name) in the local S3 and SNS; topics the spec
    does not name go in ``region`` and ``account`` (the local server's one account, ``topic_accounts``)."""
    base = S3Location(LOCAL_BUCKET, endpoint_prefix(storage_name))

    def topic(arn: Optional[str], suffix: str) -> Topic:
        return Topic.from_arn(arn) if arn else Topic(f"{storage_name}-async-{suffix}", region, account)

    return AsyncLocations(
        input=base.child("input/"),
        output=S3Location.folder(settings.output_path) if settings.output_path else base.child("output/"),
        failure=S3Location.folder(settings.failure_path) if settings.failure_path else base.child("failure/"),
        success_topic=topic(settings.success_topic_arn, "success"),
        error_topic=topic(settings.error_topic_arn, "error"))


def topic_accounts(settings: Asynchronous) -> set[str]:
    """The AWS accounts of the topics the spec names (the local server holds one account: moto's MOTO_ACCOUNT_ID)."""
    return {Topic.from_arn(arn).account for arn in (settings.success_topic_arn, settings.error_topic_arn) if arn}
