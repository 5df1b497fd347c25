"""One plain HTTP exchange with a local server (stdlib only)."""

from __future__ import annotations

import dataclasses
import http.client
from typing import Mapping


@dataclasses.dataclass(frozen=True)
class HttpReply:
    status: int
    content_type: str
    body: bytes
    # The reply's headers, names in lower case, for a caller that passes them on (the SageMaker Runtime front:
    # custom attributes).
    headers: Mapping[str, str] = dataclasses.field(default_factory=dict)


def call(
    host: str,
    port: int,
    method: str,
    path: str,
    *,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 60.0,
) -> HttpReply:
    """Send one request and read the whole reply. Raises OSError if nothing answers."""
    connection = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return HttpReply(response.status, response.getheader("Content-Type", ""), response.read(),
                         {k.lower(): v for k, v in response.getheaders()})
    finally:
        connection.close()
