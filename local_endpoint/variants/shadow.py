"""The copies of production requests sent to the shadow variant, after and apart from the caller's answer.

SageMaker's developer guide ("Shadow tests"): the shadow variant gets a copy of the inference requests in real time
and "only the responses of the production variant are returned to the calling application". Locally the request
thread only queues the copy (``send``: never blocks); worker threads call the shadow's server and capture its
answer, or its failure, under the production record's eventId. A full queue drops the copy and counts it, as a
shadow that cannot keep up must not slow down production; the drops are told on the serve console while they
happen (at most every ``REPORT_EVERY_S``) and in a line at the stop, since a comparison that silently misses a
third of the copies misleads (67 of 201 were dropped by a cold shadow at 100 % sampling, with nothing said).
"""
from __future__ import annotations

import dataclasses
import datetime
import queue
import socket
import threading
import time
from typing import Callable, Mapping, Optional

from local_endpoint.errors import LocalEndpointError
from local_endpoint.runtime.routes import INVOKE_TIMEOUT, RuntimeTarget, send_to_container
from local_endpoint.variants.capture import CaptureLog, Exchange, triton_message

MAX_PENDING = 64    # copies waiting for the shadow's server (each holds its body, up to 6 MB): --shadow-queue-size
MOST_PENDING = 1024  # 1024 bodies of InvokeEndpoint's 6 MB at most: 6 GB of memory held for the shadow
WORKERS = 4         # copies in flight at once (Triton runs several requests at a time)
REPORT_EVERY_S = 10.0  # while copies are dropped, a line on the console at most this often
_STOP = object()


def check_queue_size(size: int) -> int:
    """``size`` if it is a queue size the worker takes, else a LocalEndpointError naming the flag."""
    if not 1 <= size <= MOST_PENDING:
        raise LocalEndpointError(f"--shadow-queue-size {size}: give a number of copies from 1 to {MOST_PENDING} "
                                 "(each waiting copy holds its request body, up to 6 MB); the default is "
                                 f"{MAX_PENDING}")
    return size


def _say(line: str) -> None:
    print(line, flush=True)


@dataclasses.dataclass(frozen=True)
class Copy:
    """One production request copied to the shadow."""

    event_id: str
    headers: Mapping[str, str]   # names in lower case
    body: bytes
    inference_id: Optional[str] = None


class ShadowWorker:
    """Sends copies to ``target`` (the shadow's server) from background threads, capturing each answer.

    ``check_running`` and ``stop`` make it one of an endpoint's servers: stopping drops the copies still
    queued (counted in ``dropped``) and waits for the ones in flight. ``say`` prints the drops (``report``):
    every ``report_every_s`` while copies are dropped, and once at the stop.
    """

    def __init__(self, endpoint: str, target: RuntimeTarget, capture: Optional[CaptureLog], *,
                 timeout: float = INVOKE_TIMEOUT, max_pending: int = MAX_PENDING, workers: int = WORKERS,
                 say: Callable[[str], None] = _say, report_every_s: float = REPORT_EVERY_S) -> None:
        self.endpoint, self.target, self.capture, self.timeout = endpoint, target, capture, timeout
        self.max_pending = check_queue_size(max_pending)
        # offered: every copy sent to it; dropped: those it lost, queue_full of them at the door (the rest at the stop)
        self.offered = self.sent = self.failed = self.dropped = self.queue_full = 0
        self._say, self._report_every_s = say, report_every_s
        self._told_full, self._told_at = 0, -float("inf")
        self._stopped = False
        self._queue: queue.Queue[object] = queue.Queue(max_pending)
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, name=f"tritonsm-shadow-{i}", daemon=True)
                         for i in range(workers)]
        self._stopping = threading.Event()

    def start(self) -> ShadowWorker:
        for thread in self._threads:
            thread.start()
        return self

    def send(self, copy: Copy) -> bool:
        """Queue ``copy``; False (and counted) when the queue is full or the worker stops."""
        self._count("offered")
        if not self._stopping.is_set():
            try:
                self._queue.put_nowait(copy)
                return True
            except queue.Full:
                self._count("queue_full")
        self._count("dropped")
        return False

    def report(self) -> str:
        """``shadow <name>: N of M copies dropped (queue full, size Q)``: what the console is told."""
        return (f"shadow {self.target.variant}: {self.queue_full} of {self.offered} copies dropped (queue full, size "
                f"{self.max_pending})")

    def check_running(self) -> None:
        """A shadow's failures are captured, never raised: production serves on. New drops are told, at most
        every ``report_every_s``."""
        now = time.monotonic()
        if self.queue_full > self._told_full and now - self._told_at >= self._report_every_s:
            self._told_full, self._told_at = self.queue_full, now
            self._say(self.report())

    def stop(self) -> None:
        """Drops what is still queued, waits for the copies in flight, then says what became of every copy (once:
        an endpoint may be stopped twice)."""
        self._stop_workers()
        if self._stopped:
            return
        self._stopped = True
        at_stop = self.dropped - self.queue_full
        line = self.report() + (f", {at_stop} more dropped at the stop" if at_stop else "")
        line += f"; {self.sent} answered, {self.failed} failed"
        if self.queue_full:
            line += "; a larger --shadow-queue-size, or a lower shadow.sampling_percent, keeps more"
        self._say(line)

    def _stop_workers(self) -> None:
        self._stopping.set()
        while True:   # what is still queued is dropped: the shadow's server is about to stop
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not _STOP:
                self._count("dropped")
        for thread in self._threads:
            if thread.is_alive():
                self._queue.put(_STOP)
        for thread in self._threads:
            if thread.is_alive():
                thread.join()

    def _count(self, what: str) -> None:
        with self._lock:
            setattr(self, what, getattr(self, what) + 1)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            assert isinstance(item, Copy)
            self._call(item)

    def _call(self, copy: Copy) -> None:
        at = datetime.datetime.now(datetime.timezone.utc)
        started = time.perf_counter()
        output_type, output, error = "", None, None
        try:
            reply = send_to_container(self.target, copy.headers, copy.body, self.timeout)
            if reply.status >= 400:
                error = triton_message(reply.body)
            else:
                output_type, output = reply.content_type, reply.body
        except (socket.timeout, TimeoutError):
            error = f"the shadow's server did not answer within {self.timeout:g} s"
        except OSError as failure:
            error = f"the shadow's server did not answer: {failure}"
        latency = (time.perf_counter() - started) * 1000
        self._count("failed" if error is not None else "sent")
        if self.capture is not None:
            self.capture.write(Exchange(
                self.endpoint, self.target.variant, copy.event_id, at, copy.headers.get("content-type", ""),
                copy.body, output_type, output, latency, error, copy.inference_id))
