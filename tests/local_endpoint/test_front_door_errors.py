"""The local MME front door writes to the CLI's stderr: a client that hangs up adds nothing, a failing handler one line."""
from __future__ import annotations

import socket
import struct
import threading
import time

from local_endpoint.endpoints.mme_front_door import FrontDoor
from local_endpoint.server.ports import free_port


def handler_threads() -> set[threading.Thread]:
    """socketserver's per-request threads alive in this process now."""
    return {thread for thread in threading.enumerate() if "process_request_thread" in thread.name}


def started(cache: object) -> tuple[FrontDoor, set[threading.Thread]]:
    """A door, and the handler threads that were there before it (another module's server in this pytest
    process, e.g. one waiting on a kept-alive connection, is not this door's)."""
    before = handler_threads()
    door = FrontDoor(free_port(), cache, log_path="triton.log")  # type: ignore[arg-type]
    door.start_in_background()
    return door, before


def send_and_reset(port: int, request: bytes) -> None:
    """Send the start of a request and drop the connection with a reset, as a killed client does."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
        client.sendall(request)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def settled(door: FrontDoor, before: set[threading.Thread]) -> None:
    """Stop once every handler thread of this door has ended (the server does not join its daemon threads)."""
    # One thread accepts in order: once a later request is answered, the earlier one's thread has started.
    with socket.create_connection(("127.0.0.1", door.server_address[1]), timeout=5) as client:
        client.sendall(b"GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n")
        assert client.recv(12) == b"HTTP/1.1 404"
    deadline = time.monotonic() + 20
    while handler_threads() - before:
        assert time.monotonic() < deadline, "the request's handler thread still runs"
        time.sleep(0.05)
    door.stop()


def test_a_client_that_hangs_up_mid_request_leaves_no_traceback(capsys):
    door, before = started(cache=None)
    send_and_reset(door.server_address[1], b"POST /invocations HTTP/1.1\r\nContent-Length: 1000\r\n\r\n{")
    settled(door, before)
    assert capsys.readouterr().err == ""


def test_a_handler_that_fails_is_told_in_one_line_naming_the_client_and_the_error(capsys):
    door, before = started(cache=None)  # planted defect: /ping reads the cache's port, and there is no cache
    with socket.create_connection(("127.0.0.1", door.server_address[1]), timeout=5) as client:
        client.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
        client.recv(1)
    settled(door, before)
    err = capsys.readouterr().err
    assert err.startswith("warning: a request from 127.0.0.1:") and err.count("\n") == 1
    assert err.endswith(" failed: AttributeError: 'NoneType' object has no attribute 'triton_port'\n")
