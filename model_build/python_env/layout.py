"""The files that make an unpacked folder an environment the Python backend's stub can use."""
from __future__ import annotations

import pathlib

from model_build.python_env.target import EnvTarget

# Sourced by bash in the stub launcher up to python_backend r25.07; from r25.08 the launcher sets
# the same variables itself and only checks that this file exists (src/stub_launcher.cc).
ACTIVATE = """\
# Made by tritonsm for Triton's Python backend (EXECUTION_ENV_PATH); bash only.
VIRTUAL_ENV="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export VIRTUAL_ENV
PATH="$VIRTUAL_ENV/bin:$PATH"
export PATH
unset PYTHONHOME
"""


def site_packages(root: pathlib.Path, target: EnvTarget) -> pathlib.Path:
    return root / "lib" / f"python{target.python}" / "site-packages"


def write_skeleton(root: pathlib.Path, target: EnvTarget) -> None:
    """bin/activate, bin/python3 -> the target's interpreter, pyvenv.cfg, an empty site-packages.

    ``include-system-site-packages = false``: the model sees the environment's packages and the
    standard library only, never whatever the image or this machine has installed besides.
    """
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "activate").write_text(ACTIVATE)
    (bin_dir / "python3").symlink_to(target.interpreter)
    (bin_dir / "python").symlink_to("python3")
    (bin_dir / f"python{target.python}").symlink_to("python3")
    home = str(pathlib.PurePosixPath(target.interpreter).parent)
    (root / "pyvenv.cfg").write_text(f"home = {home}\ninclude-system-site-packages = false\n"
                                     f"version = {target.python}\n")
    site_packages(root, target).mkdir(parents=True)
