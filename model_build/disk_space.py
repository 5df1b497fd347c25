"""A full disk, told as one: which disk, how much is free, and the fix, instead of a bare
"[Errno 28] No space left on device: <some file>" that reads like a broken file or a crashed server.

Used where the project writes hundreds of MB: the build (exported models, archives) and the local endpoints
(unpacked models, local_endpoint.server.disk_space); each caller names what it was doing and its own fix.
"""
from __future__ import annotations

import errno
import pathlib
import shutil

# ENOSPC: the disk is full; EDQUOT: the user's quota on it is.
FULL = (errno.ENOSPC, errno.EDQUOT)


def is_full(error: BaseException) -> bool:
    return isinstance(error, OSError) and error.errno in FULL


def message(error: OSError, folder: pathlib.Path, doing: str, fix: str) -> str:
    return (f"no space left on the disk of {folder} to {doing} ({error.strerror}; {free_space(folder)} free there "
            f"now); {fix}")


def free_space(folder: pathlib.Path) -> str:
    """Free space on the disk of ``folder``, or of its nearest existing parent."""
    for candidate in (folder, *folder.parents):
        if candidate.exists():
            return human_size(shutil.disk_usage(candidate).free)
    return "unknown"


def human_size(size: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size / 2**10:.1f} KiB"
