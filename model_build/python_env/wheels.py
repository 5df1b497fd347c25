"""Downloading the resolved wheels (hashes required) and unpacking them into an environment.

Unpacking follows the wheel format (https://packaging.python.org/en/latest/specifications/binary-distribution-format/):
the archive's root goes to site-packages, ``<name>.data/{purelib,platlib}`` too, ``scripts`` to
``bin/`` with a ``#!python`` line rewritten to ``#!/usr/bin/env python3`` (the environment's own
``bin`` is first on PATH in the stub), ``data`` to the environment's root; ``headers`` are left out
(nothing compiles there). No ``.pyc`` is written: the bytecode would be for this machine's Python.
Entries are written in sorted order with only the executable bit kept, so the bytes do not depend
on the wheel's zip order or this machine's umask.
"""
from __future__ import annotations

import hashlib
import pathlib
import subprocess
import sys
import zipfile
from typing import Callable

from model_build.errors import BuildError
from model_build.python_env.resolve import Locked
from model_build.python_env.target import EnvTarget


def download(locked: list[Locked], target: EnvTarget, folder: pathlib.Path, log: Callable[[str], None],
             where: str) -> list[pathlib.Path]:
    """The wheel files of ``locked`` in ``folder`` (a shared cache), fetched once, sha256 checked."""
    folder.mkdir(parents=True, exist_ok=True)
    missing = [item for item in locked if not _verified(folder / item.filename, item.sha256)]
    if missing:
        requirements = folder / f".request-{_digest([m.requirement() for m in missing])[:16]}.txt"
        requirements.write_text("\n".join(m.requirement() for m in missing) + "\n")
        log(f"  downloading {len(missing)} of {len(locked)} wheels into {folder}")
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--require-hashes",
                   "--disable-pip-version-check", "--no-input", "--progress-bar", "off",
                   *target.pip_flags(), "-d", str(folder), "-r", str(requirements)]
        with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as pip:
            tail = []
            for line in pip.stdout:
                tail = (tail + [line.rstrip()])[-20:]
                if line.lstrip().startswith(("Downloading", "Saved", "File was already")):
                    log("    " + line.strip())
        requirements.unlink()
        if pip.returncode != 0:
            raise BuildError(f"{where}: downloading the environment's wheels failed:\n" + "\n".join(tail))
    paths = []
    for item in locked:
        path = folder / item.filename
        if not path.is_file():
            raise BuildError(f"{where}: pip reported success but {path} is not there; delete {folder} and build again")
        if not _verified(path, item.sha256):
            raise BuildError(f"{where}: {path} does not have the sha256 the resolution recorded ({item.sha256}); "
                             "delete it and build again")
        paths.append(path)
    return paths


def install(wheel: pathlib.Path, env_root: pathlib.Path, site_packages: pathlib.Path) -> int:
    """Unpacks one wheel; returns the bytes written."""
    written = 0
    with zipfile.ZipFile(wheel) as archive:
        data_prefix = _data_dir(archive)
        for info in sorted(archive.infolist(), key=lambda i: i.filename):
            if info.is_dir():
                continue
            destination = _destination(info.filename, data_prefix, env_root, site_packages)
            if destination is None:
                continue
            destination.parent.mkdir(parents=True, exist_ok=True)
            body = archive.read(info)
            if info.filename.startswith(f"{data_prefix}/scripts/") and body.startswith(b"#!python"):
                body = b"#!/usr/bin/env python3\n" + body.partition(b"\n")[2]
            destination.write_bytes(body)
            executable = (info.external_attr >> 16) & 0o111 or destination.parent.name == "bin"
            destination.chmod(0o755 if executable else 0o644)
            written += len(body)
    return written


def _data_dir(archive: zipfile.ZipFile) -> str:
    for name in archive.namelist():
        top = name.split("/", 1)[0]
        if top.endswith(".dist-info"):
            return top[: -len(".dist-info")] + ".data"
    raise BuildError(f"{archive.filename}: not a wheel (no .dist-info folder)")


def _destination(name: str, data_prefix: str, env_root: pathlib.Path, site_packages: pathlib.Path):
    if not name.startswith(data_prefix + "/"):
        return _inside(site_packages, name)
    kind, _, rest = name[len(data_prefix) + 1:].partition("/")
    if kind in ("purelib", "platlib"):
        return _inside(site_packages, rest)
    if kind == "scripts":
        return _inside(env_root / "bin", rest)
    if kind == "data":
        return _inside(env_root, rest)
    return None  # headers


def _inside(root: pathlib.Path, rel: str) -> pathlib.Path:
    path = (root / rel).resolve()
    if not path.is_relative_to(root.resolve()):
        raise BuildError(f"wheel entry {rel!r} points outside {root}")
    return path


def _verified(path: pathlib.Path, sha256: str) -> bool:
    if not path.is_file():
        return False
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest() == sha256


def _digest(lines: list[str]) -> str:
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()
