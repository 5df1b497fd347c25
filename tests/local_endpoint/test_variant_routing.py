"""Variants without Triton: the weighted choice, TargetVariant and its refusals, the capture records and their files,
and the shadow's copies (against a stub container), each deterministic (seeded choices, no timing asserts)."""
from __future__ import annotations

import datetime
import json
import pathlib
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

import pytest

from deployment_spec.sections.endpoint import EndpointKind
from local_endpoint.errors import LocalEndpointError
from local_endpoint.runtime import errors
from local_endpoint.runtime.routes import RuntimeTarget, invoke
from local_endpoint.variants.capture import CaptureLog, Exchange, inference_time, record
from local_endpoint.variants.shadow import Copy, ShadowWorker
from local_endpoint.variants.traffic import Route, Sampling, Traffic

from variant_fixtures import records

NAME = "Tests-dev-ab"
AT = datetime.datetime(2026, 11, 28, 5, 10, 0, 123456, datetime.timezone.utc)
TARGET = RuntimeTarget(NAME, EndpointKind.SINGLE_MODEL, 1, "AllTraffic")


def traffic(shares: dict[str, float], **kwargs) -> Traffic:
    routes = [Route(name, 1000 + i, share, f"{name}.log") for i, (name, share) in enumerate(shares.items())]
    return Traffic(NAME, routes, rng=random.Random(7), **kwargs)


def refusal(reply) -> tuple[int, str, str]:
    assert isinstance(reply, errors.RuntimeReply)
    return reply.status, reply.headers["x-amzn-ErrorType"], json.loads(reply.body)["Message"]


# --- routing ----------------------------------------------------------------------------------------------------


def test_requests_split_by_weight_and_each_goes_to_its_variants_server() -> None:
    routing = traffic({"A": 0.8, "B": 0.2, "C": 0.0})
    chosen = [routing.choose(TARGET, {}) for _ in range(5000)]
    by_name = {name: [c for c in chosen if isinstance(c, RuntimeTarget) and c.variant == name] for name in "ABC"}
    assert 0.77 < len(by_name["A"]) / 5000 < 0.83 and len(by_name["C"]) == 0   # seeded: the same every run
    assert {(c.port, c.log) for c in by_name["B"]} == {(1001, "B.log")}


def test_target_variant_pins_a_variant_even_of_weight_zero() -> None:
    routing = traffic({"A": 1.0, "C": 0.0})
    pinned = [routing.choose(TARGET, {"x-amzn-sagemaker-target-variant": "C"}) for _ in range(50)]
    assert {(p.variant, p.port) for p in pinned if isinstance(p, RuntimeTarget)} == {("C", 1001)}
    assert len(pinned) == 50


def test_an_unknown_target_variant_is_a_validation_error_naming_the_variants() -> None:
    reply = traffic({"A": 0.5, "B": 0.5}).choose(TARGET, {"x-amzn-sagemaker-target-variant": "b"})
    assert refusal(reply) == (400, "ValidationError", "TargetVariant b is not a production variant of endpoint "
                                                      "Tests-dev-ab; pass one of: A, B, or leave TargetVariant out to "
                                                      "route by the variants' weights")


def test_the_shadow_cannot_be_targeted() -> None:
    shadow = ShadowWorker(NAME, RuntimeTarget(NAME, EndpointKind.SINGLE_MODEL, 1, "Shadow"), None)
    reply = traffic({"Prod": 1.0}, shadow=shadow).choose(TARGET, {"x-amzn-sagemaker-target-variant": "Shadow"})
    assert refusal(reply) == (400, "ValidationError", "TargetVariant Shadow of endpoint Tests-dev-ab is its shadow "
                                                      "variant, which only receives copies of the production "
                                                      "variant's requests and never answers a caller; pass a "
                                                      "production variant (Prod) or leave TargetVariant out")


