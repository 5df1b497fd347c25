"""`--shm-size` of the container, sized from the spec's Python-backend settings.

Docker gives a container 64 MiB of /dev/shm unless told otherwise, which Triton's Python backend
calls "very small": each Python model instance maps a region of `shm-default-byte-size` when it
loads and grows it by `shm-growth-byte-size` whenever a request's inputs and outputs need more,
so "set the --shm-size flag depending on the size of your inputs and outputs" (python_backend
README.md, "Managing Shared Memory", r25.09). The serve script turns the spec's
`container.shm_default_bytes` / `shm_growth_bytes` (SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE /
_GROWTH_BYTE_SIZE) into those flags, 16 MiB and 1 MiB when unset.

The rule: Docker's 64 MiB for everything else, plus, for every Python-backend model instance the
endpoint's archives can load at once, its default region and room for GROWTH_STEPS growths
(16 MiB of tensors in flight per instance at the script's default growth), rounded up to whole
MiB. Instances: `count` of each instance group, times the endpoint instance type's GPUs for
KIND_GPU and KIND_AUTO groups (Triton places one such instance per GPU); one group of one when the
config has none. A multi-model endpoint counts every archive, since all may be loaded together.
The size is a limit of the tmpfs, not memory set aside.
"""
from __future__ import annotations

import pathlib
from typing import Iterable

from local_endpoint.server import backends
from local_endpoint.server.serve_flags import DEFAULT_SHM_BYTE_SIZE, DEFAULT_SHM_GROWTH_BYTE_SIZE

MIB = 1 << 20
DOCKER_DEFAULT_SHM = 64 * MIB
GROWTH_STEPS = 16


def shm_size_bytes(env: dict[str, str], python_instances: int) -> int:
    """The container's /dev/shm size under the rule above."""
    default = int(env.get("SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE", DEFAULT_SHM_BYTE_SIZE))
    growth = int(env.get("SAGEMAKER_TRITON_SHM_GROWTH_BYTE_SIZE", DEFAULT_SHM_GROWTH_BYTE_SIZE))
    total = DOCKER_DEFAULT_SHM + python_instances * (default + GROWTH_STEPS * growth)
    return -(-total // MIB) * MIB


def python_instances(tarballs: Iterable[pathlib.Path], gpu_count: int) -> int:
    """Python-backend model instances of every model in the archives (see the module docstring)."""
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    per_gpu = (model_config_pb2.ModelInstanceGroup.KIND_GPU, model_config_pb2.ModelInstanceGroup.KIND_AUTO)
    total = 0
    for tarball in tarballs:
        listing = backends.list_archive_models(tarball)
        for name, files in listing.items():
            if backends.read_model_backend(name, files, tarball).backend != "python":
                continue
            config = text_format.Parse(files.config_text, model_config_pb2.ModelConfig())
            groups = [(g.kind, g.count or 1, len(g.gpus)) for g in config.instance_group] or [
                (model_config_pb2.ModelInstanceGroup.KIND_AUTO, 1, 0)]
            for kind, count, listed_gpus in groups:
                total += count * ((listed_gpus or max(gpu_count, 1)) if kind in per_gpu else 1)
    return total
