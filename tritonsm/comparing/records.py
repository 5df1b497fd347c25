"""One captured record: a request and its answer, as SageMaker Data Capture writes them (and `tritonsm serve` too).

The record's shape (SageMaker developer guide, "Capture data from real-time endpoint", "View Data Capture data"):
one JSON object per line, ``captureData.endpointInput`` and ``captureData.endpointOutput`` each with
``observedContentType``, ``mode``, ``data`` and ``encoding`` (``JSON`` or ``CSV``: the text itself; ``BASE64``: the
bytes, base64-encoded), and ``eventMetadata`` with ``eventId`` and ``inferenceTime``. The local server adds
``eventMetadata.tritonsmLatencyMs`` (the request's latency) and ``tritonsmError`` (why it failed); SageMaker's
records carry neither.
"""
from __future__ import annotations

import base64
import binascii
import dataclasses
import datetime as dt
import json
from typing import Any, Optional

from deployment_spec.parsing.errors import UserError

from tritonsm.comparing.window import parse_instant

# The content type of Triton's binary+json answers (local_endpoint/client/payload.py decodes them).
BINARY_PREFIX = "application/vnd.sagemaker-triton.binary+json"


@dataclasses.dataclass(frozen=True)
class Record:
    where: str  # "<file>:<line>", for messages
    event_id: str
    time: dt.datetime
    input: Optional[bytes]  # None: the capture holds no request (capture mode Output)
    output: Optional[bytes]  # None: the capture holds no answer (capture mode Input)
    output_type: str
    latency_ms: Optional[float]
    error: Optional[str]

    def failure(self) -> Optional[str]:
        """Why the request failed: the local server's ``tritonsmError``, else Triton's ``{"error": ...}`` answer."""
        if self.error is not None:
            return self.error
        if self.output is None or self.output_type.startswith(BINARY_PREFIX):
            return None
        try:
            document = json.loads(self.output)
        except ValueError:
            return None
        if isinstance(document, dict) and "error" in document and "outputs" not in document:
            return str(document["error"])
        return None


def parse_record(line: str, where: str) -> Record:
    try:
        document = json.loads(line)
        capture = document["captureData"]
        metadata = document["eventMetadata"]
        latency = metadata.get("tritonsmLatencyMs")
        error = metadata.get("tritonsmError")
        output = capture.get("endpointOutput")
        return Record(where=where, event_id=str(metadata["eventId"]), time=parse_instant(metadata["inferenceTime"]),
                      input=_data(capture.get("endpointInput"), "endpointInput"),
                      output=_data(output, "endpointOutput"),
                      output_type=str((output or {}).get("observedContentType", "")),
                      latency_ms=None if latency is None else float(latency),
                      error=None if error is None else str(error))
    except _Unreadable as problem:
        reason = str(problem)
    except (ValueError, TypeError, AttributeError) as problem:
        reason = f"{type(problem).__name__}: {problem}"
    except KeyError as problem:
        reason = f"no {problem.args[0]!r}"
    raise UserError(f"{where}: not a readable data-capture record ({reason}); each line of a capture file is one "
                    "JSON record with captureData and eventMetadata (eventId, inferenceTime), as SageMaker Data "
                    "Capture writes them; remove the line, or point --captures at the capture root")


class _Unreadable(Exception):
    pass


def _data(part: Optional[dict[str, Any]], name: str) -> Optional[bytes]:
    if part is None:
        return None
    data, encoding = part["data"], str(part.get("encoding", "JSON")).upper()
    if not isinstance(data, str):
        raise _Unreadable(f"{name}.data is not text")
    if encoding != "BASE64":
        return data.encode()
    try:
        return base64.b64decode(data, validate=True)
    except binascii.Error as error:
        raise _Unreadable(f"{name}.data is not base64 ({error})") from None