def test_an_endpoint_without_variants_takes_only_its_own_variant_name() -> None:
    # Refused before anything is sent: port 1 has no server.
    reply = invoke({NAME: TARGET}, NAME, {"X-Amzn-SageMaker-Target-Variant": "Blue"}, b"{}")
    assert refusal(reply) == (400, "ValidationError", "TargetVariant Blue is not a production variant of endpoint "
                                                      "Tests-dev-ab; pass one of: AllTraffic, or leave TargetVariant "
                                                      "out to route by the variants' weights")


# --- capture records ----------------------------------------------------------------------------------------------


def test_a_record_has_sagemakers_shape_text_as_text_and_binary_as_base64() -> None:
    exchange = Exchange(NAME, "A", "id-1", AT, "application/json", b'{"x": 1}',
                        "application/octet-stream", b"\xff\x00", 12.3456, inference_id="mine")
    assert record(exchange) == {
        "captureData": {
            "endpointInput": {"observedContentType": "application/json", "mode": "INPUT", "data": '{"x": 1}',
                              "encoding": "JSON"},
            "endpointOutput": {"observedContentType": "application/octet-stream", "mode": "OUTPUT", "data": "/wA=",
                               "encoding": "BASE64"}},
        "eventMetadata": {"eventId": "id-1", "inferenceTime": "2026-11-28T05:10:00.123Z", "inferenceId": "mine",
                          "tritonsmLatencyMs": 12.346},
        "eventVersion": "0"}


def test_a_failed_call_has_no_output_and_tritons_message() -> None:
    exchange = Exchange(NAME, "Shadow", "id-2", AT, "application/json", b"{}", error="unexpected inference input")
    assert record(exchange)["captureData"] == {"endpointInput": {
        "observedContentType": "application/json", "mode": "INPUT", "data": "{}", "encoding": "JSON"}}
    assert record(exchange)["eventMetadata"]["tritonsmError"] == "unexpected inference input"


def test_inference_time_is_utc_with_milliseconds() -> None:
    eastern = AT.astimezone(datetime.timezone(datetime.timedelta(hours=-5)))
    assert inference_time(eastern) == "2026-11-28T05:10:00.123Z"


