"""`tritonsm bench drain --endpoint NAME`: how fast one instance empties a full asynchronous queue.

An asynchronous endpoint scales on its backlog per instance, so the number a scaling target needs is the drain
rate: answers per second one instance writes while requests wait. Each round serves the endpoint as `tritonsm
serve` does (the real Triton server, the local queue, the local S3) with one
``max_concurrent_invocations_per_instance``, queues ``requests`` copies of one request at once through
``InvokeEndpointAsync`` (boto3, as an application calls it), and times until every answer or failure object is
in S3. The rate is requests / seconds from the first call to the last object; the figures are this machine's,
and say so.
"""
from __future__ import annotations

import dataclasses
import os
import time
import types
from typing import Any, Callable, Optional

POLL_SECONDS = 0.05


@dataclasses.dataclass(frozen=True)
class DrainRun:
    """One round: ``requests`` queued at once, drained at ``concurrency`` per instance."""

    concurrency: int
    requests: int
    succeeded: int
    failed: int
    seconds: float

    @property
    def drain_rps(self) -> float:
        """Answers (and failures) written per second."""
        return (self.succeeded + self.failed) / self.seconds if self.seconds else 0.0


def drain(runtime: Any, s3: Any, *, endpoint_name: str, input_location: str, content_type: str, requests: int,
          concurrency: int, timeout_s: float) -> DrainRun:
    """Queues ``requests`` calls of ``input_location`` and waits for each one's answer or failure object.

    ``runtime``, ``s3``: boto3 clients (``sagemaker-runtime`` and ``s3``), pointed at a local runtime or at AWS.
    """
    started = time.monotonic()
    answers, failures = {}, {}
    for i in range(requests):
        accepted = runtime.invoke_endpoint_async(EndpointName=endpoint_name, InputLocation=input_location,
                                                 ContentType=content_type, InferenceId=f"drain-{i}")
        answers[accepted["OutputLocation"]] = i
        failures[accepted["FailureLocation"]] = i
    done_ok: set[int] = set()
    done_failed: set[int] = set()
    while len(done_ok) + len(done_failed) < requests and time.monotonic() - started < timeout_s:
        done_ok |= {answers[url] for url in _existing(s3, answers)}
        done_failed |= {failures[url] for url in _existing(s3, failures)}
        time.sleep(POLL_SECONDS)
    return DrainRun(concurrency, requests, len(done_ok), len(done_failed), time.monotonic() - started)


def _existing(s3: Any, locations: dict[str, int]) -> set[str]:
    """Which of ``locations`` (``s3://bucket/key``) exist, one listing per folder they are in."""
    folders: dict[tuple[str, str], set[str]] = {}
    for url in locations:
        bucket, key = url.removeprefix("s3://").split("/", 1)
        folders.setdefault((bucket, key.rsplit("/", 1)[0] + "/"), set()).add(url)
    found = set()
    for (bucket, prefix), wanted in folders.items():
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            found |= {f"s3://{bucket}/{item['Key']}" for item in page.get("Contents", [])} & wanted
    return found


@dataclasses.dataclass(frozen=True)
class DrainResult:
    endpoint: str
    model: str          # what was measured, for capacity.json's measured_on
    runs: list[DrainRun]


def measure(spec_path: Any, endpoint: str, *, environment: Optional[str], manifest: Any, input_path: Any,
            text: str, image: Optional[list], cpu_stand_in: bool, binary: bool, concurrencies: list[int],
            requests: int, timeout_s: float, log: Callable[[str], None]) -> DrainResult:
    """One round per concurrency against the spec endpoint's own built model, served locally."""
    from deployment_spec import load_spec
    from local_endpoint import encode_request
    from tritonsm.benchmarking.load_local import _spec_endpoint

    settings = load_spec(spec_path).endpoints[endpoint].asynchronous
    if settings is None:
        raise ValueError(f"endpoint {endpoint} is not asynchronous (run_drain checks it first)")
    served = _spec_endpoint(types.SimpleNamespace(spec=spec_path, endpoint=endpoint, environment=environment,
                                                  manifest=manifest, input=input_path, text=text, image=image))
    request = encode_request(served.tensors, binary=binary)
    runs = []
    for concurrency in concurrencies:
        run = _round(served, dataclasses.replace(settings, max_concurrent_invocations_per_instance=concurrency),
                     endpoint, request, cpu_stand_in=cpu_stand_in, requests=requests, timeout_s=timeout_s, log=log)
        log(f"  concurrency {concurrency}: {run.succeeded + run.failed}/{requests} done in {run.seconds:.1f} s, "
            f"{run.drain_rps:.2f} answers/s, {run.failed} failed")
        runs.append(run)
    what = (f"local CPU ({os.cpu_count()} cores), endpoint {endpoint}'s own model {served.default_model}"
            + (" as a CPU stand-in" if cpu_stand_in else ""))
    return DrainResult(endpoint, what, runs)


def _round(served: Any, settings: Any, endpoint: str, request: Any, *, cpu_stand_in: bool, requests: int,
           timeout_s: float, log: Callable[[str], None]) -> DrainRun:
    from local_endpoint import LocalRuntime, NamedEndpoint, SingleModelEndpoint
    from local_endpoint.client.local_clients import local_client
    from local_endpoint.asynchronous import AsyncSetup
    from deployment_spec.sections.endpoint import EndpointKind

    server = SingleModelEndpoint(served.tarball, default_model=served.default_model, env=served.env,
                                 cpu_stand_in=cpu_stand_in, triton_version=served.triton_version)
    named = NamedEndpoint(endpoint, EndpointKind.SINGLE_MODEL, server, asynchronous=AsyncSetup(settings, endpoint))
    with LocalRuntime([named]) as runtime:
        assert runtime.asynchronous is not None  # an asynchronous endpoint starts its queue
        queue = runtime.asynchronous.queues[endpoint]
        s3 = local_client("s3", runtime.asynchronous.aws.url, queue.locations.success_topic.region, attempts=3)
        key = f"{queue.locations.input.key}drain-request"
        s3.put_object(Bucket=queue.locations.input.bucket, Key=key, Body=request.body)
        client = local_client("sagemaker-runtime", runtime.url, queue.locations.success_topic.region, attempts=3)
        log(f"  concurrency {settings.max_concurrent_invocations_per_instance}: {requests} requests queued at "
            f"{runtime.url}")
        return drain(client, s3, endpoint_name=endpoint, input_location=f"s3://{queue.locations.input.bucket}/{key}",
                     content_type=request.content_type, requests=requests,
                     concurrency=settings.max_concurrent_invocations_per_instance, timeout_s=timeout_s)


def markdown(result: DrainResult) -> str:
    lines = [f"Drain of endpoint {result.endpoint} ({result.model})", "",
             "| concurrency per instance | requests | answered | failed | seconds | answers/s |",
             "|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r.concurrency} | {r.requests} | {r.succeeded} | {r.failed} | {r.seconds:.1f} | {r.drain_rps:.2f} |"
              for r in result.runs]
    return "\n".join(lines) + "\n"


def plot(result: DrainResult, path: Any) -> None:
    """Answers per second against the concurrency per instance (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 4))
    axes.plot([r.concurrency for r in result.runs], [r.drain_rps for r in result.runs], marker="o")
    axes.set_xlabel("MaxConcurrentInvocationsPerInstance")
    axes.set_ylabel("answers per second (one instance)")
    axes.set_title(f"Drain rate: {result.endpoint}")
    axes.grid(True, alpha=0.3)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
