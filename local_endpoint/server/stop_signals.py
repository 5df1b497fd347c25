"""SIGINT, SIGTERM and SIGHUP as KeyboardInterrupt, whatever the process inherited.

A process started as a background job (`cmd &`, nohup, some CI runners) inherits SIGINT as
"ignored" (POSIX job control) and Python then never raises KeyboardInterrupt; SIGTERM (what
`kill`, CodeBuild and service managers send) ends Python without running `finally` blocks. Inside
`interrupting()` all three raise KeyboardInterrupt, so whatever holds a server or a container
stops it on the way out.
"""
from __future__ import annotations

import contextlib
import signal

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


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
