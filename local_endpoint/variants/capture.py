"""Captured exchanges, written as SageMaker Data Capture writes them, for `tritonsm compare`.

Layout and record shape follow the developer guide ("Capture data from real-time endpoint", "View captured
data"): one JSON object per line in ``<endpoint name>/<variant name>/<YYYY>/<MM>/<DD>/<HH>/<file>.jsonl`` under the
capture folder (SageMaker: under ``DestinationS3Uri``), each ``{"captureData": {"endpointInput": ...,
"endpointOutput": ...}, "eventMetadata": {"eventId", "inferenceTime"}, "eventVersion": "0"}``; ``inferenceId``
is added when the caller passed one (botocore's sagemaker-runtime model, InvokeEndpointInput.InferenceId: "it is
added to the captured data when you enable data capture"). Local additions, in ``eventMetadata``:
``tritonsmLatencyMs`` (the Triton call's wall time) and, for a call that failed, ``tritonsmError`` (Triton's
message; ``endpointOutput`` is then absent). A shadow's record carries the ``eventId`` of the production record
of the request it copies: the pairing key.

A body that is UTF-8 text is kept as text (``"encoding": "JSON"``), anything else as base64 (``"BASE64"``).

One writer thread owns the files and flushes every record, so concurrent requests never interleave lines and a
reader sees whole lines only; callers hand records over a bounded queue and never wait for the disk.
"""
from __future__ import annotations

import base64
import dataclasses
import datetime
import json
import pathlib
import queue
import sys
import threading
import uuid
from typing import IO, Optional

from deployment_spec.sections.variants import LOCAL_CAPTURE_DIR
from local_endpoint.errors import LocalEndpointError

DEFAULT_CAPTURE_DIR = pathlib.Path(LOCAL_CAPTURE_DIR)
# Records waiting for the disk; past either bound a record is dropped and counted (a body may be 6 MB).
MAX_PENDING = 10_000
MAX_PENDING_BYTES = 256 * 1024 * 1024
_STOP = object()


@dataclasses.dataclass(frozen=True)
class Exchange:
    """One call to one variant as captured: what went in, what came out (or the error), when and how long."""

    endpoint: str               # EndpointName
    variant: str
    event_id: str
    at: datetime.datetime       # UTC, when the variant was called
    input_type: str
    input: Optional[bytes]      # None: not captured (data_capture's capture: output)
    output_type: str = ""
    output: Optional[bytes] = None
    latency_ms: float = 0.0
    error: Optional[str] = None
    inference_id: Optional[str] = None


def record(exchange: Exchange) -> dict[str, object]:
    """The JSON object of one line."""
    data: dict[str, object] = {}
    if exchange.input is not None:
        data["endpointInput"] = _payload(exchange.input_type, exchange.input, "INPUT")
    if exchange.output is not None and exchange.error is None:
        data["endpointOutput"] = _payload(exchange.output_type, exchange.output, "OUTPUT")
    metadata: dict[str, object] = {"eventId": exchange.event_id, "inferenceTime": inference_time(exchange.at)}
    if exchange.inference_id:
        metadata["inferenceId"] = exchange.inference_id
    metadata["tritonsmLatencyMs"] = round(exchange.latency_ms, 3)
    if exchange.error is not None:
        metadata["tritonsmError"] = exchange.error
    return {"captureData": data, "eventMetadata": metadata, "eventVersion": "0"}


def inference_time(at: datetime.datetime) -> str:
    """UTC ISO 8601 with milliseconds and Z: ``2026-11-28T05:10:00.123Z``."""
    at = at.astimezone(datetime.timezone.utc)
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


def folder(root: pathlib.Path, exchange: Exchange) -> pathlib.Path:
    """``<root>/<endpoint>/<variant>/<YYYY>/<MM>/<DD>/<HH>``, by the exchange's UTC hour."""
    at = exchange.at.astimezone(datetime.timezone.utc)
    return root / exchange.endpoint / exchange.variant / at.strftime("%Y/%m/%d/%H")


