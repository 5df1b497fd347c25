"""A stop that lands where Python cannot raise it still stops `tritonsm serve` (local_endpoint.runtime.cli).

When a restart forks its new server, logging's at-fork hook runs in the parent; a SIGTERM arriving there becomes
an "Exception ignored" KeyboardInterrupt that Python drops. The fake endpoint below reproduces exactly that (the
signal is raised inside ``__del__``, which cannot raise either) and then waits as a restart waits for its server.
The real race, against real Triton servers, is test_serve_restarts' SIGTERM test; it cannot be forced there.
"""
from __future__ import annotations

import signal
import time

from local_endpoint.runtime.cli import serve_endpoint
from local_endpoint.server.stop_signals import raise_if_stop_requested, stop_requested
from local_endpoint.server.supervision import RestartPolicy


class _SignalledWhereItCannotRaise:
    def __del__(self) -> None:
        signal.raise_signal(signal.SIGTERM)


class _RestartingEndpoint:
    """Its first supervision is a restart: the stop arrives during the fork, then it waits for its server."""

    def __init__(self) -> None:
        self.stopped = False
        self.waited_s = 0.0

    def start(self) -> None:
        pass

    def supervise(self, policy: RestartPolicy, label: str) -> None:
        _SignalledWhereItCannotRaise()   # dropped at once: its __del__ runs here
        started = time.monotonic()
        try:
            while time.monotonic() - started < 10:   # the wait for the new server's /ping
                raise_if_stop_requested()
                time.sleep(0.01)
        finally:
            self.waited_s = time.monotonic() - started

    def stop(self) -> None:
        self.stopped = True


def test_a_stop_dropped_by_python_during_a_restart_still_stops_serve(capfd) -> None:
    endpoint = _RestartingEndpoint()
    assert serve_endpoint(endpoint, lambda: None) == 0   # type: ignore[arg-type]
    out, err = capfd.readouterr()
    assert out.splitlines()[-1] == "stopped"
    assert endpoint.stopped and endpoint.waited_s < 5
    assert "Exception ignored" not in err and "Traceback" not in err, err
    assert not stop_requested()   # the next serve in this process starts clean
