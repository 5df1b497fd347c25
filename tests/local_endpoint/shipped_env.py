"""A Python step's ``model.py`` run inside the execution environment that ships to the endpoint.

The local server serves each step in an environment rebuilt for this machine's Python (local_endpoint/
python_envs.py); the one in the tarball is built for the image's CPython (3.12 for Triton 25.09). Where that
interpreter is installed here (pyenv's ``python3.12``), this runs the step's code with the shipped packages
alone on the path (``-I``, as the Python backend's stub sees ``EXECUTION_ENV_PATH``): the wheels that ship,
for the Python that serves, not the build machine's.
"""
from __future__ import annotations

import pathlib
import pickle
import shutil
import subprocess
import tarfile
import tempfile
from typing import Any, Optional

from model_build import layout

# Runs in the shipped environment: imports the step's model.py, calls CALL on it, pickles what it made.
CHILD = r"""
import importlib.util, pickle, sys
site, model_py, args_file, out_file = sys.argv[1:5]
sys.path.insert(0, site)
spec = importlib.util.spec_from_file_location("step", model_py)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
args = pickle.load(open(args_file, "rb"))
step = module.Preprocess(args["folder"], args["params"])
call = getattr(step, args["method"])
made = {"made": [call(rows) for rows in args["batches"]], "python": sys.version.split()[0],
        "site": [m.__file__ for m in (__import__("numpy"), __import__("transformers"))]}
pickle.dump(made, open(out_file, "wb"))
"""


def interpreter(python: str) -> Optional[str]:
    """``python`` (e.g. "python3.12") where it runs here: on PATH, or one of pyenv's versions (whose shim on
    PATH refuses a version that is not selected), else None."""
    minor = python.removeprefix("python")
    candidates = [shutil.which(python)] + [str(p) for p in sorted(
        pathlib.Path.home().glob(f".pyenv/versions/{minor}.*/bin/{python}"))]
    for found in filter(None, candidates):
        if subprocess.run([found, "-c", "import sys"], capture_output=True).returncode == 0:
            return found
    return None


def run_preprocess(step_dir: pathlib.Path, python: str, method: str, rows: Any, params: dict[str, str]) -> dict:
    """``Preprocess(folder, params).<method>(rows)`` of the step in ``step_dir`` inside its shipped environment."""
    done = run_preprocess_each(step_dir, python, method, [rows], params)
    return {**done, "made": done["made"][0]}


def run_preprocess_each(step_dir: pathlib.Path, python: str, method: str, batches: list[Any],
                        params: dict[str, str]) -> dict:
    """``run_preprocess`` on each of ``batches`` (requests of different shapes), in one environment and one child:
    "made" is the list of what each made (the environment's unpacking and transformers' import are most of it)."""
    (archive,) = step_dir.glob("python-env-*.tar.gz")
    with tempfile.TemporaryDirectory() as work_dir:
        work = pathlib.Path(work_dir)
        with tarfile.open(archive) as tar:
            tar.extractall(work / "env", filter="tar")  # bin/python3 links to the image's interpreter
        (site,) = (work / "env").glob("lib/python3*/site-packages")
        (work / "args.pkl").write_bytes(pickle.dumps({"folder": str(layout.version_dir(step_dir)), "params": params,
                                                     "method": method, "batches": batches}))
        subprocess.run([python, "-I", "-c", CHILD, str(site), str(layout.version_dir(step_dir) / "model.py"),
                        str(work / "args.pkl"), str(work / "out.pkl")], check=True, capture_output=True, text=True)
        return pickle.loads((work / "out.pkl").read_bytes())
