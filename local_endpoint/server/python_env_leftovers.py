"""The execution-environment folders that killed Triton servers leave in /tmp, removed.

Triton's Python backend unpacks the execution environments of a server's Python models under one folder it makes
when the backend loads, ``/tmp/python_env_XXXXXX`` (python_backend src/pb_env.cc, ``EnvironmentManager``: a fixed
path, ``TMPDIR`` does not move it), one subfolder per environment, and removes it when the server stops. A server
that is killed (SIGKILL, the out-of-memory killer, a hang that ``tritonsm serve`` ends before restarting it) leaves
it: the environments' unpacked size, 76 MB for a tokenizer step, GBs with torch; on this project's 2-core machine
such folders once filled the disk, and the next server could not start.

Nothing in the folder names its server. The server's log does, where it starts a stub in an environment (src/
stub_launcher.cc: "Starting Python backend stub: source /tmp/python_env_X/N/bin/activate ..." up to r25.07, then
"Activation script: /tmp/python_env_X/N/bin/activate"), so a server that ``tritonsm serve`` ends, or replaces
after it died, has its folder removed once it is gone (``folders_in_log``; ``TritonProcess.stop`` and ``kill``).
A serve killed whole cannot; the next serve removes what no live server can own: a folder no live process names
(each stub runs with ``VIRTUAL_ENV`` set to its environment: our ``bin/activate``, or the stub launcher itself from
r25.08), unless a live ``tritonserver`` that loaded the Python backend, started before the folder's last change and
names no folder of its own (one folder per server) may have made it.
"""
from __future__ import annotations

import os
import pathlib
import re
import shutil
from typing import Iterable

import psutil

from local_endpoint.server.disk_space import folder_size

ROOT = pathlib.Path("/tmp")
# A server makes its folder after its own start: psutil's start times are to about a clock tick, mtime to the ns.
SLACK_S = 1.0


def folders_in_log(text: str, root: pathlib.Path = ROOT) -> set[pathlib.Path]:
    """The folders a Triton server's log says it unpacked environments into."""
    return {pathlib.Path(match) for match in _pattern(root).findall(
        "\n".join(line for line in text.splitlines() if "stub_launcher.cc" in line))}


def _pattern(root: pathlib.Path) -> re.Pattern[str]:
    return re.compile(re.escape(str(root)) + r"/python_env_[A-Za-z0-9]{6}")


def folders_named_by(processes: Iterable[psutil.Process], root: pathlib.Path = ROOT) -> set[pathlib.Path]:
    """The /tmp/python_env_* folders whose environments these processes run with (their environment and command
    line); a process that is gone or not ours names none."""
    named: set[pathlib.Path] = set()
    for process in processes:
        try:
            text = " ".join([*process.environ().values(), *process.cmdline()])
        except (psutil.Error, OSError):
            continue
        named.update(pathlib.Path(match) for match in _pattern(root).findall(text))
    return named


def _loaded_python_backend(pid: int) -> bool:
    """Whether the server has the Python backend's library mapped (only then has it made a folder); a server
    whose maps cannot be read is taken to have it."""
    try:
        return "libtriton_python.so" in pathlib.Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return True


def remove(folders: Iterable[pathlib.Path]) -> list[tuple[pathlib.Path, int]]:
    """Removes those of ``folders`` that exist and are ours: (folder, bytes) of each."""
    removed = []
    for folder in sorted(folders):
        try:
            if folder.stat().st_uid != os.getuid():
                continue
        except OSError:
            continue
        size = folder_size(folder)
        shutil.rmtree(folder, ignore_errors=True)
        removed.append((folder, size))
    return removed


def remove_abandoned(root: pathlib.Path | None = None) -> list[tuple[pathlib.Path, int]]:
    """Removes every folder of ours under ``root`` (default ``ROOT``) that no live server can own (the module's
    rule)."""
    root = root or ROOT
    folders = [f for f in root.glob("python_env_*") if f.is_dir() and f.stat().st_uid == os.getuid()]
    if not folders:
        return []
    processes = list(psutil.process_iter(["name", "create_time"]))
    named_by = {process.pid: folders_named_by([process], root) for process in processes}
    named = set().union(*named_by.values())
    unattributed_starts = []  # live servers whose stubs name no folder: each may own one made after its start
    for process in processes:
        if process.info["name"] == "tritonserver" and _loaded_python_backend(process.pid):
            try:
                children = process.children(recursive=True)
            except psutil.Error:
                continue
            if not any(named_by.get(child.pid) for child in children):
                unattributed_starts.append(process.info["create_time"])
    abandoned = []
    for folder in folders:
        try:
            changed = folder.stat().st_mtime
        except OSError:
            continue
        if folder not in named and not any(start <= changed + SLACK_S for start in unattributed_starts):
            abandoned.append(folder)
    return remove(abandoned)
