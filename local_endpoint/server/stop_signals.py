"""SIGINT, SIGTERM and SIGHUP as KeyboardInterrupt, whatever the process inherited.

A process started as a background job (`cmd &`, nohup, some CI runners) inherits SIGINT as
"ignored" (POSIX job control) and Python then never raises KeyboardInterrupt; SIGTERM (what
`kill`, CodeBuild and service managers send) ends Python without running `finally` blocks. Inside
`interrupting()` all three raise KeyboardInterrupt, so whatever holds a server or a container
stops it on the way out.

A stop can also land where Python cannot raise it (logging's at-fork hook while a restart forks its server
prints it as "Exception ignored" and drops it): ``request_stop`` records it for the process, and the waits a
restart spends its time in (``raise_if_stop_requested``) raise it from ordinary code.
"""
from __future__ import annotations

import contextlib
import signal
import threading

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


_STOP_REQUESTED = threading.Event()   # process-wide, as signals are


def request_stop() -> None:
    _STOP_REQUESTED.set()


def clear_stop_request() -> None:
    _STOP_REQUESTED.clear()


def stop_requested() -> bool:
    return _STOP_REQUESTED.is_set()


def raise_if_stop_requested() -> None:
    """In a wait that a stop must end: raise the stop as Ctrl-C, even when its signal was lost."""
    if _STOP_REQUESTED.is_set():
        raise KeyboardInterrupt


def interrupt(*_: object) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def interrupting():
    previous = {sig: signal.signal(sig, interrupt) for sig in SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
