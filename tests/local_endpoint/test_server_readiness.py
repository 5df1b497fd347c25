"""Readiness waits for every port the caller will use: /ping, and the metrics port when metrics are on.

A stand-in ``tritonserver`` (a small Python program at the install's binary path) answers /ping at once and
opens its metrics port late or never, the order the real server starts them in (SageMaker first, metrics
~40 ms later), stretched so the race is certain rather than occasional.
"""
from __future__ import annotations

import pathlib
import socket
import sys
import textwrap

import pytest

from local_endpoint.errors import ServerStartError
from local_endpoint.server.ports import free_port
from local_endpoint.server.server_process import TritonProcess, accepts
from local_endpoint.server.triton_install import TritonInstall

_STAND_IN = textwrap.dedent("""\
    import http.server, socket, sys, time
    ping_port, metrics_port, metrics_after = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])

    class Ping(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    ping = http.server.HTTPServer(("127.0.0.1", ping_port), Ping)
    ping.timeout = 0.05
    started = time.monotonic()
    metrics = None
    while True:
        ping.handle_request()
        if metrics is None and metrics_after >= 0 and time.monotonic() - started >= metrics_after:
            metrics = socket.create_server(("127.0.0.1", metrics_port))
""")


def _start(tmp_path: pathlib.Path, metrics_after_s: float) -> tuple[TritonProcess, int, int]:
    binary = tmp_path / "bin" / "tritonserver"
    binary.parent.mkdir()
    binary.write_text(f"#!{sys.executable}\n{_STAND_IN}")
    binary.chmod(0o755)
    ping_port, metrics_port = free_port(), free_port()
    process = TritonProcess(TritonInstall(tmp_path), [str(ping_port), str(metrics_port), str(metrics_after_s)],
                            {}, tmp_path / "server.log")
    process.metrics_port = metrics_port
    return process, ping_port, metrics_port


def test_ready_means_the_metrics_port_accepts_too(tmp_path: pathlib.Path) -> None:
    process, ping_port, metrics_port = _start(tmp_path, metrics_after_s=1.0)
    try:
        process.wait_until_ready(ping_port, timeout=30)
        assert accepts(metrics_port)  # without the wait, /ping is ready a second before this port opens
    finally:
        process.stop()


def test_a_metrics_port_that_never_opens_is_reported_by_number(tmp_path: pathlib.Path) -> None:
    process, ping_port, metrics_port = _start(tmp_path, metrics_after_s=-1)
    with pytest.raises(ServerStartError) as caught:
        process.wait_until_ready(ping_port, timeout=2)
    assert str(caught.value).startswith(
        f"the Triton server answered /ping but did not open its metrics port {metrics_port} within 2 s; "
        "if the models are just slow to load, raise the start-up timeout (--startup-timeout); last lines of "
        f"its log ({tmp_path / 'server.log'}):\n"
    )
    assert process.exit_code() is not None  # stopped, not left running


def test_accepts_tells_a_listening_port_from_a_closed_one() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listening:
        port = listening.getsockname()[1]
        assert accepts(port)
    assert not accepts(port)