def _payload(content_type: str, body: bytes, mode: str) -> dict[str, str]:
    try:
        data, encoding = body.decode("utf-8"), "JSON"
    except UnicodeDecodeError:   # binary+json with binary tensors, raw image bytes
        data, encoding = base64.b64encode(body).decode("ascii"), "BASE64"
    return {"observedContentType": content_type, "mode": mode, "data": data, "encoding": encoding}


def _size(exchange: Exchange) -> int:
    return len(exchange.input or b"") + len(exchange.output or b"")


def triton_message(body: bytes) -> str:
    """Triton's own words from an error reply (its ``{"error": ...}``), else the body as text."""
    text = body.decode(errors="replace")
    try:
        parsed = json.loads(text)
    except ValueError:
        return text
    return str(parsed["error"]) if isinstance(parsed, dict) and "error" in parsed else text


class CaptureLog:
    """Writes exchanges under ``root`` from one thread; ``write`` never blocks.

    ``check_running`` and ``stop`` make it one of an endpoint's servers (``lifecycle.Server``): stopping writes
    what is queued, then closes the files.
    """

    def __init__(self, root: pathlib.Path, max_pending: int = MAX_PENDING,
                 max_pending_bytes: int = MAX_PENDING_BYTES) -> None:
        self.root = pathlib.Path(root)
        self.written = 0
        self.dropped = 0   # the queue was full, or the disk refused
        self._pending_bytes, self._max_pending_bytes = 0, max_pending_bytes
        self._queue: queue.Queue[object] = queue.Queue(max_pending)
        self._files: dict[pathlib.Path, IO[str]] = {}
        self._lock = threading.Lock()
        self._thread: Optional[threading.Thread] = None
        self._warned: set[str] = set()

    def start(self) -> CaptureLog:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            probe = self.root / f".tritonsm-write-check-{uuid.uuid4().hex}"
            probe.write_text("")
            probe.unlink()
        except OSError as error:
            raise LocalEndpointError(
                f"--capture-dir {self.root}: cannot write there ({error.strerror or error}); pass a folder you can "
                "write to with --capture-dir DIR") from None
        self._thread = threading.Thread(target=self._run, name="tritonsm-capture", daemon=True)
        self._thread.start()
        return self

    def write(self, exchange: Exchange) -> None:
        size = _size(exchange)
        with self._lock:
            if self._pending_bytes + size > self._max_pending_bytes:
                self.dropped += 1
                return
            self._pending_bytes += size
        try:
            self._queue.put_nowait(exchange)
        except queue.Full:
            with self._lock:
                self._pending_bytes -= size
                self.dropped += 1

    def check_running(self) -> None:
        """The writer never stops serving: a disk error is told once and the records dropped are counted."""

    def stop(self) -> None:
        if self._thread is None:
            return
        self._queue.put(_STOP)
        self._thread.join()
        self._thread = None

    def _count_drop(self) -> None:
        with self._lock:
            self.dropped += 1

    def _run(self) -> None:
        try:
            while True:
                item = self._queue.get()
                if item is _STOP:
                    return
                assert isinstance(item, Exchange)
                self._write_line(item)
                with self._lock:
                    self._pending_bytes -= _size(item)
        finally:
            for file in self._files.values():
                file.close()
            self._files.clear()

    def _write_line(self, exchange: Exchange) -> None:
        where = folder(self.root, exchange)
        try:
            file = self._files.get(where)
            if file is None:
                where.mkdir(parents=True, exist_ok=True)
                # A new file per folder (endpoint, variant, hour) and run: minute-second-millisecond and a uuid.
                at = exchange.at.astimezone(datetime.timezone.utc)
                name = f"{at:%M-%S}-{at.microsecond // 1000:03d}-{uuid.uuid4()}.jsonl"
                file = self._files[where] = open(where / name, "a", encoding="utf-8")
            file.write(json.dumps(record(exchange)) + "\n")
            file.flush()
            with self._lock:
                self.written += 1
        except OSError as error:
            self._count_drop()
            if str(error) not in self._warned:   # once per distinct error, not once per request
                self._warned.add(str(error))
                print(f"warning: capture record not written under {where}: {error}; records are dropped until it "
                      "can write (serving goes on)", file=sys.stderr, flush=True)
