"""One container of ours: the `docker run` client attached, its output in a log, stopped and removed.

The client runs in a session of its own (Ctrl-C reaches `tritonsm`, which stops the container in
order) and gets SIGTERM from the kernel if `tritonsm` dies, even by SIGKILL; docker's signal proxy
passes that on to the container, and `--rm` removes it. A normal stop is `docker stop` with
SageMaker's grace period, then `docker rm --force` in case the daemon did not remove it.
"""
from __future__ import annotations

import atexit
import pathlib
import subprocess

from local_endpoint.errors import ServerStartError
from local_endpoint.image import docker_argv
from local_endpoint.server.server_process import TritonProcess, start_logged

# Text docker prints when the host cannot give a container GPUs, and what to do about it.
NO_GPU_RUNTIME = ("could not select device driver", "nvidia-container-cli", "unknown or invalid runtime")
GPU_HINT = ("the Docker engine cannot give the container GPUs: install an NVIDIA driver and the NVIDIA Container "
            "Toolkit (https://github.com/NVIDIA/nvidia-container-toolkit), "
            "or run `tritonsm verify --gpu` on a CUDA host without Docker")
DOCKER_TIMEOUT = docker_argv.STOP_GRACE_SECONDS + 30


class Container(TritonProcess):
    """`docker run` of `spec`, attached; the TritonProcess checks (readiness, crash report) apply as they are."""

    def __init__(self, spec: docker_argv.ContainerSpec, log_path: pathlib.Path) -> None:
        self.name = spec.name
        self.log_path = log_path
        self._stopping = False
        self.command = docker_argv.run_argv(spec)
        self._process = start_logged(self.command, None, log_path)
        atexit.register(self.stop)

    def wait_until_ready(self, port: int, timeout: float) -> None:
        try:
            super().wait_until_ready(port, timeout)
        except ServerStartError as error:
            self.stop()
            hint = f"\n{GPU_HINT}" if any(text in self.log_tail() for text in NO_GPU_RUNTIME) else ""
            raise ServerStartError(f"container {self.name}: {error}{hint}") from None
        except BaseException:  # Ctrl-C while waiting: leave no container behind
            self.stop()
            raise

    def stop(self) -> None:
        """`docker stop` (SIGTERM, SIGKILL after the grace period), then `docker rm --force`. Safe to call twice."""
        already = self._stopping
        self._stopping = True
        atexit.unregister(self.stop)
        if already:
            return
        if self._process.poll() is None:
            _docker(docker_argv.stop_argv(self.name))
            try:
                self._process.wait(timeout=DOCKER_TIMEOUT)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        # --rm has normally removed it already ("No such container"): the answer does not matter.
        _docker(docker_argv.remove_argv(self.name))


def _docker(argv: list[str]) -> None:
    try:
        subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=DOCKER_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired):
        pass  # the attached client is stopped regardless, and --rm removes what it started
