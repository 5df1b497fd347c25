"""The shared-memory regions that killed Triton servers leave in /dev/shm, removed.

Triton's Python backend gives each model instance's stub a shared-memory region of its own,
``/dev/shm/triton_python_backend_shm_region_<uuid>`` (python_backend src/stub_launcher.cc: the backend's
``shm-region-prefix-name`` + a UUID; its size the backend's ``shm-default-byte-size``), which the server unlinks when
it stops. A server that is killed leaves it: RAM (/dev/shm is a tmpfs), about 17 MB per Python model instance here;
82 such regions, 1.4 GB, had piled up on this project's 2-core machine from suite runs whose servers were killed.

The server's log names each region (at --log-verbose 1, which ``tritonsm serve`` passes as SageMaker's serve
script does: "Starting Python backend stub: ... triton_python_backend_stub <model.py> <region> ..."), so a server
that ``tritonsm serve`` ends or replaces has its regions removed once no process maps them (``TritonProcess.stop``
and ``kill``). A serve killed whole cannot; the next serve removes every region of ours that no live process maps
and that is older than a server's start-up (a starting server maps its region as it makes it).
"""
from __future__ import annotations

import os
import pathlib
import re
import time
from typing import Iterable

import psutil

ROOT = pathlib.Path("/dev/shm")
PREFIX = "triton_python_backend_shm_region_"  # python_backend's default shm-region-prefix-name
# A region is made and mapped in one step (SharedMemoryManager's constructor); one this old and unmapped is dead.
SETTLED_S = 60.0
_NAME = re.compile(re.escape(PREFIX) + r"[0-9A-Za-z-]+")


def regions_in_log(text: str, root: pathlib.Path = ROOT) -> set[pathlib.Path]:
    """The regions a Triton server's log says it gave its Python-backend stubs."""
    return {root / name for line in text.splitlines() if "Starting Python backend stub" in line
            for name in _NAME.findall(line)}


def mapped(root: pathlib.Path = ROOT) -> set[pathlib.Path]:
    """The regions under ``root`` that a live process maps (its /proc/PID/maps); processes we cannot read are
    skipped (not ours)."""
    found: set[pathlib.Path] = set()
    prefix = str(root / PREFIX)
    for pid in psutil.pids():
        try:
            maps = pathlib.Path(f"/proc/{pid}/maps").read_text()
        except OSError:
            continue
        found.update(pathlib.Path(line.split(maxsplit=5)[-1].removesuffix(" (deleted)"))
                     for line in maps.splitlines() if prefix in line)
    return found


def remove(regions: Iterable[pathlib.Path], root: pathlib.Path = ROOT) -> list[tuple[pathlib.Path, int]]:
    """Removes those of ``regions`` that exist, are ours and no live process maps: (region, bytes) of each."""
    candidates = sorted(regions)
    if not candidates:
        return []
    in_use = mapped(root)
    removed = []
    for region in candidates:
        try:
            status = region.stat()
            if status.st_uid != os.getuid() or region in in_use:
                continue
            region.unlink()
        except OSError:
            continue
        removed.append((region, status.st_size))
    return removed


def remove_abandoned(root: pathlib.Path = ROOT) -> list[tuple[pathlib.Path, int]]:
    """Removes every region of ours under ``root`` that no live process maps and that is older than
    ``SETTLED_S``."""
    now = time.time()
    settled = []
    for region in root.glob(PREFIX + "*"):
        try:
            if now - region.stat().st_mtime > SETTLED_S:
                settled.append(region)
        except OSError:
            continue
    return remove(settled, root)
