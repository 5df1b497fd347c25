"""Choosing and checking TCP ports for the local endpoint."""

from __future__ import annotations

import socket

from local_endpoint.errors import PortInUseError

# Triton's SageMaker front end listens on every interface.
BIND_ADDRESS = "0.0.0.0"


def free_port() -> int:
    """A port the kernel reports free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((BIND_ADDRESS, 0))
        return probe.getsockname()[1]


def ensure_port_free(port: int) -> None:
    """Raise PortInUseError if another process holds `port`.

    Checked before starting so the user reads one sentence instead of a
    server log ending in "Socket '0.0.0.0:<port>' already in use".
    """
    if not 0 < port < 65536:
        raise PortInUseError(f"port {port} is not a TCP port; choose one in 1..65535")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # Like the server's own listener, so a port left in TIME_WAIT by a
        # previous run does not count as taken.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((BIND_ADDRESS, port))
        except OSError:
            raise PortInUseError(
                f"port {port} is already in use by another process; stop that process, "
                "choose another port with --port, or leave --port out to use a free one"
            ) from None


def claim(requested: int | None) -> int:
    """The port to serve on: ``requested`` once checked free, or a free one when none was asked for."""
    if requested is None:
        return free_port()
    ensure_port_free(requested)
    return requested
