"""AWS event-stream messages (``application/vnd.amazon.eventstream``), as InvokeEndpointWithResponseStream sends them.

The binary framing botocore decodes (``botocore.eventstream``): a 12-byte prelude (total length, headers length,
both big-endian uint32, then the CRC32 of those 8 bytes), the headers (each a 1-byte name length, the name, a type
byte, here 7: a string with a 2-byte length), the payload, and the CRC32 of everything before it. botocore's parser
turns ``:message-type`` ``event`` into the member named by ``:event-type`` (``{"PayloadPart": {"Bytes": ...}}``, the
payload raw: ``Bytes`` is the event's payload member) and ``exception`` into an ``EventStreamError`` whose code is
``:exception-type`` and whose message is the JSON payload's ``Message`` (``ResponseStream`` of botocore's
sagemaker-runtime service model: ``PayloadPart``, ``ModelStreamError{Message, ErrorCode}``, ``InternalStreamFailure``).
"""
from __future__ import annotations

import binascii
import json
import struct

CONTENT_TYPE = "application/vnd.amazon.eventstream"
STRING = 7   # the header value type of a UTF-8 string
# ModelStreamError's ErrorCode values (the service model's documentation of the shape).
STREAM_BROKEN, TIME_EXCEEDED = "StreamBroken", "ModelInvocationTimeExceeded"


def message(headers: dict[str, str], payload: bytes) -> bytes:
    """One event-stream message of string ``headers`` and ``payload``."""
    encoded = b"".join(_header(name, value) for name, value in headers.items())
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack(">II", total, len(encoded))
    prelude += struct.pack(">I", binascii.crc32(prelude))
    body = prelude + encoded + payload
    return body + struct.pack(">I", binascii.crc32(body))


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return struct.pack(">B", len(raw_name)) + raw_name + struct.pack(">BH", STRING, len(raw_value)) + raw_value


def payload_part(data: bytes) -> bytes:
    """A ``PayloadPart`` event carrying ``data`` (the container's bytes, unchanged)."""
    return message({":event-type": "PayloadPart", ":content-type": "application/octet-stream",
                    ":message-type": "event"}, data)


def model_stream_error(text: str, error_code: str = STREAM_BROKEN) -> bytes:
    """A ``ModelStreamError`` exception: the stream's last message."""
    payload = json.dumps({"Message": text, "ErrorCode": error_code}).encode()
    return message({":exception-type": "ModelStreamError", ":content-type": "application/json",
                    ":message-type": "exception"}, payload)
