"""Serving until stopped: a local endpoint, or local endpoints behind the local SageMaker Runtime.

``serve_endpoint`` owns the signals: SIGINT, SIGTERM and SIGHUP stop what it started, whatever the
process inherited (a background job inherits SIGINT ignored), also in the middle of a server's restart. It
supervises what it serves twice a second: a Triton server that exited or stopped answering /ping is restarted
within the ``RestartPolicy`` bound (``local_endpoint.server.supervision``), while the rest (the runtime's port, the
asynchronous queue and its local S3/SNS/SQS) serves on. ``serve_one`` (``tritonsm serve ENDPOINT``) and
``serve_all`` (``tritonsm serve --all``) put the endpoints behind a ``LocalRuntime`` and print where an
application points its SageMaker Runtime client.
"""
from __future__ import annotations

import signal
import sys
import threading
import time
from typing import Callable, Sequence

from local_endpoint.endpoints.lifecycle import LocalEndpointLifecycle
from local_endpoint.errors import LocalEndpointError
from local_endpoint.runtime.local_runtime import LocalRuntime, NamedEndpoint
from local_endpoint.server.stop_signals import (SIGNALS, clear_stop_request, interrupt, request_stop,
                                                 stop_requested)
from local_endpoint.server.supervision import RestartPolicy

CRASH_POLL_SECONDS = 0.5
DEFAULT_ENDPOINT_NAME = "tritonsm-local"


def serve_one(endpoint: NamedEndpoint, port: int | None, announce: Callable[[str], None],
              restarts: RestartPolicy = RestartPolicy()) -> int:
    """One endpoint on ``port``: the SageMaker Runtime API and, on the same port, its container contract
    (``/ping``, ``/invocations``). ``announce(url)`` prints what the endpoint serves; ``restarts`` bounds the
    restarts of its failed servers."""
    runtime = LocalRuntime([endpoint], port=port, container_contract=True)

    def announce_all() -> None:
        announce(runtime.url)
        _announce_runtime(runtime)

    return serve_endpoint(runtime, announce_all, restarts)


def serve_all(endpoints: Sequence[NamedEndpoint], port: int | None, describe: Callable[[NamedEndpoint], str],
              skipped: dict[str, str], restarts: RestartPolicy = RestartPolicy()) -> int:
    """Every endpoint behind one port, each under its EndpointName; ``describe`` says what one serves. Those the
    local server cannot run are left out and named, with those ``skipped`` already (EndpointName: why)."""
    runtime = LocalRuntime(endpoints, port=port, skip_unsupported=True)

    def announce() -> None:
        print(f"serving {len(runtime.targets)} endpoint(s) at {runtime.url}:", flush=True)
        for endpoint in endpoints:
            if endpoint.name in runtime.targets:
                print(f"  {endpoint.name}: {describe(endpoint)}", flush=True)
                metrics = getattr(endpoint.server, "metrics_url", None)
                # An endpoint with variants (local_endpoint.variants) says each variant, its log and its captures.
                variant_notes = getattr(endpoint.server, "notes", None)
                logs = variant_notes() if variant_notes else [f"server log: {endpoint.server.log_path}"]
                for note in [*endpoint.server.stand_in_notes, *logs,
                             *([f"Triton metrics (Prometheus): {metrics}"] if metrics else [])]:
                    print(f"    {note}", flush=True)
        for name, why in {**skipped, **runtime.skipped}.items():
            print(f"  {name}: skipped, {why}", flush=True)
        _announce_runtime(runtime)

    return serve_endpoint(runtime, announce, restarts)


