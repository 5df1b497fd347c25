"""A local multi-model endpoint (MME): several tarballs behind SageMaker's front door."""

from __future__ import annotations

import pathlib

from deployment_spec.facts.serving_runtimes import DEFAULT_TRITON_VERSION
from local_endpoint.endpoints.lifecycle import LocalEndpointLifecycle
from local_endpoint.endpoints.mme_front_door import FrontDoor
from local_endpoint.endpoints.model_cache import MultiModelCache
from local_endpoint.errors import LocalEndpointError
from local_endpoint.server import archive, backends, ports, python_envs, work_dirs
from local_endpoint.server.launch import default_log_path, start_sagemaker_triton
from local_endpoint.server.ports import free_port
from local_endpoint.server.serve_flags import MME, validate_environment
from local_endpoint.server.server_process import TritonProcess
from local_endpoint.server.supervision import TRITON, RestartPolicy, Supervisor
from local_endpoint.server.triton_install import find_triton_install
from local_endpoint.stand_in import cpu_stand_in

DEFAULT_STARTUP_TIMEOUT = 60.0


class MultiModelEndpoint(LocalEndpointLifecycle):
    """Triton in SageMaker MME mode, with SageMaker's model loading emulated in front.

    Triton starts on an empty repository and a private port, as the container
    does with SAGEMAKER_MULTI_MODEL=true. A front door on `port` accepts
    `POST /invocations` with `X-Amzn-SageMaker-Target-Model: <name>.tar.gz`,
    loads that tarball on first use and evicts the least recently used model
    beyond `capacity` (see `model_cache`).

    Args:
        tarballs: The model archives; each is addressed by its file name.
        env: The container environment. Defaults to none.
        port: The front door's port. Defaults to a free port.
        capacity: Most models loaded at once. Defaults to no limit.
        log_file: Where the Triton log goes. Defaults to a file under the
            temp directory (`tritonsm-logs/`).
        startup_timeout: Seconds to wait for Triton's `/ping`.
        cpu_stand_in: Serve onnxruntime and pytorch models, which this server
            cannot load, as labelled Python-backend stand-ins on the CPU
            (see `cpu_stand_in`); `stand_in_notes` then says which.
        triton_version: The release the endpoint's image is; ONNX stand-ins
            run its ONNX Runtime. Defaults to the spec's default release.
    """

    def __init__(
        self,
        tarballs: list[pathlib.Path],
        *,
        env: dict[str, str] | None = None,
        port: int | None = None,
        capacity: int | None = None,
        log_file: pathlib.Path | None = None,
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
        cpu_stand_in: bool = False,
        triton_version: str = DEFAULT_TRITON_VERSION,
    ) -> None:
        self.tarballs = [pathlib.Path(t) for t in tarballs]
        self.cpu_stand_in = cpu_stand_in
        self.triton_version = triton_version
        self.stand_in_notes: list[str] = []
        self.env_swaps: dict[str, list[python_envs.EnvSwap]] = {}
        self.runtime: cpu_stand_in.StandInRuntime | None = None
        self.env = dict(env or {})
        self.capacity = capacity
        self._requested_port = port
        self._requested_log = log_file
        self.startup_timeout = startup_timeout
        self.port: int | None = None
        self.log_path: pathlib.Path | None = None
        self.cache: MultiModelCache | None = None
        self._work_dir: pathlib.Path | None = None
        self._process: TritonProcess | None = None
        self._front_door: FrontDoor | None = None
        self._triton_port: int | None = None
        self.supervisor: Supervisor | None = None   # once `tritonsm serve` supervises it

    @property
    def server_pid(self) -> int | None:
        return self._process.pid if self._process else None

    @property
    def metrics_url(self) -> str | None:
        """Triton's Prometheus metrics, when the environment turns them on."""
        return self._process.metrics_url if self._process else None

    @property
    def target_models(self) -> list[str]:
        return sorted(t.name for t in self.tarballs)

    def start(self) -> MultiModelEndpoint:
        validate_environment(self.env)
        if self.capacity is not None and self.capacity < 1:
            raise LocalEndpointError(
                f"MME capacity {self.capacity} must be at least 1 (models loaded at once); "
                "leave it out for no limit"
            )
        archives = self._check_archives()
        self.port = ports.claim(self._requested_port)
        self.log_path = self._requested_log or default_log_path(MME, self.port)
        self._work_dir = work_dirs.make("tritonsm-mme-")
        try:
            # The container's dummy repository (/tmp/sagemaker): models arrive via /models.
            empty_repository = self._work_dir / "empty-repository"
            empty_repository.mkdir()
            self._triton_port = triton_port = free_port()
            self._process = self._start_server()
            self.cache = MultiModelCache(archives, triton_port, self._work_dir / "opt-ml-models", self.capacity,
                                         cpu_stand_in=self.cpu_stand_in, runtime=self.runtime,
                                         env_swaps=self.env_swaps)
            self._front_door = FrontDoor(self.port, self.cache, str(self.log_path))
            self._front_door.start_in_background()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_server(self, restarting: TritonProcess | None = None) -> TritonProcess:
        """Triton on the container's empty repository and its private port (again, in place of ``restarting``)."""
        assert self._work_dir and self._triton_port and self.log_path, "start() prepares the server"
        return start_sagemaker_triton(
            install=find_triton_install(),
            mode=MME,
            repository=self._work_dir / "empty-repository",
            port=self._triton_port,
            env=self.env,
            default_model=None,
            work_dir=self._work_dir,
            log_path=self.log_path,
            startup_timeout=self.startup_timeout,
            restarting=restarting,
        )

    def supervise(self, policy: RestartPolicy, label: str) -> None:
        """Restart Triton if it exited or stopped answering /ping, on the same private port behind the same front
        door; the models it had loaded are loaded again on their next request, as on a replaced instance."""
        if self._process is None or self._triton_port is None:
            return
        self.supervisor = self.supervisor or Supervisor(policy, TRITON)
        old = self._process

        def restart() -> TritonProcess:
            if self.cache is not None:
                self.cache.forget_loaded()   # the new server starts empty
            self._process = self._start_server(restarting=old)
            return self._process

        self._process = self.supervisor.watch(old, self._triton_port, restart, label)

    @property
    def supervised(self) -> bool:
        return self.supervisor is not None

    def down(self) -> str | None:
        """Why Triton does not serve now, once supervised (None before: a crash is then ``check_running``'s)."""
        return self.supervisor.down(self._process) if self.supervisor else None

    def _servers(self) -> list[TritonProcess]:
        return [self._process] if self._process is not None else []

    def _check_archives(self) -> dict[str, pathlib.Path]:
        """Every tarball readable, uniquely named, and loadable by the local server."""
        archives = archive.target_models(self.tarballs)
        available = find_triton_install().available_backends()
        missing, stood_in, gpu_found = [], [], []
        for tarball in self.tarballs:
            listing = backends.list_archive_models(tarball)
            needed = backends.models_to_load(listing, tarball, backends.mme_root_model(listing))
            missing += backends.check_backends(needed, tarball, available, self.cpu_stand_in)
            gpu_models = [] if backends.machine_has_gpu() else backends.gpu_group_models(needed, listing)
            gpu_found += [(tarball, m) for m in gpu_models]
            if self.cpu_stand_in:
                stood_in += [(tarball, m) for m in cpu_stand_in.stand_in_models(needed)]
        backends.raise_if_unsupported(missing, available, self.cpu_stand_in)
        backends.raise_if_gpu_groups(gpu_found, self.cpu_stand_in)
        # Before the first request: a rebuild takes minutes, longer than a client waits.
        self.env_swaps = {t.name: python_envs.plan(t, python_envs.say) for t in self.tarballs}
        env_notes = [s.note for swaps in self.env_swaps.values() for s in swaps]
        if self.cpu_stand_in:
            self.runtime = cpu_stand_in.prepare_runtime(self.triton_version, [m for _, m in stood_in])
            # A bare-layout model is named by its target model, as Triton names it.
            self.stand_in_notes = (
                [cpu_stand_in.stand_in_note(m.model or t.name, m.backend, self.runtime) for t, m in stood_in]
                + [cpu_stand_in.gpu_group_note(m.model or t.name) for t, m in gpu_found])
        self.stand_in_notes = self.stand_in_notes + env_notes
        return archives
