"""The docker command lines of `--image`, as pure functions: what the SageMaker container contract says.

- SageMaker starts an inference container as `docker run IMAGE serve`, serves it on port 8080
  (`/ping`, `/invocations`) and stops it with SIGTERM, then SIGKILL thirty seconds later
  (https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-inference-code.html).
- Model data: a single-model endpoint's archive is unpacked to /opt/ml/model; a multi-model
  endpoint's container starts with none and SageMaker unpacks each TargetModel to
  /opt/ml/models/<hash>/model before its `POST /models` load call
  (https://docs.aws.amazon.com/sagemaker/latest/dg/mms-container-apis.html; Triton's
  src/sagemaker_server.cc). Both are mounted read-only: the contract hands model data to the
  container to read and does not say its copy is writable, so a model that writes into its own
  directory fails here rather than rely on that.
- The environment is the Model's `Environment` (`deployment_spec.rules.container_env`, as the CDK app
  sets it) plus SAGEMAKER_MULTI_MODEL=true, which the platform adds for a multi-model endpoint
  (Triton's docker/sagemaker/serve reads it).

Local additions, each for a reason of this machine: `--gpus all` (the host's GPUs, as the
instance's), `--shm-size` (shared_memory), the port published on 127.0.0.1 only, `--rm` and a
name of ours (cleanup), `--init` (the serve script runs tritonserver as a child of bash, which as
PID 1 ignores SIGTERM; docker's init passes it on, so a stop takes seconds, not the grace period)
and `--sig-proxy=true` (docker's default, spelled out: a SIGTERM to the `docker run` client, as
when its parent dies, stops the container; https://docs.docker.com/reference/cli/docker/container/run/).
"""
from __future__ import annotations

import dataclasses
import pathlib

SERVE = "serve"
MODEL_DIR = "/opt/ml/model"
MODELS_DIR = "/opt/ml/models"
CONTAINER_PORT = 8080
STOP_GRACE_SECONDS = 30   # SageMaker's SIGTERM-to-SIGKILL interval


@dataclasses.dataclass(frozen=True)
class Mount:
    source: pathlib.Path
    target: str

    def flags(self) -> list[str]:
        # --mount, unlike -v, never creates a missing source and refuses ':' ambiguities.
        if "," in str(self.source):
            raise ValueError(f"a bind-mount source may not contain ',' (docker --mount syntax): {self.source}")
        return ["--mount", f"type=bind,source={self.source},target={self.target},readonly"]


@dataclasses.dataclass(frozen=True)
class ContainerSpec:
    name: str
    image: str
    host_port: int
    environment: dict[str, str]
    mounts: tuple[Mount, ...]
    shm_bytes: int


def container_environment(env: dict[str, str], *, multi_model: bool) -> dict[str, str]:
    """The Model's environment as the container sees it: the platform adds SAGEMAKER_MULTI_MODEL."""
    out = dict(env)
    if multi_model:
        out["SAGEMAKER_MULTI_MODEL"] = "true"
    return dict(sorted(out.items()))


def run_argv(spec: ContainerSpec) -> list[str]:
    argv = ["docker", "run", "--rm", "--name", spec.name, "--init", "--sig-proxy=true", "--gpus", "all",
            "--shm-size", f"{spec.shm_bytes // (1 << 20)}m", "-p", f"127.0.0.1:{spec.host_port}:{CONTAINER_PORT}"]
    for key, value in sorted(spec.environment.items()):
        argv += ["-e", f"{key}={value}"]
    for mount in spec.mounts:
        argv += mount.flags()
    return argv + [spec.image, SERVE]


def stop_argv(name: str) -> list[str]:
    return ["docker", "stop", "-t", str(STOP_GRACE_SECONDS), name]


def remove_argv(name: str) -> list[str]:
    return ["docker", "rm", "--force", name]


def inspect_argv(image: str) -> list[str]:
    return ["docker", "image", "inspect", "--format", "{{.Id}}", image]


def pull_argv(image: str) -> list[str]:
    return ["docker", "pull", image]
