"""Starting tritonserver the way the SageMaker Triton container does."""

from __future__ import annotations

import os
import pathlib
import sys
import tempfile

from local_endpoint.errors import PortInUseError, ServerStartError
from local_endpoint.server import loopback, work_dirs
from local_endpoint.server.generate_route import http_flags
from local_endpoint.server.ports import free_port
from local_endpoint.server.serve_flags import LOCAL_LOOPBACK_FLAGS, sagemaker_server_launch
from local_endpoint.server.server_process import TritonProcess
from local_endpoint.server.triton_install import (
    TritonInstall,
    prepare_backend_directory,
    server_process_environment,
)


def default_log_path(mode: str, port: int) -> pathlib.Path:
    """Where the server log goes when the caller names no file.

    Outside the endpoint's work directory, which is deleted on stop, so a
    crash report's log path still exists afterwards.
    """
    logs = pathlib.Path(tempfile.gettempdir()) / "tritonsm-logs"
    logs.mkdir(exist_ok=True)
    return logs / f"triton-{mode}-port{port}-pid{os.getpid()}.log"


# The Python backend's stub start-up, under load: the server aborts (std::terminate) on a lock of the mutexes it
# shares with a starting stub in shared memory (python_backend src/stub_launcher.cc: `stub_health_mutex`). Seen once
# in some 2,700 tests on a loaded 2-core machine (the Triton 24.10 of nvidia-pytriton 0.7.0); the same model loaded
# on the next start. Nothing of the user's causes it, so a start that ends so is tried once more, said in the log.
STUB_HANDSHAKE_ABORT = "terminate called after throwing an instance of 'boost::interprocess::lock_exception'"
STUB_ABORT_RETRY_NOTE = ("the server aborted at start-up in the Python backend's stub hand-shake "
                         "(boost::interprocess::lock_exception, a transient under load); starting it once more")
START_ATTEMPTS = 2


def start_sagemaker_triton(
    *,
    install: TritonInstall,
    mode: str,
    repository: pathlib.Path,
    port: int,
    env: dict[str, str],
    default_model: str | None,
    work_dir: pathlib.Path,
    log_path: pathlib.Path,
    startup_timeout: float,
    restarting: TritonProcess | None = None,
    generate_stream: bool = False,
) -> TritonProcess:
    """Start tritonserver with the serve script's flags and wait for /ping. ``restarting``: the server this one
    replaces (``supervision``): its log goes on in the same file, its metrics and HTTP ports are kept.
    ``generate_stream``: also open Triton's KServe HTTP front end on a free port of 127.0.0.1 (``http_port``), for
    a decoupled model's generate-stream route (``generate_route``)."""
    backend_dir = prepare_backend_directory(install, work_dir / "backends")
    metrics_port = None
    if env.get("SAGEMAKER_TRITON_ALLOW_METRICS", "").lower() in ("true", "1"):
        # On SageMaker each instance runs one container and the metrics listen on 23000; here several
        # servers share one machine, so each gets a free port of its own (the same one after a restart: the
        # address `tritonsm serve` printed stays right).
        metrics_port = (restarting.metrics_port if restarting else None) or free_port()
        env = {**env, "SAGEMAKER_TRITON_METRICS_PORT": str(metrics_port)}
    launch = sagemaker_server_launch(
        mode=mode, model_repository=str(repository), port=port, env=env, default_model=default_model
    )
    # A flag the container does not pass: its backends live at the
    # default /opt/tritonserver/backends, ours in a directory we assembled.
    arguments = [*launch.arguments, f"--backend-directory={backend_dir}"]
    http_port = ((restarting.http_port if restarting else None) or free_port()) if generate_stream else None
    if http_port is not None:
        arguments += http_flags(http_port)
    # Off the network (``loopback``): every front end that takes an address on 127.0.0.1, and the SageMaker one,
    # which takes none, in a network namespace behind 127.0.0.1 relays of its ports.
    listen_all = loopback.listen_all()
    status_file = work_dir / "network-status"
    relayed = [port, *filter(None, [metrics_port, http_port])]
    launcher = [] if listen_all else loopback.launcher_command(relayed, status_file)
    if not listen_all:
        arguments = [*LOCAL_LOOPBACK_FLAGS, *arguments]
    for attempt in range(1, START_ATTEMPTS + 1):
        process = TritonProcess(
            install, arguments, server_process_environment(install, launch.environment), log_path, launcher,
            append=restarting is not None or attempt > 1,
        )
        process.metrics_port = metrics_port
        process.http_port = http_port
        work_dirs.add_owner(work_dir, process.pid)  # the folder is in use while its server runs
        if _ready_or_transient(process, port, startup_timeout, last_attempt=attempt == START_ATTEMPTS):
            break
        process.note(STUB_ABORT_RETRY_NOTE)
        print(f"tritonsm: {STUB_ABORT_RETRY_NOTE} (log: {log_path})", file=sys.stderr, flush=True)
    exposed = None if listen_all else loopback.exposure(status_file)
    if exposed and restarting is None:   # said once, when the endpoint started
        print(loopback.exposure_warning(port, exposed), file=sys.stderr)
    return process


def _ready_or_transient(process: TritonProcess, port: int, timeout: float, last_attempt: bool) -> bool:
    """Wait until ``process`` is ready: True. False when it aborted in the stub hand-shake (``STUB_HANDSHAKE_ABORT``)
    and another attempt is left; any other failure is raised, the process stopped (a port taken meanwhile as
    ``PortInUseError``)."""
    try:
        process.wait_until_ready(port, timeout)
        return True
    except ServerStartError:
        process.stop()
        tail = process.log_tail()
        if STUB_HANDSHAKE_ABORT in tail and not last_attempt:
            return False
        if "already in use" in tail:
            raise PortInUseError(
                f"port {port} is already in use by another process (it was taken while the "
                "server started); stop that process, choose another port with --port, or leave "
                "--port out to use a free one"
            ) from None
        raise
    except BaseException:  # Ctrl-C while waiting: leave no server behind
        process.stop()
        raise
