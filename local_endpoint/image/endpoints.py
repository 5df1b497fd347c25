"""A spec endpoint served by its own image in Docker: same interface as the local endpoints.

`ImageSingleModelEndpoint` unpacks the archive into a folder mounted at /opt/ml/model and serves
the container's port 8080 on the chosen local port. `ImageMultiModelEndpoint` starts the
container in multi-model mode on a private port and puts the same front door and model cache
in front as the local MME (`mme_front_door`, `model_cache`): they play SageMaker's part,
unpacking each TargetModel to <folder>/<hash>/model, which the container sees as
/opt/ml/models/<hash>/model, and calling the container's `POST /models` with that path. The
archives are served as built: no stand-ins, no rebuilt environments, KIND_GPU instances on the
host's GPUs.
"""
from __future__ import annotations

import os
import pathlib
import re
import secrets
import shutil
import subprocess
import sys
from typing import Callable, Optional

from deployment_spec.served import LocalEndpoint
from local_endpoint.endpoints.lifecycle import LocalEndpointLifecycle
from local_endpoint.endpoints.mme_front_door import FrontDoor
from local_endpoint.endpoints.model_cache import MultiModelCache
from local_endpoint.errors import LocalEndpointError
from local_endpoint.image import docker_argv, images, registry_login, shared_memory
from local_endpoint.image.container import Container
from local_endpoint.server import archive, backends, disk_space, ports, work_dirs
from local_endpoint.server.launch import default_log_path
from local_endpoint.server.ports import free_port
from local_endpoint.server.serve_flags import MME, SME, validate_environment


def say(line: str) -> None:
    """Progress (pulls), on stderr beside the announcement on stdout."""
    print(line, file=sys.stderr, flush=True)


def ensure_image(image: images.ImageRef, log: Callable[[str], None] = say) -> None:
    """Pull the image unless docker has it; the SageMaker image after an ECR login."""
    if shutil.which("docker") is None:
        raise LocalEndpointError("--image needs Docker: no `docker` on PATH; install Docker Engine and the NVIDIA "
                                 "Container Toolkit, or run `tritonsm verify --gpu` on a CUDA host without Docker")
    if subprocess.run(docker_argv.inspect_argv(image.uri), capture_output=True).returncode == 0:
        return
    if image.registry:
        log(f"logging in to {image.registry} (ECR, region {image.region}) with your AWS credentials")
        registry_login.docker_login(image.registry, image.region)
    log(f"pulling {image.uri} (several GB, once per host)")
    result = subprocess.run(docker_argv.pull_argv(image.uri), stdout=sys.stderr, stderr=subprocess.STDOUT)
    if result.returncode != 0:
        raise LocalEndpointError(f"docker pull {image.uri} failed (exit {result.returncode}, output above); "
                                 "is the Docker engine running, and may these credentials pull it?")


def container_name(label: str) -> str:
    """Ours and unique: tritonsm-<label>-<pid>-<random>, in docker's name alphabet."""
    slug = re.sub(r"[^a-zA-Z0-9_.-]+", "-", label).strip("-.") or "endpoint"
    return f"tritonsm-{slug[:40]}-{os.getpid()}-{secrets.token_hex(3)}"


class _ImageEndpoint(LocalEndpointLifecycle):
    mode = SME

    def __init__(self, image: images.ImageRef, *, env: dict[str, str] | None, port: int | None,
                 log_file: pathlib.Path | None, startup_timeout: float, gpu_count: int, label: str) -> None:
        self.image = image
        self.env = dict(env or {})
        self.startup_timeout = startup_timeout
        self.gpu_count = gpu_count
        self.label = label
        self._requested_port = port
        self._requested_log = log_file
        self.port: int | None = None
        self.log_path: pathlib.Path | None = None
        self.shm_bytes = 0
        self._work_dir: pathlib.Path | None = None
        self._container: Container | None = None

    @property
    def container_name(self) -> str | None:
        return self._container.name if self._container else None

    @property
    def server_pid(self) -> int | None:
        """The `docker run` client's pid (the server runs inside the container)."""
        return self._container.pid if self._container else None

    @property
    def stand_in_notes(self) -> list[str]:
        """Lines the announcement prints after the address: what runs, and where."""
        script = f"; serve script {self.image.serve.file} mounted at /usr/bin/serve" if self.image.serve else ""
        return [f"image: {self.image.uri} in container {self.container_name} (--gpus all, /dev/shm "
                f"{self.shm_bytes >> 20} MiB{script}); stop with Ctrl-C, which removes the container"]

    def _servers(self) -> list[Container]:
        """The container (stopping it removes it)."""
        return [self._container] if self._container is not None else []

    def _run_container(self, host_port: int, mounts: tuple[docker_argv.Mount, ...], tarballs) -> None:
        """Pull if needed, then start the container and wait for its /ping."""
        self.shm_bytes = shared_memory.shm_size_bytes(self.env, shared_memory.python_instances(tarballs, self.gpu_count))
        ensure_image(self.image)
        if self.image.serve is not None:
            mounts += (docker_argv.Mount(self.image.serve.path, "/usr/bin/serve"),)
        spec = docker_argv.ContainerSpec(
            container_name(self.label), self.image.uri, host_port,
            docker_argv.container_environment(self.env, multi_model=self.mode == MME), mounts, self.shm_bytes)
        self._container = Container(spec, self.log_path)
        if self._work_dir is not None:
            work_dirs.add_owner(self._work_dir, self._container.pid)  # mounted while the container runs
        self._container.wait_until_ready(host_port, self.startup_timeout)

    def _prepare(self) -> None:
        validate_environment(self.env)
        self.port = ports.claim(self._requested_port)
        self.log_path = self._requested_log or default_log_path(f"{self.mode}-image", self.port)
        self._work_dir = work_dirs.make(f"tritonsm-{self.mode}-image-")


