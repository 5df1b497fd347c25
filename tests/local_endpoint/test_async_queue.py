"""The queue in front of the real Triton server: concurrency measured at the container, the request TTL, the
invocation timeout, and nothing lost when the server is killed with requests queued and in flight.

The model sleeps as long as its input says and logs when it ran; Triton runs four instances of it, so only the
queue keeps the container below four at a time.
"""
from __future__ import annotations

import os
import re
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psutil
import pytest

import triton_model_fixtures as models
from deployment_spec.sections.asynchronous import Asynchronous
from deployment_spec.sections.endpoint import EndpointKind
from local_endpoint.asynchronous import AsyncSetup
from local_endpoint.asynchronous.processing import Container
from local_endpoint.asynchronous.locations import locations_for
from local_endpoint.asynchronous.request import AsyncRequest, parse_request
from local_endpoint.asynchronous.work_queue import AsyncQueue
from local_endpoint.endpoints.single_model import SingleModelEndpoint
from local_endpoint.runtime.local_runtime import LocalRuntime, NamedEndpoint
from local_endpoint.runtime.routes import RuntimeTarget

from async_fixtures import (REGION, app_client, audit, intervals, listed_objects, max_overlap, read_object, slow_body,
                            wait_for_object, write_slow)

SLOW = "Tests-dev-slow"


@pytest.fixture(scope="module")
def slow_model(module_tmp):
    root = module_tmp.mktemp("slow")
    log = root / "ran.log"
    write_slow(root / "repository", log)
    return models.pack(root / "repository", root / "slow.tar.gz"), log


def slow_runtime(tarball, log_dir, concurrency: int) -> LocalRuntime:
    settings = Asynchronous(max_concurrent_invocations_per_instance=concurrency, max_processing_s=60)
    server = SingleModelEndpoint(tarball, log_file=log_dir / f"slow-{concurrency}.log")
    return LocalRuntime([NamedEndpoint(SLOW, EndpointKind.SINGLE_MODEL, server,
                                       asynchronous=AsyncSetup(settings, "slow", REGION))])


@pytest.fixture(scope="module")
def runtime(slow_model, module_tmp):
    with slow_runtime(slow_model[0], module_tmp.mktemp("logs"), concurrency=2) as served:
        yield served


@pytest.fixture(scope="module")
def clients(runtime) -> tuple[Any, Any]:
    assert runtime.asynchronous is not None
    return app_client("sagemaker-runtime", runtime.url), app_client("s3", runtime.asynchronous.aws.url)


def send(sagemaker: Any, seconds: float, **extra: Any) -> dict[str, Any]:
    response: dict[str, Any] = sagemaker.invoke_endpoint_async(EndpointName=SLOW, ContentType="application/json",
                                                                Body=slow_body(seconds), **extra)
    return response


@pytest.mark.triton
def test_the_container_never_runs_more_than_the_concurrency_at_once(clients, slow_model) -> None:
    sagemaker, s3 = clients
    began = time.time()
    responses = [send(sagemaker, 0.4) for _ in range(8)]
    for response in responses:
        answered = wait_for_object(s3, response["OutputLocation"], response["FailureLocation"])
        assert answered == response["OutputLocation"]
    ran = [(start, end) for start, end in intervals(slow_model[1]) if start >= began]
    assert len(ran) == 8
    # Two at a time exactly: never more, and the queue did keep two busy (the measure sees overlap).
    assert max_overlap(ran) == 2


@pytest.mark.triton
def test_a_request_slower_than_its_invocation_timeout_fails_with_the_limit(clients, runtime) -> None:
    sagemaker, s3 = clients
    response = send(sagemaker, 3.0, InvocationTimeoutSeconds=1)
    assert wait_for_object(s3, response["OutputLocation"], response["FailureLocation"]) == response["FailureLocation"]
    log = runtime.targets[SLOW].log
    assert read_object(s3, response["FailureLocation"]).decode() == (
        "The model did not answer within the request's InvocationTimeoutSeconds of 1 s. Pass a larger "
        "InvocationTimeoutSeconds (at most 3600; the endpoint's default is asynchronous.max_processing_s), or make the "
        f"model answer sooner; see the server log {log}.")
    time.sleep(2.5)   # the container still runs it: let it finish before the next test measures


class Clock:
    """Monotonic time that a test moves on."""

    def __init__(self) -> None:
        self.ahead = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.ahead


def accepted(seconds: float, ttl: int) -> AsyncRequest:
    request = parse_request({"X-Amzn-SageMaker-Content-Type": "application/json",
                             "X-Amzn-SageMaker-RequestTTLSeconds": str(ttl)}, slow_body(seconds), Asynchronous())
    assert isinstance(request, AsyncRequest)
    return request


