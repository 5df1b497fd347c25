"""The asynchronous service on moto's real server, in front of a stand-in container (a few lines of HTTP that answer
``/invocations`` after a delay): the spec's own buckets and topics, a container that does not answer, what
stopping does to requests waiting and in flight, each ending in exactly one object, and a supervised container
that goes down (its target says so while `tritonsm serve` would restart it): requests wait, and one it dropped is
sent again once."""
from __future__ import annotations

import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import psutil
import pytest

from deployment_spec.sections.asynchronous import Asynchronous
from deployment_spec.sections.endpoint import EndpointKind
from local_endpoint.asynchronous import AsyncService, AsyncSetup, work_queue
from local_endpoint.asynchronous.processing import Container
from local_endpoint.asynchronous.request import AsyncRequest, parse_request
from local_endpoint.errors import LocalEndpointError, ServerCrashedError
from local_endpoint.runtime.routes import RuntimeTarget
from local_endpoint.server.ports import free_port

from async_fixtures import app_client, listed_objects, read_object, wait_for_object

ACCOUNT = "111122223333"
OWN = Asynchronous(output_path="s3://answers-bucket/photos", failure_path="s3://answers-bucket/broken/",
                   success_topic_arn=f"arn:aws:sns:eu-west-1:{ACCOUNT}:photos-done",
                   error_topic_arn=f"arn:aws:sns:us-east-2:{ACCOUNT}:photos-failed")


class SlowContainer(BaseHTTPRequestHandler):
    """Answers ``POST /invocations`` with its body after ``delay`` seconds."""

    delay = 0.0

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        time.sleep(self.delay)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture
def stand_in() -> Iterator[RuntimeTarget]:
    SlowContainer.delay = 0.0
    server = ThreadingHTTPServer(("127.0.0.1", 0), SlowContainer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield RuntimeTarget("Tests-dev-photos", EndpointKind.SINGLE_MODEL, server.server_address[1], log="stand-in.log")
    server.shutdown()
    server.server_close()


def inline(body: bytes) -> AsyncRequest:
    request = parse_request({"X-Amzn-SageMaker-Content-Type": "application/json"}, body, Asynchronous())
    assert isinstance(request, AsyncRequest)
    return request


def test_the_specs_buckets_and_topics_exist_under_their_arns(stand_in) -> None:
    """The spec's own output and failure locations, and topics of its account in two regions, exactly as named."""
    service = AsyncService({"Tests-dev-photos": (AsyncSetup(OWN, "photos", "eu-west-1"),
                                                 Container(stand_in, lambda: None))}).start()
    try:
        s3 = app_client("s3", service.aws.url)
        assert {b["Name"] for b in s3.list_buckets()["Buckets"]} == {"answers-bucket", "tritonsm-local"}
        for arn in (OWN.success_topic_arn, OWN.error_topic_arn):
            assert arn is not None
            sns = app_client("sns", service.aws.url, region=arn.split(":")[3])   # SNS answers in the topic's region
            assert sns.get_topic_attributes(TopicArn=arn)["Attributes"]["TopicArn"] == arn
        job = service.queues["Tests-dev-photos"].submit(inline(b'{"x": 1}'))
        assert job.output.url.startswith("s3://answers-bucket/photos/")
        assert job.failure.url.startswith("s3://answers-bucket/broken/")
        assert wait_for_object(s3, job.output.url, job.failure.url) == job.output.url
        assert read_object(s3, job.output.url) == b'{"x": 1}'
    finally:
        service.stop()


def test_topics_of_two_accounts_are_refused_naming_both() -> None:
    other = Asynchronous(success_topic_arn="arn:aws:sns:eu-west-1:999988887777:done")
    target = RuntimeTarget("a", EndpointKind.SINGLE_MODEL, 1)
    with pytest.raises(LocalEndpointError) as refused:
        AsyncService({"a": (AsyncSetup(OWN, "a"), Container(target, lambda: None)),
                      "b": (AsyncSetup(other, "b"), Container(target, lambda: None))})
    assert str(refused.value) == (
        "the asynchronous endpoints' topics are in 2 AWS accounts (111122223333, 999988887777); the local SNS holds "
        "one: name topics of one account in success_topic_arn and error_topic_arn, or leave them out for local ones")


def test_a_container_that_does_not_answer_fails_the_request_saying_so() -> None:
    dead = RuntimeTarget("Tests-dev-gone", EndpointKind.SINGLE_MODEL, free_port(), log="gone.log")
    service = AsyncService({"Tests-dev-gone": (AsyncSetup(Asynchronous(), "gone"), Container(dead, lambda: None))})
    service.start()
    try:
        job = service.queues["Tests-dev-gone"].submit(inline(b"{}"))
        s3 = app_client("s3", service.aws.url)
        assert wait_for_object(s3, job.output.url, job.failure.url) == job.failure.url
        assert read_object(s3, job.failure.url).decode() == (
            "The model container did not answer ([Errno 111] Connection refused) although it still runs; see the "
            "server log gone.log and send the request again.")
    finally:
        service.stop()


def test_stopping_fails_what_waits_and_what_outlives_the_grace_once_each(stand_in, monkeypatch) -> None:
    """One worker, a container that takes 2 s: the first request is in flight past the grace, two wait. Each of
    the three gets one failure object; the first's late answer is not written after its failure."""
    monkeypatch.setattr(work_queue, "STOP_GRACE_S", 0.3)
    SlowContainer.delay = 2.0
    settings = Asynchronous(max_concurrent_invocations_per_instance=1)
    service = AsyncService({"Tests-dev-photos": (AsyncSetup(settings, "photos"), Container(stand_in, lambda: None))})
    service.start()
    try:
        queue = service.queues["Tests-dev-photos"]
        jobs = [queue.submit(inline(b"{}")) for _ in range(3)]
        while queue.waiting > 2:
            time.sleep(0.01)
        queue.stop()
        s3 = app_client("s3", service.aws.url)
        time.sleep(2.5)   # the first request's answer comes back now, after its failure was written
        where = queue.locations
        found = listed_objects(s3, where.output.url, where.failure.url)
        assert sorted(found) == sorted(job.failure.url for job in jobs)
        assert {read_object(s3, url).decode() for url in found} == {
            "The local endpoint stopped (tritonsm serve ended) before this request was answered. Send it again once "
            "the endpoint runs."}
    finally:
        service.stop()


def test_a_local_aws_server_that_dies_is_reported_with_its_exit_and_log() -> None:
    """What `tritonsm serve` checks twice a second: it stops, naming the crash, as for the Triton server."""
    service = AsyncService({}).start()
    try:
        (moto,) = [p for p in psutil.Process().children() if f"-p {service.aws.port}" in " ".join(p.cmdline())]
        moto.kill()   # reaped by its parent's check below (psutil's wait would take the exit status from it)
        with pytest.raises(ServerCrashedError) as crashed:
            for _ in range(100):
                service.check_running()
                time.sleep(0.1)
        assert str(crashed.value).startswith(
            "the local S3/SNS/SQS server (moto) exited unexpectedly with signal SIGKILL; last lines of its log "
            f"({service.aws.log_path}):\n$ {sys.executable} -m moto.server -H 127.0.0.1 -p {service.aws.port}")
        assert crashed.value.exit_code == -signal.SIGKILL
    finally:
        service.stop()


class DroppingContainer(BaseHTTPRequestHandler):
    """Answers ``POST /invocations`` with its body, but hangs up without an answer on the first ``drops`` requests,
    each time going down for ``down_s`` as a killed server does while `tritonsm serve` restarts it."""

    drops = 0
    down_s = 0.5
    seen = 0
    down: str | None = None
    _lock = threading.Lock()

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        with DroppingContainer._lock:
            DroppingContainer.seen += 1
            dropping = DroppingContainer.drops > 0
            DroppingContainer.drops -= dropping
        if dropping:
            DroppingContainer.down = f"the Triton server exited unexpectedly with signal SIGKILL ({DroppingContainer.seen})"
            threading.Timer(DroppingContainer.down_s, lambda: setattr(DroppingContainer, "down", None)).start()
            self.close_connection = True   # no answer: the connection drops, as when the server is killed
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: Any) -> None:
        pass


