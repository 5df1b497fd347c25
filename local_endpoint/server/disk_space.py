"""A full disk while a local endpoint unpacks a model, told as what it is.

Unpacking a model archive (hundreds of MB for T5 or BERT-large), swapping in a Python execution environment or
writing CPU stand-ins all write under the endpoint's work folder in the temporary directory. SageMaker's Triton
front end answers a load that fails this way with HTTP 507 ("No space left on device" is among the
out-of-resource texts of Triton's src/sagemaker_server.cc); the local MME answers 507 with this error's message.
"""
from __future__ import annotations

import contextlib
import pathlib
import tempfile
from collections.abc import Iterator

from local_endpoint.errors import NoSpaceError
from model_build import disk_space


def folder_size(folder: pathlib.Path) -> int:
    """Bytes of the regular files under ``folder`` (links to the Triton install not followed)."""
    return sum(f.lstat().st_size for f in folder.rglob("*") if f.is_file() and not f.is_symlink())


@contextlib.contextmanager
def told_when_full(doing: str, folder: pathlib.Path) -> Iterator[None]:
    """Turns a full disk while ``doing`` (written into ``folder``) into a NoSpaceError with the fix."""
    try:
        yield
    except OSError as error:
        if not disk_space.is_full(error):
            raise
        raise NoSpaceError(disk_space.message(
            error, folder, doing, "free space on that disk, or point TMPDIR at a folder on a larger one and start "
            f"again (local endpoints unpack their models under {tempfile.gettempdir()})")) from None