@pytest.mark.triton
def test_a_request_that_outlives_its_ttl_in_the_queue_fails_unseen_by_the_model(clients, runtime) -> None:
    """A queue of one in front of the same container, on a clock the test moves 61 s on while a request waits."""
    _, s3 = clients
    assert runtime.asynchronous is not None
    clock = Clock()
    locations = locations_for("slow-ttl", Asynchronous(), REGION)
    runtime.asynchronous.aws.provision(locations)
    target: RuntimeTarget = runtime.targets[SLOW]
    queue = AsyncQueue("Tests-dev-slow-ttl", Asynchronous(max_concurrent_invocations_per_instance=1), locations,
                       runtime.asynchronous.aws, Container(target, lambda: None), clock).start()
    try:
        first = queue.submit(accepted(1.0, ttl=60))
        deadline = time.monotonic() + 10
        while queue.waiting and time.monotonic() < deadline:   # the worker has taken the first request
            time.sleep(0.01)
        second = queue.submit(accepted(0.0, ttl=60))
        clock.ahead = 61.0
        assert wait_for_object(s3, second.output.url, second.failure.url) == second.failure.url
        reason = read_object(s3, second.failure.url).decode()
        waited = re.fullmatch(
            r"The request waited (\d+) s in the queue, longer than its RequestTTLSeconds of 60 s, and expired before "
            r"the model saw it. Send fewer requests at once, raise "
            r"asynchronous.max_concurrent_invocations_per_instance, or pass a larger RequestTTLSeconds "
            r"\(at most 21600\).", reason)
        assert waited and 61 <= int(waited.group(1)) <= 63, reason   # 61 s ahead, plus the first request's second
        assert wait_for_object(s3, first.output.url, first.failure.url) == first.output.url
    finally:
        queue.stop()


@pytest.mark.triton
def test_nothing_is_lost_when_the_container_is_killed_mid_queue(slow_model, module_tmp) -> None:
    """40 requests accepted 4 at a time, the Triton server killed (SIGKILL) while some run and the rest wait: each
    request has exactly one object, answered or failed saying the container exited."""
    with slow_runtime(slow_model[0], module_tmp.mktemp("killed"), concurrency=4) as runtime:
        assert runtime.asynchronous is not None
        sagemaker = app_client("sagemaker-runtime", runtime.url)
        s3 = app_client("s3", runtime.asynchronous.aws.url)
        with ThreadPoolExecutor(8) as pool:
            responses = list(pool.map(lambda n: send(sagemaker, 0.25, InferenceId=f"req-{n}"), range(40)))
        time.sleep(1.0)   # about 16 answered by now, 4 in flight, the rest queued
        server = runtime.endpoints[0].server
        assert isinstance(server, SingleModelEndpoint) and server.server_pid is not None
        server_group = server.server_pid   # its own session: the group id is its pid
        os.kill(server.server_pid, signal.SIGKILL)
        accepted_ = {r["InferenceId"]: (r["OutputLocation"], r["FailureLocation"]) for r in responses}
        for output, failure in accepted_.values():
            wait_for_object(s3, output, failure)
        where = runtime.asynchronous.queues[SLOW].locations
        found = audit(accepted_, listed_objects(s3, where.output.url, where.failure.url))
        print(f"nothing lost: {found}")
        assert (found.accepted, found.missing, found.twice, found.strays) == (40, [], [], [])
        assert found.succeeded + found.failed == 40 and found.succeeded >= 4 and found.failed >= 4
        a_failure = next(failure for output, failure in accepted_.values() if failure in
                         listed_objects(s3, where.failure.url))
        assert read_object(s3, a_failure).decode() == (
            "The model container exited (signal SIGKILL) before it answered; the local endpoint does not restart it. "
            f"See the server log {server.log_path}, fix the cause, run `tritonsm serve` again and send the request "
            "again.")
    # The killed server's Python-backend stubs, busy when it died, stay running re-parented to init unless stopping
    # the endpoint ends its process group (observed: four per run before it did).
    deadline = time.monotonic() + 10
    while _group_members(server_group):
        assert time.monotonic() < deadline, f"processes outlived the stopped endpoint: {_group_members(server_group)}"
        time.sleep(0.2)


def _group_members(group: int) -> list[int]:
    members = []
    for pid in psutil.pids():
        try:
            if os.getpgid(pid) == group and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                members.append(pid)
        except (ProcessLookupError, psutil.Error):
            continue
    return members
