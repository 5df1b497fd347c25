"""The local endpoints' work folders in the temporary directory: the unpacked models and assembled backends.

A serve deletes its folder when it stops; one killed with SIGKILL (or by the out-of-memory killer) cannot, and
its folder holds the whole unpacked model (hundreds of MB). So each folder records the processes that use it
(``owners.json``: the serve's own and its server's, each with its start time, which tells a reused PID apart),
and making a new folder first removes the folders whose processes are all gone. A live serve's folder is never
touched, nor one whose record is missing (just made, or made by an older version). The Python backend's own
folders of killed servers go too (python_env_leftovers).
"""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import sys
import tempfile

import psutil

from local_endpoint.server import python_env_leftovers, shm_leftovers
from local_endpoint.server.disk_space import folder_size
from model_build.disk_space import human_size

PATTERN = "tritonsm-[sm]me-*"
OWNERS = "owners.json"
# psutil computes a start time from the boot time and the process's start tick: the same process, the same value.
SAME_START_S = 1.0


def make(prefix: str) -> pathlib.Path:
    """A new work folder owned by this process, after removing the ones abandoned by killed serves."""
    for folder, size, pids in remove_abandoned():
        print(f"removed {folder} ({human_size(size)}), left by a serve that is gone "
              f"(pid {', '.join(map(str, pids))})", flush=True)
    # On stderr: a note beside what the serve itself prints (its banner is the first line of its output). An empty
    # folder (a killed server's whose Python models had no environment) is removed without one: nothing was freed.
    for folder, size in python_env_leftovers.remove_abandoned():
        if size:
            print(f"removed {folder} ({human_size(size)}), the Python execution environments of a Triton server "
                  "that was killed", file=sys.stderr, flush=True)
    # Killed servers' shared-memory regions: RAM nothing maps any more; removed without a note (housekeeping).
    shm_leftovers.remove_abandoned()
    folder = pathlib.Path(tempfile.mkdtemp(prefix=prefix))
    add_owner(folder, os.getpid())
    return folder


def add_owner(folder: pathlib.Path, pid: int) -> None:
    """Records ``pid`` as a user of ``folder`` (written whole, then renamed: never read half-written)."""
    owners = _owners(folder) or []
    owners.append({"pid": pid, "started": psutil.Process(pid).create_time()})
    partial = folder / f".{OWNERS}.partial"
    partial.write_text(json.dumps(owners))
    partial.replace(folder / OWNERS)


def remove_abandoned(temp_dir: pathlib.Path | None = None) -> list[tuple[pathlib.Path, int, list[int]]]:
    """Removes every work folder whose recorded processes are all gone: (folder, bytes, the owners' pids)."""
    removed = []
    for folder in sorted(pathlib.Path(temp_dir or tempfile.gettempdir()).glob(PATTERN)):
        owners = _owners(folder)
        if not owners or any(_running(owner) for owner in owners):
            continue
        size = folder_size(folder)
        shutil.rmtree(folder, ignore_errors=True)
        removed.append((folder, size, [owner["pid"] for owner in owners]))
    return removed


def _owners(folder: pathlib.Path) -> list[dict] | None:
    try:
        return json.loads((folder / OWNERS).read_text())
    except (OSError, ValueError):
        return None


def _running(owner: dict) -> bool:
    try:
        process = psutil.Process(owner["pid"])
        return (abs(process.create_time() - owner["started"]) < SAME_START_S
                and process.status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:  # another user's process: it may well be the owner
        return True
