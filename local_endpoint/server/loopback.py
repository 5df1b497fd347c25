"""Keeping the local Triton server off the network: reachable from this machine's 127.0.0.1 only.

Triton's SageMaker front end listens on 0.0.0.0 whatever its flags (it has no address option), so
``start_sagemaker_triton`` runs tritonserver through ``loopback_launcher``: in a network namespace of its own, its
ports relayed from 127.0.0.1 of this machine. Callers keep using 127.0.0.1:<port> as before. Where the machine
does not allow the namespace, the server listens on every interface as the container does and ``exposure_warning``
says so, once per server, on stderr. ``LISTEN_ALL_VARIABLE=1`` skips the namespace knowingly (no warning): the
server is then started exactly as before this module existed.
"""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from typing import Iterable, Optional

from local_endpoint.server import loopback_launcher

LISTEN_ALL_VARIABLE = "TRITONSM_LISTEN_ALL"
LAUNCHER = pathlib.Path(loopback_launcher.__file__)


def listen_all() -> bool:
    """Whether the user asked for a server on every interface (``TRITONSM_LISTEN_ALL=1``)."""
    return os.environ.get(LISTEN_ALL_VARIABLE, "") not in ("", "0")


def launcher_command(ports: Iterable[int], status_file: pathlib.Path) -> list[str]:
    """What goes before `tritonserver ARGUMENTS` to run it behind 127.0.0.1 relays of ``ports``."""
    # -I -S: the standard library only, none of this environment's PYTHON* variables or site-packages.
    return [sys.executable, "-I", "-S", str(LAUNCHER), str(status_file), ",".join(map(str, ports)), "--"]


def exposure(status_file: pathlib.Path) -> Optional[str]:
    """Why a server started with ``launcher_command`` listens on every interface, or None if it does not."""
    try:
        status = status_file.read_text()
    except FileNotFoundError:
        return None   # the launcher failed before deciding (the start-up error says why)
    return None if status == loopback_launcher.ISOLATED else status


def exposure_warning(port: int, reason: str) -> str:
    return (f"warning: the Triton server on port {port} listens on every network interface of this machine, so "
            f"anyone who can reach the machine can call it (it asks for no credentials): it could not run in a "
            f"network namespace of its own, reachable from 127.0.0.1 only ({reason}); allow unprivileged user "
            f"namespaces (user_namespaces(7); e.g. sysctl kernel.apparmor_restrict_unprivileged_userns=0 on Ubuntu, "
            f"user.max_user_namespaces > 0) or serve on a machine that allows them; set {LISTEN_ALL_VARIABLE}=1 to "
            f"serve on every interface knowingly, without this warning")


def namespace_unavailable() -> Optional[str]:
    """Why this machine cannot give tritonserver a network namespace of its own, or None if it can (tests)."""
    probe = subprocess.run([sys.executable, "-I", "-S", str(LAUNCHER), loopback_launcher.PROBE],
                           capture_output=True, text=True, check=False)
    return probe.stdout.strip() or probe.stderr.strip() or None if probe.returncode else None