def test_concurrent_records_land_whole_in_sagemakers_folders(tmp_path: pathlib.Path) -> None:
    log = CaptureLog(tmp_path).start()

    def write(thread: int) -> None:
        for i in range(250):
            log.write(Exchange(NAME, "AB"[thread % 2], f"{thread}-{i}", AT, "application/json",
                               json.dumps({"pad": "x" * 5000, "i": i}).encode(), "application/json", b"{}"))

    threads = [threading.Thread(target=write, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    log.stop()
    files = sorted(p.relative_to(tmp_path).parent.as_posix() for p in tmp_path.rglob("*.jsonl"))
    assert files == [f"{NAME}/A/2026/11/28/05", f"{NAME}/B/2026/11/28/05"]
    found = records(tmp_path, NAME, "A") + records(tmp_path, NAME, "B")   # every line parses
    assert sorted(r["eventMetadata"]["eventId"] for r in found) == sorted(f"{t}-{i}" for t in range(8)
                                                                         for i in range(250))
    assert (log.written, log.dropped) == (2000, 0)


def test_a_reader_sees_each_record_while_serving_goes_on(tmp_path: pathlib.Path) -> None:
    log = CaptureLog(tmp_path).start()
    try:
        log.write(Exchange(NAME, "A", "first", AT, "application/json", b"{}"))
        deadline = time.monotonic() + 30
        while not records(tmp_path, NAME, "A") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [r["eventMetadata"]["eventId"] for r in records(tmp_path, NAME, "A")] == ["first"]
    finally:
        log.stop()


def test_a_full_queue_drops_and_counts_instead_of_waiting(tmp_path: pathlib.Path) -> None:
    log = CaptureLog(tmp_path, max_pending=1)   # not started: nothing takes records off the queue
    for i in range(3):
        log.write(Exchange(NAME, "A", str(i), AT, "application/json", b"{}"))
    assert log.dropped == 2
    # Bodies may be 6 MB each: the bytes waiting are bounded too.
    by_size = CaptureLog(tmp_path, max_pending_bytes=10)
    for i in range(3):
        by_size.write(Exchange(NAME, "A", str(i), AT, "application/json", b"12345678"))
    assert by_size.dropped == 2


def test_an_unwritable_capture_dir_names_the_flag(tmp_path: pathlib.Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    with pytest.raises(LocalEndpointError) as caught:
        CaptureLog(blocked / "capture").start()
    assert str(caught.value) == (f"--capture-dir {blocked / 'capture'}: cannot write there (Not a directory); pass a "
                                 "folder you can write to with --capture-dir DIR")


# --- the shadow's copies, against a stub container ------------------------------------------------------------------


class Stub(ThreadingHTTPServer):
    daemon_threads = True
    status, body, delay = 200, b'{"outputs": []}', 0.0


class StubHandler(BaseHTTPRequestHandler):
    server: Stub

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        time.sleep(self.server.delay)
        self.send_response(self.server.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.server.body)))
        self.end_headers()
        self.wfile.write(self.server.body)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def stub() -> Iterator[Stub]:
    server = Stub(("127.0.0.1", 0), StubHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def settled(worker: ShadowWorker, copies: int) -> None:
    """Wait until the worker has called the stub for every copy (stopping drops what is still queued)."""
    deadline = time.monotonic() + 60
    while worker.sent + worker.failed < copies and time.monotonic() < deadline:
        time.sleep(0.02)


def shadow_of(stub: Stub, log: CaptureLog | None, **kwargs) -> ShadowWorker:
    return ShadowWorker(NAME, RuntimeTarget(NAME, EndpointKind.SINGLE_MODEL, stub.server_address[1], "Shadow"), log,
                        **kwargs)


def test_copied_requests_are_captured_on_both_sides_under_one_event_id(stub: Stub, tmp_path: pathlib.Path) -> None:
    log = CaptureLog(tmp_path).start()
    told: list[str] = []
    worker = shadow_of(stub, log, say=told.append).start()
    routing = traffic({"Prod": 1.0}, shadow=worker, capture=log, sampling=Sampling(shadow_percent=100))
    answer = errors.RuntimeReply(200, {"Content-Type": "application/json"}, b'{"outputs": [2]}')
    for i in range(20):
        chosen = routing.choose(TARGET, {})
        assert isinstance(chosen, RuntimeTarget)
        routing.answered(chosen, {"content-type": "application/json"}, json.dumps({"i": i}).encode(), answer,
                         AT.timestamp(), 1.0)
    settled(worker, 20)
    worker.check_running()   # nothing dropped: nothing told while serving
    worker.stop()
    log.stop()
    # The twin of the drops told below: the line at the stop says none was lost.
    assert told == ["shadow Shadow: 0 of 20 copies dropped (queue full, size 64); 20 answered, 0 failed"]
    production, shadow = records(tmp_path, NAME, "Prod"), records(tmp_path, NAME, "Shadow")
    assert len(production) == len(shadow) == 20
    assert {r["eventMetadata"]["eventId"] for r in production} == {r["eventMetadata"]["eventId"] for r in shadow}
    assert {r["captureData"]["endpointOutput"]["data"] for r in shadow} == {'{"outputs": []}'}
    assert (worker.sent, worker.failed, worker.dropped) == (20, 0, 0)


def test_a_failed_shadow_call_is_captured_with_tritons_message(stub: Stub, tmp_path: pathlib.Path) -> None:
    stub.status, stub.body = 400, b'{"error":"unexpected inference input \'X\' for model \'times3\'"}'
    log = CaptureLog(tmp_path).start()
    worker = shadow_of(stub, log).start()
    worker.send(Copy("id-9", {"content-type": "application/json"}, b"{}"))
    settled(worker, 1)
    worker.stop()
    log.stop()
    (found,) = records(tmp_path, NAME, "Shadow")
    assert "endpointOutput" not in found["captureData"]
    assert found["eventMetadata"]["eventId"] == "id-9"
    assert found["eventMetadata"]["tritonsmError"] == "unexpected inference input 'X' for model 'times3'"
    assert worker.failed == 1


def test_a_shadow_that_cannot_keep_up_loses_copies_never_the_callers_time(stub: Stub) -> None:
    stub.delay = 1.0
    worker = shadow_of(stub, None, max_pending=2, workers=1).start()
    try:
        accepted = [worker.send(Copy(str(i), {}, b"{}")) for i in range(10)]
    finally:
        worker.stop()
    # One in flight, two queued; the rest dropped at once (send never waits), and the queued two at the stop.
    assert accepted.count(False) >= 7
    assert worker.dropped + worker.sent + worker.failed == 10


def test_every_copy_a_full_queue_drops_is_counted_and_told_while_serving_and_at_the_stop(stub: Stub) -> None:
    # Not started: nothing takes a copy off the queue, so which copies are dropped does not depend on timing.
    told: list[str] = []
    worker = shadow_of(stub, None, max_pending=2, say=told.append, report_every_s=0)
    accepted = [worker.send(Copy(str(i), {}, b"{}")) for i in range(10)]
    assert accepted == [True, True] + [False] * 8
    worker.check_running()
    worker.check_running()   # no new drop: nothing more told
    worker.send(Copy("10", {}, b"{}"))
    worker.check_running()
    worker.stop()
    worker.stop()            # an endpoint may be stopped twice: told once
    assert told == ["shadow Shadow: 8 of 10 copies dropped (queue full, size 2)",
                    "shadow Shadow: 9 of 11 copies dropped (queue full, size 2)",
                    "shadow Shadow: 9 of 11 copies dropped (queue full, size 2), 2 more dropped at the stop; 0 "
                    "answered, 0 failed; a larger --shadow-queue-size, or a lower shadow.sampling_percent, keeps more"]
    assert (worker.offered, worker.dropped, worker.queue_full) == (11, 11, 9)


def test_drops_are_told_at_most_every_report_interval(stub: Stub) -> None:
    told: list[str] = []
    worker = shadow_of(stub, None, max_pending=1, say=told.append, report_every_s=3600)
    for i in range(3):
        worker.send(Copy(str(i), {}, b"{}"))
        worker.check_running()
    assert told == ["shadow Shadow: 1 of 2 copies dropped (queue full, size 1)"]   # then quiet for the hour


@pytest.mark.parametrize("size", [0, 1025])
def test_a_queue_size_out_of_range_is_refused_naming_the_flag(stub: Stub, size: int) -> None:
    with pytest.raises(LocalEndpointError) as refused:
        shadow_of(stub, None, max_pending=size)
    assert str(refused.value) == (f"--shadow-queue-size {size}: give a number of copies from 1 to 1024 (each waiting "
                                  "copy holds its request body, up to 6 MB); the default is 64")


@pytest.mark.parametrize("size", [1, 1024])
def test_a_queue_size_in_range_is_the_queue_s_size(stub: Stub, size: int) -> None:
    worker = shadow_of(stub, None, max_pending=size, say=lambda line: None)
    assert [worker.send(Copy(str(i), {}, b"{}")) for i in range(size + 1)] == [True] * size + [False]


def test_data_capture_samples_production_requests_with_its_side_only(tmp_path: pathlib.Path) -> None:
    log = CaptureLog(tmp_path).start()
    routing = traffic({"A": 1.0}, capture=log, sampling=Sampling(capture_percent=50, capture_output=False))
    answer = errors.RuntimeReply(200, {"Content-Type": "application/json"}, b"{}")
    for _ in range(400):
        chosen = routing.choose(TARGET, {})
        assert isinstance(chosen, RuntimeTarget)
        routing.answered(chosen, {"content-type": "application/json"}, b"{}", answer, AT.timestamp(), 1.0)
    log.stop()
    found = records(tmp_path, NAME, "A")
    assert 150 < len(found) < 250   # seeded
    assert {tuple(r["captureData"]) for r in found} == {("endpointInput",)}