def _announce_runtime(runtime: LocalRuntime) -> None:
    queued = runtime.asynchronous.queues if runtime.asynchronous else {}
    realtime = [name for name in runtime.targets if name not in queued]   # an asynchronous one refuses InvokeEndpoint
    if realtime:
        print(f"SageMaker Runtime API: InvokeEndpoint at {runtime.url}/endpoints/ENDPOINT_NAME/invocations for "
              f"{', '.join(realtime)}", flush=True)
    streaming = [name for name, target in runtime.targets.items() if target.streams]
    if streaming:   # a decoupled model: its responses stream (local_endpoint.runtime.streaming)
        print(f"SageMaker Runtime API: InvokeEndpointWithResponseStream at {runtime.url}/endpoints/ENDPOINT_NAME/"
              f"invocations-response-stream for {', '.join(streaming)}", flush=True)
    print(f"point boto3, the AWS CLI and the SageMaker SDK here: export {runtime.aws_environment}", flush=True)
    for line in runtime.asynchronous.announcement(runtime.url) if runtime.asynchronous else []:
        print(line, flush=True)
    print("press Ctrl-C to stop", flush=True)


def serve_endpoint(endpoint: LocalEndpointLifecycle, announce: Callable[[], None],
                   restarts: RestartPolicy = RestartPolicy()) -> int:
    """Start `endpoint` (a ``LocalRuntime``, or any local endpoint), announce it, and serve until SIGINT or
    SIGTERM, restarting its failed servers within ``restarts``; 0 on a clean stop."""
    clear_stop_request()
    previous_hook = sys.unraisablehook
    # During start-up (a rebuild, an image pull) SIGTERM interrupts like Ctrl-C; start() cleans up.
    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    # A process started as a background job (`cmd &`, nohup, some CI runners) inherits SIGINT as
    # "ignored" (POSIX job control) and Python then never raises KeyboardInterrupt: take Ctrl-C back.
    previous[signal.SIGINT] = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        try:
            endpoint.start()
        except KeyboardInterrupt:
            return 130  # interrupted during start-up; start() stopped the server
        # Idle, SIGTERM only sets the event; in the middle of a restart (which waits for the new server, up to the
        # start-up timeout) it interrupts like Ctrl-C, and the restart stops the server it was starting.
        supervising = threading.Event()

        def stop_soon(_signum: int, _frame: object) -> None:
            request_stop()
            if supervising.is_set():
                raise KeyboardInterrupt

        def keep_the_stop(unraisable: "sys.UnraisableHookArgs") -> None:
            # The stop landed in code that cannot raise: a restart forks its server, and logging's at-fork hook
            # (_releaseLock) runs in the parent, where the interrupt would be printed as "Exception ignored" and
            # lost. It is recorded (request_stop): the restart's wait for its server raises it from ordinary code
            # and stops the server it was starting. (Sending the signal again from here raised it inside this
            # hook, where it was lost once more, with a traceback.)
            if isinstance(unraisable.exc_value, KeyboardInterrupt) and stop_requested():
                return
            previous_hook(unraisable)

        sys.unraisablehook = keep_the_stop
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, stop_soon)
        # From here on Ctrl-C is the normal way to stop, wherever it lands.
        def supervise() -> None:
            supervising.set()
            try:
                endpoint.supervise(restarts, "")
            finally:
                supervising.clear()

        try:
            supervise()   # before the banner: a caller who reads it finds the servers supervised already
            announce()
            while not stop_requested():
                time.sleep(CRASH_POLL_SECONDS)
                if not stop_requested():
                    supervise()
        except KeyboardInterrupt:
            pass
        _stop_ignoring_ctrl_c(endpoint)
        print("stopped", flush=True)
        return 0
    except (LocalEndpointError, OSError) as error:  # OSError: e.g. an unwritable --log-file
        return fail(error)
    finally:
        _stop_ignoring_ctrl_c(endpoint)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sys.unraisablehook = previous_hook
        clear_stop_request()


def _stop_ignoring_ctrl_c(endpoint: LocalEndpointLifecycle) -> None:
    # An impatient second Ctrl-C (or SIGTERM) must not abandon the server half-stopped.
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in SIGNALS}
    try:
        endpoint.stop()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def fail(error: Exception) -> int:
    print(f"error: {error}", file=sys.stderr)
    return 1
