"""A full disk while a local endpoint unpacks a model, told as what it is.

Unpacking a model archive (hundreds of MB for T5 or BERT-large), swapping in a Python execution environment or
writing CPU stand-ins all write under the endpoint's work folder in the temporary directory. When that disk
fills up the OSError says only "[Errno 28] No space left on device: <some file>", and a reader blames the
archive or the server. SageMaker's Triton front end answers a load that fails this way with HTTP 507
("No space left on device" is among the out-of-resource texts of Triton's src/sagemaker_server.cc), and the
local MME does the same with this error's message.
"""
from __future__ import annotations

import contextlib
import errno
import pathlib
import shutil
import tempfile
from collections.abc import Iterator

from local_endpoint.errors import NoSpaceError
from local_endpoint.work_dirs import human_size

# ENOSPC: the disk is full; EDQUOT: the user's quota on it is.
FULL = (errno.ENOSPC, errno.EDQUOT)


def is_full(error: OSError) -> bool:
    return error.errno in FULL


@contextlib.contextmanager
def told_when_full(doing: str, folder: pathlib.Path) -> Iterator[None]:
    """Turns a full disk while ``doing`` (written into ``folder``) into a NoSpaceError with the fix."""
    try:
        yield
    except OSError as error:
        if not is_full(error):
            raise
        raise NoSpaceError(
            f"no space left on the disk of {folder} to {doing} ({error.strerror}; "
            f"{free_space(folder)} free there now); free space on that disk, or point TMPDIR at a folder on a "
            f"larger one and start again (local endpoints unpack their models under {tempfile.gettempdir()})"
        ) from None


def free_space(folder: pathlib.Path) -> str:
    """Free space on the disk of ``folder``, or of its nearest existing parent."""
    for candidate in (folder, *folder.parents):
        if candidate.exists():
            return human_size(shutil.disk_usage(candidate).free)
    return "unknown"
