"""Which Python and platform an execution environment is built for.

The endpoint's environment follows the image (``deployment_spec.facts.serving_runtimes``): its Python
and the glibc of its Ubuntu decide which wheels run there. The local endpoint's environment
follows the Python whose Triton stub ``tritonsm serve`` runs (this interpreter).
"""
from __future__ import annotations

import dataclasses
import os
import sys
import sysconfig

from deployment_spec.facts import serving_runtimes

# glibc of each Ubuntu release the images are built on (https://packages.ubuntu.com/<release>/libc6).
UBUNTU_GLIBC = {"20.04": (2, 31), "22.04": (2, 35), "24.04": (2, 39)}
# Ubuntu's python3 package: the interpreter the image's libpython belongs to.
IMAGE_INTERPRETER = "/usr/bin/python3"


@dataclasses.dataclass(frozen=True)
class EnvTarget:
    """python: major.minor; interpreter: the absolute path ``bin/python3`` points at where the
    environment runs; platforms: wheel platform tags accepted, newest first (empty: this machine's)."""

    python: str
    interpreter: str
    platforms: tuple[str, ...]
    label: str

    @property
    def abi(self) -> str:
        return "cp" + self.python.replace(".", "")

    def pip_flags(self) -> list[str]:
        """pip's cross-platform selection: only wheels for this Python, ABI and these platforms."""
        if not self.platforms:
            return []
        flags = ["--python-version", self.python, "--implementation", "cp",
                 "--abi", self.abi, "--abi", "abi3", "--abi", "none"]
        for tag in self.platforms:
            flags += ["--platform", tag]
        return flags

    def key(self) -> dict:
        return dataclasses.asdict(self)


def for_image(triton_version: str) -> EnvTarget:
    runtime = serving_runtimes.runtime(triton_version)
    major, minor = UBUNTU_GLIBC[runtime.ubuntu]
    tags = tuple(f"manylinux_{major}_{m}_x86_64" for m in range(minor, 4, -1))
    # Legacy aliases (PEP 600): manylinux2014 = 2_17, manylinux2010 = 2_12, manylinux1 = 2_5.
    tags += ("manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64")
    return EnvTarget(runtime.python, IMAGE_INTERPRETER, tags,
                     f"the Triton {triton_version} image (CPython {runtime.python}, glibc {major}.{minor}, x86_64)")


def for_this_machine() -> EnvTarget:
    """This interpreter's base Python, whose libpython the local stub loads."""
    base = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    return EnvTarget(python, base, (), f"the local endpoint (CPython {python}, {sysconfig.get_platform()})")
