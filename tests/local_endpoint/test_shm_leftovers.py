"""The shared-memory regions a killed Triton server leaves in /dev/shm (local_endpoint/server/shm_leftovers.py):
named by the server's log, removed only where no live process maps them, and at a serve's start only once settled.
Regions here are files this test makes in a folder of its own, one of them mapped by this process (the rule's twin:
a region in use is kept)."""
from __future__ import annotations

import mmap
import os
import pathlib
import time

from local_endpoint.server import shm_leftovers

# A stub's start as Triton 24.10 logs it at --log-verbose 1 (python_backend r24.10 src/stub_launcher.cc).
LOG = ('I1130 03:12:58.154266 20435 stub_launcher.cc:385] "Starting Python backend stub: source '
       '/tmp/python_env_AbC123/0/bin/activate && exec env LD_LIBRARY_PATH=/tmp/python_env_AbC123/0/lib:$LD_LIBRARY_PATH '
       '/opt/backends/python/triton_python_backend_stub /m/calc/1/model.py '
       'triton_python_backend_shm_region_4c1d2f5e-9a8b-4c7d-8e6f-0123456789ab 1048576 1048576 20435 '
       '/opt/backends/python 336 calc_0_0 DEFAULT"\n'
       'I1130 03:12:58.2 20435 python_be.cc:2249] "TRITONBACKEND_ModelInstanceInitialize: calc_0 (CPU device 0)"\n'
       'I1130 03:12:59.0 20435 model.py:3] "triton_python_backend_shm_region_not-a-stub-line"\n')


def _region(root: pathlib.Path, name: str, age_s: float = 0.0) -> pathlib.Path:
    path = root / f"{shm_leftovers.PREFIX}{name}"
    path.write_bytes(b"\0" * 4096)
    if age_s:
        then = time.time() - age_s
        os.utime(path, (then, then))
    return path


def test_the_log_names_each_stubs_region(tmp_path: pathlib.Path) -> None:
    assert shm_leftovers.regions_in_log(LOG, tmp_path) == {
        tmp_path / "triton_python_backend_shm_region_4c1d2f5e-9a8b-4c7d-8e6f-0123456789ab"}


def test_a_region_a_live_process_maps_is_kept_and_a_dead_one_removed(tmp_path: pathlib.Path) -> None:
    used, dead = _region(tmp_path, "used"), _region(tmp_path, "dead")
    with used.open("r+b") as handle, mmap.mmap(handle.fileno(), 4096) as _mapping:
        assert used in shm_leftovers.mapped(tmp_path)
        assert shm_leftovers.remove([used, dead, tmp_path / "gone"], tmp_path) == [(dead, 4096)]
        assert used.exists() and not dead.exists()
    assert shm_leftovers.remove([used], tmp_path) == [(used, 4096)]  # unmapped now: removed


def test_at_a_serves_start_only_settled_unmapped_regions_go(tmp_path: pathlib.Path) -> None:
    old, fresh = _region(tmp_path, "old", age_s=shm_leftovers.SETTLED_S + 5), _region(tmp_path, "fresh")
    other = tmp_path / "not_a_triton_region"
    other.write_bytes(b"x")
    assert shm_leftovers.remove_abandoned(tmp_path) == [(old, 4096)]
    assert fresh.exists() and other.exists()  # a server may be starting; a file not of Triton's name is not ours
