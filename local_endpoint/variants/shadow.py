"""The copies of production requests sent to the shadow variant, after and apart from the caller's answer.

SageMaker's developer guide ("Shadow tests"): the shadow variant gets a copy of the inference requests in real time
and "only the responses of the production variant are returned to the calling application". Locally the request
thread only queues the copy (``send``: never blocks); worker threads call the shadow's server and capture its
answer, or its failure, under the production record's eventId. A full queue drops the copy and counts it, as a
shadow that cannot keep up must not slow down production.
"""
from __future__ import annotations

import dataclasses
import datetime
import queue
import socket
import threading
import time
from typing import Mapping, Optional

from local_endpoint.runtime.routes import INVOKE_TIMEOUT, RuntimeTarget, send_to_container
from local_endpoint.variants.capture import CaptureLog, Exchange, triton_message

MAX_PENDING = 64    # copies waiting for the shadow's server (each holds its body, up to 6 MB)
WORKERS = 4         # copies in flight at once (Triton runs several requests at a time)
_STOP = object()


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
    queued (counted in ``dropped``) and waits for the ones in flight.
    """

    def __init__(self, endpoint: str, target: RuntimeTarget, capture: Optional[CaptureLog], *,
                 timeout: float = INVOKE_TIMEOUT, max_pending: int = MAX_PENDING, workers: int = WORKERS) -> None:
        self.endpoint, self.target, self.capture, self.timeout = endpoint, target, capture, timeout
        self.sent = self.failed = self.dropped = 0
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
        if not self._stopping.is_set():
            try:
                self._queue.put_nowait(copy)
                return True
            except queue.Full:
                pass
        self._count("dropped")
        return False

    def check_running(self) -> None:
        """A shadow's failures are captured, never raised: production serves on."""

    def stop(self) -> None:
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
