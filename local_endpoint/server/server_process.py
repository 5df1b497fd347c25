"""Owning one `tritonserver` process (or another child server, ``LoggedProcess``): start, readiness, crash report,
stop."""

from __future__ import annotations

import atexit
import os
import http.client
import pathlib
import signal
import socket
import subprocess
import sys
import time
from typing import Sequence

from local_endpoint.errors import ServerCrashedError, ServerStartError
from local_endpoint.server.stop_signals import raise_if_stop_requested
from local_endpoint.server.triton_install import TritonInstall

LOG_TAIL_LINES = 30
STOP_GRACE_SECONDS = 15.0
POLL_SECONDS = 0.1


def _die_with_parent() -> None:
    """In the child before exec: the kernel sends SIGTERM when the starting thread's process dies.

    The server runs in a session of its own (above), so a parent killed with SIGKILL, or crashing,
    would otherwise leave it running. Linux only (prctl PR_SET_PDEATHSIG); elsewhere a no-op.
    """
    if sys.platform != "linux":
        return
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


class LoggedProcess:
    """A child process whose output goes to ``log_path``: started in a session of its own and dying with us
    (``start_logged``), its exit reported with the tail of its log, stopped with SIGTERM, then SIGKILL.

    ``what`` names it in those reports ("the Triton server"; moto's server for an asynchronous endpoint).
    """

    what = "the process"

    def __init__(self, command: list[str], environment: dict[str, str] | None, log_path: pathlib.Path,
                 what: str | None = None, append: bool = False) -> None:
        """``append``: add to ``log_path`` instead of starting it afresh (a restarted server after the dead one's
        lines, so the log tells the whole story)."""
        if what is not None:
            self.what = what
        self.log_path = log_path
        self._stopping = False
        self.command = command
        self._process = start_logged(self.command, environment, log_path, append)
        atexit.register(self.stop)

    @property
    def pid(self) -> int:
        return self._process.pid

    def exit_code(self) -> int | None:
        return self._process.poll()

    def raise_if_exited_during_start(self) -> None:
        """ServerStartError, with the log tail (and the cause, where the log shows a known one), if the process has
        exited while its owner waits for it."""
        code = self.exit_code()
        if code is not None:
            tail = self.log_tail()
            raise ServerStartError(
                f"{self.what} exited during start-up with {describe_exit(code)}{known_cause(tail)}; "
                f"last lines of its log ({self.log_path}):\n{tail}"
            )

    def check_running(self) -> None:
        """Raise ServerCrashedError, with the log tail and the exit code, if the process has exited."""
        code = self.exit_code()
        if code is not None and not self._stopping:
            raise ServerCrashedError(
                f"{self.what} exited unexpectedly with {describe_exit(code)}; "
                f"last lines of its log ({self.log_path}):\n{self.log_tail()}", exit_code=code
            )

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after a grace period; then whatever of its process group is left. Safe to call
        twice."""
        self._stopping = True
        atexit.unregister(self.stop)
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
            try:
                self._process.wait(timeout=STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        _end_orphans(self._process.pid)

    def kill(self) -> None:
        """SIGKILL, without a grace period: for a server that has died (what is left of it) or hangs (its
        supervisor replaces it, as SageMaker replaces a failed container). Safe to call twice."""
        self._stopping = True
        atexit.unregister(self.stop)
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        _end_orphans(self._process.pid)

    def note(self, line: str) -> None:
        """Append one line of ours to the log (a restart's reason, between the dead server's lines and the new
        one's)."""
        with self.log_path.open("a") as log:
            log.write(line.rstrip("\n") + "\n")

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.rstrip("\n").splitlines()[-lines:])


# What a Triton server leaves running when it dies hard: its backends' stub processes.
_ORPHAN_NAMES = ("triton_python_backend_stub", "tritonserver")


def _end_orphans(group: int) -> None:
    """Kills what is left of a server's process group: a server that died hard (SIGKILL, the OOM killer) leaves
    its Python-backend stubs re-parented to init. They share its group (``start_logged`` gives the server a session
    of its own, whose id is its pid); only processes of Triton's names are killed, in case the group id was
    reused after the group emptied."""
    import psutil

    for process in psutil.process_iter(["name"]):
        try:
            if process.info["name"] in _ORPHAN_NAMES and os.getpgid(process.pid) == group:
                process.kill()
        except (ProcessLookupError, psutil.Error):
            continue


