"""A CPython of the image's version on this host, for the Python-backend stub of that version.

The stub embeds libpython X.Y and the standard library of that same release; the execution
environments `tritonsm build` ships point their `bin/python3` at the image's `/usr/bin/python3`
(model_build.python_env.target). On a host whose `/usr/bin/python3` is another release, another
CPython X.Y with a shared libpython (python3.X on PATH, /usr/bin, /usr/local/bin, pyenv's versions)
stands in for it.
"""
from __future__ import annotations

import dataclasses
import glob
import json
import os
import pathlib
import shutil
import subprocess
from typing import Optional

_PROBE = ("import importlib.util, json, os, sys, sysconfig; print(json.dumps({"
          "'version': '%d.%d' % sys.version_info[:2], 'executable': os.path.realpath(sys.executable), "
          "'shared': bool(sysconfig.get_config_var('Py_ENABLE_SHARED')), 'libdir': sysconfig.get_config_var('LIBDIR'), "
          "'numpy': importlib.util.find_spec('numpy') is not None}))")


@dataclasses.dataclass(frozen=True)
class Interpreter:
    version: str
    executable: str
    shared: bool
    libdir: Optional[str]
    numpy: bool


def probe(executable: str) -> Optional[Interpreter]:
    """The facts of `executable`, or None if it does not run (a pyenv shim of an inactive version, say)."""
    try:
        done = subprocess.run([executable, "-c", _PROBE], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    try:
        return Interpreter(**json.loads(done.stdout))
    except (ValueError, TypeError):
        return None


def candidates(version: str) -> list[str]:
    name = f"python{version}"
    found = [shutil.which(name), f"/usr/bin/{name}", f"/usr/local/bin/{name}"]
    pyenv = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    found += sorted(glob.glob(f"{pyenv}/versions/{version}.*/bin/{name}"), reverse=True)
    return list(dict.fromkeys(p for p in found if p and pathlib.Path(p).exists()))


def find(version: str, *, need_numpy: bool = False) -> tuple[Optional[Interpreter], list[str]]:
    """The first usable CPython `version` with a shared libpython (and numpy if asked), and what was tried."""
    tried = []
    for path in candidates(version):
        found = probe(path)
        if found and found.version == version and found.shared and (found.numpy or not need_numpy):
            return found, tried
        tried.append(f"{path} ({_why_not(found, version, need_numpy)})")
    return None, tried


def _why_not(found: Optional[Interpreter], version: str, need_numpy: bool) -> str:
    if found is None:
        return "does not run"
    if found.version != version:
        return f"CPython {found.version}"
    if not found.shared:
        return "no shared libpython"
    return "no numpy" if need_numpy and not found.numpy else "unusable"
