"""Deterministic .tar.gz files, written atomically.

Same inputs, same bytes (the tarball's sha256 is the CDK asset hash and the S3 object name): entries sorted, mtime 0, uid/gid 0, no owner names, fixed
modes, gzip header without timestamp or file name. A tarball appears under its final name only
when complete (temp file + rename), so a failed build leaves no partial file behind.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import os
import pathlib
import tarfile
import tempfile
from typing import Callable, Iterator, Mapping, Optional

from model_build.gzip_stream import COMPRESSED, STORED, GzipStream, worth_compressing

DIR_MODE, FILE_MODE = 0o755, 0o644


@contextlib.contextmanager
def atomic_path(final: pathlib.Path) -> Iterator[pathlib.Path]:
    """Yields a temporary path next to ``final``; renamed onto it only if the block succeeds."""
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent)
    os.close(fd)
    try:
        yield pathlib.Path(tmp)
        os.chmod(tmp, FILE_MODE)  # mkstemp creates 0600; readers (CDK assets, the local endpoint) need 0644
        os.replace(tmp, final)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_text_atomic(final: pathlib.Path, text: str) -> None:
    with atomic_path(final) as tmp:
        tmp.write_text(text)


def members(tree: Mapping[str, pathlib.Path]) -> list[tuple[str, pathlib.Path]]:
    """(archive name, path on disk) for each top-level directory and everything under it, sorted by name.

    Empty directories count: an ensemble's version directory ``1/`` holds no file but must exist.
    """
    out = []
    for top, root in tree.items():
        out.append((top, root))
        for path in root.rglob("*"):
            if path.is_file() or path.is_dir():
                out.append((f"{top}/{path.relative_to(root).as_posix()}", path))
    return sorted(out)


def write_tarball(target: pathlib.Path, tree: Mapping[str, pathlib.Path],
                  replace: Optional[Mapping[str, bytes]] = None,
                  progress: Optional[Callable[[int], None]] = None,
                  extra: Optional[Mapping[str, bytes]] = None) -> str:
    """Packs ``{top-level dir name: source dir}`` into ``target``; returns its sha256.

    ``replace`` maps archive names to bytes used instead of the file on disk (renamed configs); ``extra`` adds
    files that are on no disk (signatures), each in its sorted place; ``progress`` is called with the number of
    input bytes consumed (for a progress bar).
    """
    replace = dict(replace or {})
    on_disk = members(tree)
    clash = sorted(set(extra or {}) & {name for name, _ in on_disk})
    if clash:
        raise ValueError(f"added files already in the archive: {clash}")
    replace.update(extra or {})
    entries = sorted(on_disk + [(name, target) for name in (extra or {})])
    with _deterministic_tar(target) as (tar, stream, digest):
        for name, path in entries:
            stream.use(COMPRESSED)
            if name in (extra or {}):
                data = replace.pop(name)
                tar.addfile(_info(name, tarfile.REGTYPE, len(data), FILE_MODE), io.BytesIO(data))
                continue
            if path.is_dir():
                tar.addfile(_info(name, tarfile.DIRTYPE, 0, DIR_MODE))
                continue
            data = replace.pop(name, None)
            if data is not None:
                tar.addfile(_info(name, tarfile.REGTYPE, len(data), FILE_MODE), io.BytesIO(data))
                continue
            # One mode for every file: the source's permission bits (umask, checkout) must not leak in.
            with open(path, "rb") as fh:
                size = _choose_level(stream, fh)
                source = _Counting(fh, progress) if progress else fh
                tar.addfile(_info(name, tarfile.REGTYPE, size, FILE_MODE), source)
        if replace:
            raise ValueError(f"replacement for files not in the archive: {sorted(replace)}")
    return digest.hexdigest()


def write_tree(target: pathlib.Path, root: pathlib.Path, first: tuple[str, ...] = ()) -> str:
    """Packs the contents of ``root`` (no top-level folder) into ``target``; returns its sha256.

    Unlike model tarballs, symbolic links stay links and executables stay executable (0755), as an
    execution environment's ``bin/`` needs; every other file is 0644. The names in ``first`` lead,
    so a reader of the stream finds them without decompressing the rest.
    """
    def order(path: pathlib.Path) -> tuple[bool, str]:
        name = path.relative_to(root).as_posix()
        return name not in first, name

    with _deterministic_tar(target) as (tar, stream, digest):
        for path in sorted(root.rglob("*"), key=order):
            name = path.relative_to(root).as_posix()
            stream.use(COMPRESSED)
            if path.is_symlink():
                info = _info(name, tarfile.SYMTYPE, 0, 0o777)
                info.linkname = os.readlink(path)
                tar.addfile(info)
            elif path.is_dir():
                tar.addfile(_info(name, tarfile.DIRTYPE, 0, DIR_MODE))
            else:
                mode = DIR_MODE if path.stat().st_mode & 0o111 else FILE_MODE
                with open(path, "rb") as fh:
                    tar.addfile(_info(name, tarfile.REGTYPE, _choose_level(stream, fh), mode), fh)
    return digest.hexdigest()


@contextlib.contextmanager
def _deterministic_tar(target: pathlib.Path):
    """A PAX tar in a gzip stream without timestamp or name, hashed while written, renamed on success."""
    digest = hashlib.sha256()
    with atomic_path(target) as tmp:
        with open(tmp, "wb") as raw, _HashingWriter(raw, digest) as hashed, GzipStream(hashed) as stream, \
                tarfile.open(fileobj=stream, mode="w", format=tarfile.PAX_FORMAT) as tar:
            yield tar, stream, digest


def _choose_level(stream: GzipStream, fh) -> int:
    """Stores a file deflate would not shrink (weights), compresses the rest; returns the file's size."""
    size = os.fstat(fh.fileno()).st_size
    if not worth_compressing(size, fh):
        stream.use(STORED)
    return size


def _info(name: str, kind: bytes, size: int, mode: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.size, info.mode = kind, size, mode
    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
    return info


class _HashingWriter(io.RawIOBase):
    """Hashes the compressed bytes while they are written, so the file is read only once."""

    def __init__(self, raw, digest) -> None:
        self._raw, self._digest = raw, digest

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self._digest.update(data)
        return self._raw.write(data)


class _Counting:
    def __init__(self, fh, progress: Callable[[int], None]) -> None:
        self._fh, self._progress = fh, progress

    def read(self, size: int = -1) -> bytes:
        data = self._fh.read(size)
        self._progress(len(data))
        return data


def total_bytes(tree: Mapping[str, pathlib.Path]) -> int:
    return sum(p.stat().st_size for _, p in members(tree) if p.is_file())