class TritonProcess(LoggedProcess):
    """A running `tritonserver` whose output goes to `log_path`."""

    what = "the Triton server"
    # Triton's Prometheus metrics port, when the environment turns them on (set by the launcher). A class default:
    # the image's Container, which starts `docker run` itself, keeps its metrics in the container (none here).
    metrics_port: int | None = None
    # Triton's KServe HTTP port, opened for a decoupled model's generate-stream route (``generate_route``).
    http_port: int | None = None

    def __init__(
        self,
        install: TritonInstall,
        arguments: list[str],
        environment: dict[str, str],
        log_path: pathlib.Path,
        launcher: Sequence[str] = (),
        append: bool = False,
    ) -> None:
        """``launcher``: a command that starts `tritonserver ARGUMENTS` itself (``loopback.launcher_command``)."""
        super().__init__([*launcher, str(install.server_binary), *arguments], environment, log_path, append=append)

    def stop(self) -> None:
        super().stop()
        self._remove_leftovers()

    def kill(self) -> None:
        super().kill()
        self._remove_leftovers()

    def _remove_leftovers(self) -> None:
        """A server that stops removes the folder its Python backend unpacked environments into and unlinks its
        stubs' shared-memory regions; a killed one leaves both (python_env_leftovers, shm_leftovers): removed here,
        once the server and its stubs are gone, as its log names them. The folder is said on stderr (disk freed),
        the regions in the server's log."""
        from local_endpoint.server import python_env_leftovers, shm_leftovers
        from model_build.disk_space import human_size

        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        for folder, size in python_env_leftovers.remove(python_env_leftovers.folders_in_log(text)):
            print(f"removed {folder} ({human_size(size)}): the Python execution environments the ended Triton "
                  "server left", file=sys.stderr, flush=True)
        removed = shm_leftovers.remove(shm_leftovers.regions_in_log(text))
        if removed:
            self.note(f"tritonsm: removed {len(removed)} shared-memory region(s) of the ended server's Python models "
                      f"from {shm_leftovers.ROOT} ({human_size(sum(size for _, size in removed))})")

    @property
    def metrics_url(self) -> str | None:
        """Triton's Prometheus metrics (``local_endpoint.server.triton_metrics``), when the environment turns
        them on."""
        return f"http://127.0.0.1:{self.metrics_port}/metrics" if self.metrics_port else None

    def wait_until_ready(self, port: int, timeout: float) -> None:
        """Poll the SageMaker `/ping` until it answers 200 (and the metrics port, when on, accepts), the
        process exits, or time is up.

        Triton starts its metrics service after the SageMaker one (src/main.cc, StartEndpoints; the log
        shows "Started Metrics Service" some 40 ms after "Started Sagemaker HTTPService"), so a ready
        /ping alone let a caller scrape a port nobody listened on yet.
        """
        deadline = time.monotonic() + timeout
        pinged = False
        while time.monotonic() < deadline:
            raise_if_stop_requested()   # a serve's stop whose signal landed where it could not raise
            self.raise_if_exited_during_start()
            pinged = pinged or ping(port) == 200
            if pinged and (self.metrics_port is None or accepts(self.metrics_port)):
                return
            time.sleep(POLL_SECONDS)
        self.stop()
        waited_for = (f"answered /ping but did not open its metrics port {self.metrics_port}" if pinged
                      else "did not answer /ping with 200")
        raise ServerStartError(
            f"the Triton server {waited_for} within {timeout:g} s; "
            f"if the models are just slow to load, raise the start-up timeout (--startup-timeout); "
            f"last lines of its log "
            f"({self.log_path}):\n{self.log_tail()}"
        )


def start_logged(command: list[str], environment: dict[str, str] | None,
                 log_path: pathlib.Path, append: bool = False) -> subprocess.Popen[bytes]:
    """Start `command` with its output in `log_path` (headed by the command line; after what is there with
    ``append``), dying with us."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab" if append else "wb") as log:
        log.write(("$ " + " ".join(command) + "\n").encode())
        log.flush()
        # A session of its own: Ctrl-C in the terminal reaches us, and we
        # stop the server in order instead of it dying mid-request.
        return subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=environment,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )


# Triton's Python backend unpacking a model's execution environment (src/pb_env.cc, libarchive) into a
# /tmp/python_env_* folder it names itself: a write that fails there is almost always a full disk.
_ENV_UNPACK_FAILED = "archive_write_data_block() failed"


def known_cause(log: str) -> str:
    """``": <cause and fix>"`` for a failure the log shows and a user can act on; "" otherwise."""
    if _ENV_UNPACK_FAILED in log and "Write failed" in log:
        return (": Triton's Python backend could not write a model's execution environment into /tmp (it unpacks "
                "each one into a /tmp/python_env_* folder; the disk holding /tmp is most likely full): free space "
                "there, starting with /tmp/python_env_* folders that killed servers left (docs/troubleshooting.md)")
    return ""


def describe_exit(code: int | None) -> str:
    if code is None:
        return "no exit code"
    if code < 0:
        return f"signal {signal.Signals(-code).name}"
    return f"exit code {code}"


def ping(port: int, host: str = "127.0.0.1") -> int | None:
    """Status of GET /ping, or None if nothing answers."""
    return http_status(port, "/ping", host)


def http_status(port: int, path: str, host: str = "127.0.0.1") -> int | None:
    """Status of GET ``path``, or None if nothing answers."""
    connection = http.client.HTTPConnection(host, port, timeout=2)
    try:
        connection.request("GET", path)
        return connection.getresponse().status
    except OSError:
        return None
    finally:
        connection.close()


def accepts(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts a TCP connection on ``port``."""
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False
