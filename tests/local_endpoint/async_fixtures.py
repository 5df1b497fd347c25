"""What the asynchronous endpoint tests share: an application's boto3 clients, the audit that every accepted request
ended in exactly one object, the overlap measured at the container, and a model that takes its time.
"""
from __future__ import annotations

import collections
import hashlib
import shutil
import dataclasses
import json
import pathlib
import time
from typing import Any, Iterable

import boto3
from botocore.config import Config

import triton_model_fixtures as models
from deployment_spec.builds.manifest import SCHEMA_VERSION

REGION = "us-east-1"
# An asynchronous spec endpoint serving the tests' ``add`` archive (adder_spec).
SPEC = """\
project: Tests
triton_version: "25.04"
models:
  add: {backend: python, source: {python_dir: add_model}, max_batch_size: 8}
endpoints:
  adder:
    kind: single-model
    models: [add]
    instance_type: ml.c5.xlarge
    asynchronous: {max_concurrent_invocations_per_instance: 2, max_payload_mb: 1}
environments:
  dev: {region: eu-west-1, removal_policy: destroy}
"""


def adder_spec(root: pathlib.Path, add_tarball: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    """``SPEC`` and a hand-written build manifest over the ``add`` archive (no `tritonsm build`) under ``root``."""
    (root / "spec.yaml").write_text(SPEC)
    (root / "add_model").mkdir()
    tarball = shutil.copy(add_tarball, root / "add.tar.gz")
    data = pathlib.Path(tarball).read_bytes()
    manifest = {"schema": SCHEMA_VERSION, "triton_version": "25.04", "models": {}, "endpoints": {"adder": {
        "kind": "single-model", "default_model": "add", "artifacts": [
            {"file": "add.tar.gz", "sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "models": ["add"]}]}}}
    (root / "manifest.json").write_text(json.dumps(manifest))
    return root / "spec.yaml", root / "manifest.json"
# The application's own credentials: the local servers check no signature, any key signs.
KEYS = {"aws_access_key_id": "app-key", "aws_secret_access_key": "app-secret"}


def app_client(service: str, url: str, region: str = REGION) -> Any:
    """A client as the application builds it, with only the endpoint URL changed; one attempt, so errors show."""
    return boto3.client(service, endpoint_url=url, region_name=region, **KEYS,
                        config=Config(retries={"total_max_attempts": 1}, max_pool_connections=50))


def split_s3_url(url: str) -> tuple[str, str]:
    bucket, _, key = url.removeprefix("s3://").partition("/")
    return bucket, key


def wait_for_object(s3: Any, *urls: str, timeout: float = 60.0) -> str:
    """The first of ``urls`` to exist, polled with head_object as an application polls for its answer."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for url in urls:
            bucket, key = split_s3_url(url)
            try:
                s3.head_object(Bucket=bucket, Key=key)
                return url
            except s3.exceptions.ClientError as error:
                if error.response["Error"]["Code"] not in ("404", "NoSuchKey"):
                    raise
        time.sleep(0.1)
    raise AssertionError(f"none of {urls} appeared within {timeout:g} s")


def read_object(s3: Any, url: str) -> bytes:
    bucket, key = split_s3_url(url)
    body: bytes = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    return body


def listed_objects(s3: Any, *folders: str) -> list[str]:
    """Every object URL under the ``s3://`` folders."""
    found = []
    for folder in folders:
        bucket, prefix = split_s3_url(folder)
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            found += [f"s3://{bucket}/{item['Key']}" for item in page.get("Contents", [])]
    return found


@dataclasses.dataclass(frozen=True)
class Audit:
    """What became of the accepted requests: each should have exactly one object, and no object be anyone else's."""

    accepted: int
    succeeded: int
    failed: int
    missing: list[str]     # inference ids without an object
    twice: list[str]       # inference ids with an answer and a failure, or an object listed twice
    strays: list[str]      # objects no accepted request was told about

    def __str__(self) -> str:
        return (f"accepted {self.accepted}, succeeded {self.succeeded}, failed {self.failed}, missing "
                f"{len(self.missing)}, twice {len(self.twice)}, strays {len(self.strays)}")


def audit(accepted: dict[str, tuple[str, str]], objects: Iterable[str]) -> Audit:
    """``accepted``: inference id -> (OutputLocation, FailureLocation) as InvokeEndpointAsync answered them;
    ``objects``: what a listing of both folders found."""
    owner = {url: (inference_id, kind) for inference_id, pair in accepted.items()
             for url, kind in zip(pair, ("output", "failure"))}
    seen: dict[str, list[str]] = collections.defaultdict(list)
    strays = []
    for url in objects:
        if url in owner:
            inference_id, kind = owner[url]
            seen[inference_id].append(kind)
        else:
            strays.append(url)
    kinds = [seen.get(inference_id, []) for inference_id in accepted]
    return Audit(len(accepted), sum(k == ["output"] for k in kinds), sum(k == ["failure"] for k in kinds),
                 [i for i in accepted if not seen.get(i)], [i for i in accepted if len(seen.get(i, [])) > 1], strays)


def max_overlap(intervals: Iterable[tuple[float, float]]) -> int:
    """The most intervals open at one moment (an end at the same moment as a start closes first)."""
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    open_now = most = 0
    for _, step in events:
        open_now += step
        most = max(most, open_now)
    return most


# Sleeps X[0] seconds and echoes X; each execution appends "start end" (wall clock) to the file named by the
# "log" parameter, so a test measures how many requests the container ran at once. Four instances: Triton could
# run four at a time, so only the queue keeps it lower.
SLOW_CONFIG = """\
backend: "python"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ]
parameters { key: "log" value: { string_value: "%s" } }
instance_group [ { kind: KIND_CPU count: 4 } ]
"""

SLOW_MODEL = """\
import json
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.log = json.loads(args["model_config"])["parameters"]["log"]["string_value"]

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            start = time.time()
            time.sleep(float(x[0]))
            with open(self.log, "a") as log:
                log.write(f"{start} {time.time()}\\n")
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x)]))
        return responses
"""


def write_slow(repository: pathlib.Path, log: pathlib.Path, name: str = "slow") -> None:
    models.write_model(repository, name, SLOW_CONFIG % log, {"model.py": SLOW_MODEL})


def slow_body(seconds: float) -> bytes:
    return json.dumps({"inputs": [{"name": "X", "shape": [1], "datatype": "FP32", "data": [seconds]}]}).encode()


def intervals(log: pathlib.Path) -> list[tuple[float, float]]:
    if not log.exists():
        return []
    return [(float(a), float(b)) for a, b in (line.split() for line in log.read_text().splitlines())]
