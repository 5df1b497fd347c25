"""Side environments holding one serving runtime release (e.g. ``onnxruntime==1.21.0``), made on demand.

Each is a plain folder of installed wheels (``pip install --target``) from a committed lock file
with every wheel's sha256 (``locks/<package>-<version>.txt``, written by
scripts/gen_serving_locks.py), for the build's own interpreter. The serving worker runs with
``python -S`` and only that folder on its path, so the build's newer runtime cannot leak in.

Folders live in a cache shared by every checkout and build folder
(``$TRITONSM_CACHE_DIR``, else ``$XDG_CACHE_HOME/tritonsm``, else ``~/.cache/tritonsm``), named by
the lock file's hash; they are created in a temporary folder and renamed into place once the
runtime imports and reports the pinned version, so a failed or interrupted install leaves
nothing that could be mistaken for a runtime.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pathlib
import platform
import shutil
import subprocess
import sys
import tempfile
from typing import Callable

from model_build.errors import BuildError

LOCK_DIR = pathlib.Path(__file__).resolve().parent / "locks"
WORKER = pathlib.Path(__file__).resolve().parent / "worker.py"
PYTHON_VERSION = "3.11"  # scripts/bootstrap.sh insists on it; the locks are for cp311 wheels
NUMPY_PIN = "1.26.4"     # the build's numpy: the local stand-in shares one interpreter with it
MACHINES = ("x86_64", "aarch64")
READY = "tritonsm-runtime.json"


class ServingEnvError(BuildError):
    """A serving runtime could not be installed or started; the message says how to fix it."""


@dataclasses.dataclass(frozen=True)
class SideEnv:
    """One installed runtime: ``python -S WORKER`` with ``site_dir`` first on the path runs it."""

    package: str
    version: str
    site_dir: pathlib.Path

    def command(self, *args: str) -> list[str]:
        # -S: no site-packages of the build's venv; -E: no PYTHON* variables; the worker adds site_dir itself.
        return [sys.executable, "-S", "-E", str(WORKER), str(self.site_dir), *args]


def lock_path(package: str, version: str) -> pathlib.Path:
    return LOCK_DIR / f"{package}-{version}.txt"


def cache_root() -> pathlib.Path:
    explicit = os.environ.get("TRITONSM_CACHE_DIR")
    if explicit:
        return pathlib.Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(pathlib.Path.home() / ".cache")
    return pathlib.Path(base) / "tritonsm"


def ensure(package: str, version: str, log: Callable[[str], None] = print) -> SideEnv:
    """The side environment for ``package==version``, installed from its lock file if not cached yet."""
    lock = lock_path(package, version)
    if not lock.is_file():
        raise ServingEnvError(
            f"no lock file for {package}=={version} ({lock.relative_to(LOCK_DIR.parent.parent.parent)}); "
            f"write it with: .venv/bin/python scripts/gen_serving_locks.py {package}=={version}")
    _check_host()
    digest = hashlib.sha256(lock.read_bytes()).hexdigest()[:16]
    folder = cache_root() / "serving-runtimes" / f"{package}-{version}-py{PYTHON_VERSION}-{digest}"
    env = SideEnv(package, version, folder)
    if (folder / READY).is_file():
        return env
    folder.parent.mkdir(parents=True, exist_ok=True)
    log(f"  installing {package}=={version} (the serving runtime) into {folder} from {lock.name}; once per version")
    staging = pathlib.Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        _pip_install(lock, staging, package, version)
        _smoke(SideEnv(package, version, staging))
        (staging / READY).write_text(json.dumps({"package": package, "version": version, "lock": lock.name,
                                                 "lock_sha256": digest}, sort_keys=True) + "\n")
        try:
            staging.rename(folder)
        except OSError:  # another build installed the same runtime meanwhile: use that one
            if not (folder / READY).is_file():
                raise
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return env


def _check_host() -> None:
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    if sys.platform != "linux" or platform.machine() not in MACHINES or here != PYTHON_VERSION:
        raise ServingEnvError(
            f"the serving-runtime check installs Linux wheels for CPython {PYTHON_VERSION} "
            f"({', '.join(MACHINES)}); this build runs CPython {here} on {sys.platform} {platform.machine()}: "
            "run the build on Linux with the project's .venv (make)")


def _pip_install(lock: pathlib.Path, target: pathlib.Path, package: str, version: str) -> None:
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-input",
           "--require-hashes", "--only-binary=:all:", "--no-deps", "--target", str(target), "-r", str(lock)]
    proc = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        noise = "is ignored: it is neither a file nor a directory"
        tail = [line for line in proc.stderr.strip().splitlines() if noise not in line][-4:]
        raise ServingEnvError(
            f"cannot install {package}=={version}, the runtime the endpoint serves with, for the serving-runtime "
            f"check (pip exit {proc.returncode}: {' | '.join(tail) or 'no output'}); the build needs the package "
            "index once per runtime version (pip's PIP_INDEX_URL / PIP_FIND_LINKS settings apply)")


def _smoke(env: SideEnv) -> None:
    proc = subprocess.run(env.command("version", env.package), capture_output=True, text=True,
                          stdin=subprocess.DEVNULL)
    found = proc.stdout.strip()
    if proc.returncode != 0 or found != env.version:
        detail = proc.stderr.strip().splitlines()[-1:] or [f"it reports version {found!r}"]
        raise ServingEnvError(f"{env.package}=={env.version} installed but does not start here ({detail[0]}); "
                              f"delete {env.site_dir.parent} and build again")
