"""What this machine offers for TensorRT builds: an NVIDIA GPU (and its compute capability) and Docker."""
from __future__ import annotations

import dataclasses
import functools
import shutil
import subprocess
from typing import Optional

from model_build.backends.tensorrt.trtexec import TRTEXEC


@dataclasses.dataclass(frozen=True)
class Gpu:
    name: str
    compute_capability: str  # e.g. "8.6"


@dataclasses.dataclass(frozen=True)
class Toolchain:
    """How plans can be built here; ``reason`` says why not when ``gpu`` is None or no runner exists."""

    gpu: Optional[Gpu]
    docker: bool
    local_trtexec: bool
    reason: str = ""

    @property
    def usable(self) -> bool:
        return self.gpu is not None and (self.docker or self.local_trtexec)


@functools.lru_cache(maxsize=1)
def detect() -> Toolchain:
    gpu, gpu_reason = _gpu()
    local = shutil.which("trtexec") is not None or _exists(TRTEXEC)
    docker, docker_reason = (False, "not needed") if local else _docker()
    reasons = [r for r in (gpu_reason, "" if (docker or local) else docker_reason) if r]
    return Toolchain(gpu, docker, local, "; ".join(reasons))


def _gpu() -> tuple[Optional[Gpu], str]:
    if shutil.which("nvidia-smi") is None:
        return None, "no NVIDIA GPU (nvidia-smi not found)"
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,compute_cap", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
    except (subprocess.SubprocessError, OSError) as exc:
        return None, f"no usable NVIDIA GPU (nvidia-smi failed: {exc})"
    first = next((line for line in out.splitlines() if line.strip()), "")
    if "," not in first:
        return None, "no NVIDIA GPU listed by nvidia-smi"
    name, cc = (part.strip() for part in first.rsplit(",", 1))
    return Gpu(name, cc), ""


def _docker() -> tuple[bool, str]:
    if shutil.which("docker") is None:
        return False, "no Docker client (docker not found)"
    try:
        subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True,
                       timeout=20, check=True)
    except subprocess.CalledProcessError as exc:
        detail = (exc.stderr or "").strip().splitlines()
        return False, "no Docker engine (docker info: " + (detail[-1] if detail else f"exit {exc.returncode}") + ")"
    except (subprocess.SubprocessError, OSError) as exc:
        return False, f"no Docker engine ({exc})"
    return True, ""


def _exists(path: str) -> bool:
    import os
    return os.path.exists(path)