class DroppingHealth:
    """The stand-in's state as a supervisor reports it (``runtime.routes.Health``)."""

    supervised = True

    def down(self) -> str | None:
        return DroppingContainer.down


@pytest.fixture
def dropping() -> Iterator[RuntimeTarget]:
    DroppingContainer.drops, DroppingContainer.seen, DroppingContainer.down = 0, 0, None
    server = ThreadingHTTPServer(("127.0.0.1", 0), DroppingContainer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield RuntimeTarget("Tests-dev-photos", EndpointKind.SINGLE_MODEL, server.server_address[1], log="dropping.log",
                        health=DroppingHealth())
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("drops", [1, 2], ids=["once", "twice"])
def test_a_request_the_supervised_container_went_down_with_is_sent_again_once(dropping, drops) -> None:
    """The container (supervised: its target says when it is down) drops the request and goes down for a moment:
    sent again once it serves, the request is answered; dropped at its second try too, it fails naming both."""
    DroppingContainer.drops = drops
    service = AsyncService({"Tests-dev-photos": (AsyncSetup(Asynchronous(), "photos"),
                                                 Container(dropping, lambda: None))}).start()
    try:
        queue = service.queues["Tests-dev-photos"]
        job = queue.submit(inline(b'{"x": 1}'))
        s3 = app_client("s3", service.aws.url)
        where = queue.locations
        written = wait_for_object(s3, job.output.url, job.failure.url)
        time.sleep(1.0)   # nothing more comes: one object, and the model saw the request twice
        assert listed_objects(s3, where.output.url, where.failure.url) == [written]
        assert DroppingContainer.seen == 2
        if drops == 1:
            assert (written, read_object(s3, written)) == (job.output.url, b'{"x": 1}')
        else:
            assert (written, read_object(s3, written).decode()) == (job.failure.url, (
                "The model container went down twice while it had this request (the Triton server exited "
                "unexpectedly with signal SIGKILL (1); sent again once it was restarted, then the Triton server "
                "exited unexpectedly with signal SIGKILL (2)). It is not sent a third time: it may be what brings "
                "the server down. See the server log dropping.log, and send the request again once the cause is "
                "fixed."))
    finally:
        service.stop()


def test_requests_wait_while_the_supervised_container_is_down(dropping) -> None:
    """Down before the request is taken: no try is spent; the request goes once it serves again."""
    DroppingContainer.down = "the Triton server did not answer /ping with 200 for 30 s"
    threading.Timer(1.0, lambda: setattr(DroppingContainer, "down", None)).start()
    service = AsyncService({"Tests-dev-photos": (AsyncSetup(Asynchronous(), "photos"),
                                                 Container(dropping, lambda: None))}).start()
    try:
        job = service.queues["Tests-dev-photos"].submit(inline(b'{"x": 2}'))
        s3 = app_client("s3", service.aws.url)
        assert wait_for_object(s3, job.output.url, job.failure.url) == job.output.url
        assert DroppingContainer.seen == 1
    finally:
        service.stop()
