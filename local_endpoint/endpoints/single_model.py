"""A local single-model endpoint (SME): one tarball, served as SageMaker serves it."""

from __future__ import annotations

import pathlib

from deployment_spec.facts.serving_runtimes import DEFAULT_TRITON_VERSION
from local_endpoint.endpoints.lifecycle import LocalEndpointLifecycle
from local_endpoint.errors import EnvironmentVariableError
from local_endpoint.server import archive, backends, disk_space, ports, python_envs, work_dirs
from local_endpoint.server.generate_route import GenerateRoute, is_decoupled
from local_endpoint.server.launch import default_log_path, start_sagemaker_triton
from local_endpoint.server.serve_flags import SME, validate_environment
from local_endpoint.server.server_process import TritonProcess
from local_endpoint.server.supervision import TRITON, RestartPolicy, Supervisor
from local_endpoint.server.triton_install import TritonInstall, find_triton_install
from local_endpoint.stand_in import cpu_stand_in

DEFAULT_STARTUP_TIMEOUT = 120.0


class SingleModelEndpoint(LocalEndpointLifecycle):
    """The real Triton server on one model tarball, started like the SageMaker container.

    The tarball is unpacked into a private directory (the container's
    /opt/ml/model/), checked like the serve script checks it, and served by
    tritonserver's SageMaker front end: `GET /ping`, `POST /invocations`.

    Use as a context manager; the server stops on exit::

        with SingleModelEndpoint(Path("assets/ensemble.tar.gz"), default_model="ensemble") as ep:
            requests.post(f"{ep.url}/invocations", ...)

    Args:
        tarball: The model archive, as uploaded for `ModelDataUrl`.
        default_model: The model `/invocations` serves. Defaults to
            SAGEMAKER_TRITON_DEFAULT_MODEL_NAME from `env`, else to the only
            directory in the archive.
        env: The container environment (SAGEMAKER_TRITON_* and the model's
            own variables). Defaults to none, i.e. the script's defaults.
        port: The port to listen on. Defaults to a free port.
        log_file: Where the server log goes. Defaults to a file under the
            temp directory (`tritonsm-logs/`).
        startup_timeout: Seconds to wait for `/ping` to answer 200.
        cpu_stand_in: Serve onnxruntime and pytorch models, which this server
            cannot load, as labelled Python-backend stand-ins on the CPU
            (see `cpu_stand_in`); `stand_in_notes` then says which.
        triton_version: The release the endpoint's image is; ONNX stand-ins
            run its ONNX Runtime. Defaults to the spec's default release.
    """

    def __init__(
        self,
        tarball: pathlib.Path,
        *,
        default_model: str | None = None,
        env: dict[str, str] | None = None,
        port: int | None = None,
        log_file: pathlib.Path | None = None,
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
        cpu_stand_in: bool = False,
        triton_version: str = DEFAULT_TRITON_VERSION,
    ) -> None:
        self.tarball = pathlib.Path(tarball)
        self.cpu_stand_in = cpu_stand_in
        self.triton_version = triton_version
        self._runtime: cpu_stand_in.StandInRuntime | None = None
        self.env = dict(env or {})
        self._requested_default = default_model
        self._requested_port = port
        self._requested_log = log_file
        self.startup_timeout = startup_timeout
        self.port: int | None = None
        self.default_model: str | None = None
        self.log_path: pathlib.Path | None = None
        self._work_dir: pathlib.Path | None = None
        self._process: TritonProcess | None = None
        self._stand_ins: list[backends.ModelBackend] = []
        self._gpu_moved: list[backends.ModelBackend] = []
        self._env_swaps: list[python_envs.EnvSwap] = []
        self._install: TritonInstall | None = None
        self.server_name = TRITON   # in supervision's messages; a component or variant names itself
        self.supervisor: Supervisor | None = None   # once `tritonsm serve` supervises it
        self.decoupled = False   # the default model streams: its generate-stream route is opened (generate_route)

    @property
    def server_pid(self) -> int | None:
        return self._process.pid if self._process else None

    @property
    def metrics_url(self) -> str | None:
        """Triton's Prometheus metrics, when the environment turns them on."""
        return self._process.metrics_url if self._process else None

    @property
    def generate_route(self) -> GenerateRoute | None:
        """Where a decoupled default model's generate-stream route answers (None for any other model)."""
        port = self._process.http_port if self._process else None
        return GenerateRoute(port, self.default_model) if port and self.default_model else None

    @property
    def stand_in_notes(self) -> list[str]:
        """One line per model served by a CPU stand-in instead of its real backend."""
        return ([cpu_stand_in.stand_in_note(m.model, m.backend, self._runtime) for m in self._stand_ins]
                + [cpu_stand_in.gpu_group_note(m.model) for m in self._gpu_moved]
                + [swap.note for swap in self._env_swaps])

    def start(self) -> SingleModelEndpoint:
        """Check everything a user can get wrong, then start and wait for readiness."""
        validate_environment(self.env)
        default_model = self._resolve_default_model()
        archive.check_tarball_path(self.tarball)
        listing = backends.list_archive_models(self.tarball)
        archive.check_single_model_layout(self.tarball, listing)
        self.default_model = archive.choose_default_model(self.tarball, listing, default_model)
        default_files = listing.get(self.default_model) or listing.get(backends.TOP_LEVEL)
        self.decoupled = is_decoupled(default_files.config_text if default_files else None)
        install = find_triton_install()
        available = install.available_backends()
        needed = backends.models_to_load(listing, self.tarball, self.default_model)
        missing = backends.check_backends(needed, self.tarball, available, self.cpu_stand_in)
        backends.raise_if_unsupported(missing, available, self.cpu_stand_in)
        gpu_models = [] if backends.machine_has_gpu() else backends.gpu_group_models(needed, listing)
        backends.raise_if_gpu_groups([(self.tarball, m) for m in gpu_models], self.cpu_stand_in)
        self._stand_ins = cpu_stand_in.stand_in_models(needed) if self.cpu_stand_in else []
        self._gpu_moved = gpu_models if self.cpu_stand_in else []
        self._runtime = cpu_stand_in.prepare_runtime(self.triton_version, self._stand_ins)
        self._env_swaps = python_envs.plan(self.tarball, python_envs.say)
        self.port = ports.claim(self._requested_port)
        self.log_path = self._requested_log or default_log_path(SME, self.port)
        self._work_dir = work_dirs.make("tritonsm-sme-")
        try:
            repository = self._work_dir / "opt-ml-model"
            with disk_space.told_when_full(f"unpack model archive {self.tarball}", repository):
                archive.extract_tarball(self.tarball, repository)
                python_envs.apply(self._env_swaps, repository)
                cpu_stand_in.replace_with_stand_ins(repository, self._stand_ins, self.tarball, self._runtime)
                cpu_stand_in.move_gpu_groups_to_cpu(repository, self._gpu_moved)
            self._install = install
            self._process = self._start_server()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_server(self, restarting: TritonProcess | None = None) -> TritonProcess:
        """Triton on the unpacked repository and the endpoint's port (again, in place of ``restarting``)."""
        assert self._install and self._work_dir and self.port and self.log_path, "start() prepares the server"
        return start_sagemaker_triton(
            install=self._install,
            mode=SME,
            repository=self._work_dir / "opt-ml-model",
            port=self.port,
            env=self.env,
            default_model=self.default_model,
            work_dir=self._work_dir,
            log_path=self.log_path,
            startup_timeout=self.startup_timeout,
            restarting=restarting,
            generate_stream=self.decoupled,
        )

    def supervise(self, policy: RestartPolicy, label: str) -> None:
        """Restart the server if it exited or stopped answering /ping (``local_endpoint.server.supervision``); the
        port, the unpacked models and the log stay, so callers and the asynchronous queue find it where it was."""
        if self._process is None or self.port is None:
            return
        self.supervisor = self.supervisor or Supervisor(policy, self.server_name)
        old = self._process

        def restart() -> TritonProcess:
            self._process = self._start_server(restarting=old)
            return self._process

        self._process = self.supervisor.watch(old, self.port, restart, label)

    @property
    def supervised(self) -> bool:
        return self.supervisor is not None

    def down(self) -> str | None:
        """Why the server does not serve now, once supervised (None before: a crash is then ``check_running``'s)."""
        return self.supervisor.down(self._process) if self.supervisor else None

    def _servers(self) -> list[TritonProcess]:
        return [self._process] if self._process is not None else []

    def _resolve_default_model(self) -> str | None:
        from_env = self.env.get("SAGEMAKER_TRITON_DEFAULT_MODEL_NAME")
        if self._requested_default and from_env and self._requested_default != from_env:
            raise EnvironmentVariableError(
                f"default model {self._requested_default!r} contradicts "
                f"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME={from_env!r}; give one of them, or the same name"
            )
        return self._requested_default or from_env