class ImageSingleModelEndpoint(_ImageEndpoint):
    """One archive at /opt/ml/model of the image's container, served on `port`."""

    mode = SME

    def __init__(self, tarball: pathlib.Path, image: images.ImageRef, *, default_model: str | None = None,
                 **kwargs) -> None:
        super().__init__(image, **kwargs)
        self.tarball = pathlib.Path(tarball)
        self._requested_default = default_model
        self.default_model: str | None = None

    def start(self) -> ImageSingleModelEndpoint:
        archive.check_tarball_path(self.tarball)
        listing = backends.list_archive_models(self.tarball)
        archive.check_single_model_layout(self.tarball, listing)
        self.default_model = archive.choose_default_model(
            self.tarball, listing, self._requested_default or self.env.get("SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"))
        self._prepare()
        try:
            model_dir = self._work_dir / "opt-ml-model"
            with disk_space.told_when_full(f"unpack model archive {self.tarball}", model_dir):
                archive.extract_tarball(self.tarball, model_dir)
            self._run_container(self.port, (docker_argv.Mount(model_dir, docker_argv.MODEL_DIR),), [self.tarball])
        except BaseException:
            self.stop()
            raise
        return self


class ImageMultiModelEndpoint(_ImageEndpoint):
    """The archives as TargetModels of a multi-model container, behind SageMaker's part played locally."""

    mode = MME

    def __init__(self, tarballs: list[pathlib.Path], image: images.ImageRef, *, capacity: int | None = None,
                 **kwargs) -> None:
        super().__init__(image, **kwargs)
        self.tarballs = [pathlib.Path(t) for t in tarballs]
        self.capacity = capacity
        self.cache: MultiModelCache | None = None
        self._front_door: FrontDoor | None = None

    @property
    def target_models(self) -> list[str]:
        return sorted(t.name for t in self.tarballs)

    def start(self) -> ImageMultiModelEndpoint:
        archives = archive.target_models(self.tarballs)
        if self.capacity is not None and self.capacity < 1:
            raise LocalEndpointError(f"MME capacity {self.capacity} must be at least 1 (models loaded at once); "
                                     "leave it out for no limit")
        self._prepare()
        try:
            models_root = self._work_dir / "opt-ml-models"
            models_root.mkdir()
            container_port = free_port()
            self._run_container(container_port, (docker_argv.Mount(models_root, docker_argv.MODELS_DIR),),
                                self.tarballs)
            self.cache = MultiModelCache(archives, container_port, models_root, self.capacity,
                                         server_root=pathlib.PurePosixPath(docker_argv.MODELS_DIR))
            self._front_door = FrontDoor(self.port, self.cache, str(self.log_path))
            self._front_door.start_in_background()
        except BaseException:
            self.stop()
            raise
        return self


def for_spec_endpoint(local: LocalEndpoint, kind: str, *, region: Optional[str] = None, port: int | None = None,
                      capacity: int | None = None, log_file: pathlib.Path | None = None,
                      startup_timeout: float | None = None) -> _ImageEndpoint:
    """A spec endpoint in its image of `kind` (images.SAGEMAKER / NGC), not yet started.

    The SageMaker image is pulled from `region`, else the region of the user's AWS configuration,
    else the spec environment's. The start-up timeout defaults to the endpoint's own
    `startup_timeout_s` (SageMaker's container health-check limit).
    """
    region = region or (registry_login.configured_region() if kind == images.SAGEMAKER else None) or local.region
    image = images.resolve(kind, local.triton_version, region)
    instance = local.endpoint.instance if local.endpoint else None
    common = dict(env=local.env, port=port, log_file=log_file, gpu_count=instance.gpu_count if instance else 1,
                  startup_timeout=startup_timeout or (local.endpoint.startup_timeout_s if local.endpoint else 600.0),
                  label=local.endpoint.name if local.endpoint else "endpoint")
    if local.multi_model:
        return ImageMultiModelEndpoint(list(local.tarballs), image, capacity=capacity, **common)
    return ImageSingleModelEndpoint(local.tarballs[0], image, default_model=local.default_model, **common)
