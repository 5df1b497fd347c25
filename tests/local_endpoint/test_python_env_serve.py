"""The real Triton server runs a Python-backend model inside the execution environment the build made.

The model imports a package that exists only in that environment (a wheel made here, on no
index and in no virtualenv of this machine); the tarball is built for the Triton 25.09 image
(CPython 3.12) and `serve` rebuilds the environment for the local stub's Python.
"""
from __future__ import annotations

import importlib.util
import time
import pathlib
import sys

import numpy as np
import pytest

from deployment_spec.builds.manifest import load_manifest
from local_endpoint.client.invoke import invoke_url
from local_endpoint.client.payload import NamedTensor, encode_request
from local_endpoint.endpoints.single_model import SingleModelEndpoint
from local_endpoint.server import shm_leftovers
from tritonsm.cli import main as tritonsm_main

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import probe_wheels  # noqa: E402


@pytest.fixture(scope="module")
def tarball(module_tmp) -> pathlib.Path:
    root = module_tmp.mktemp("probe-env")
    probe_wheels.write_probe_project(root, "ProbeEnv")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PIP_FIND_LINKS", str(root / "wheels"))
        patch.setenv("TRITONSM_CACHE_DIR", str(root / "cache"))  # a probe wheel of another run is another file
        assert tritonsm_main(["build", "--spec", str(root / "spec.yaml"), "--out", str(root / "assets"),
                              "--work-dir", str(root / "work")]) == 0
        manifest = load_manifest(root / "assets" / "manifest.json")
        assert manifest.models["probe"].execution_environment.python == "3.12"  # built for the image
        (artifact,) = manifest.endpoints["probe-sme"].artifacts
        yield manifest.artifact_path(artifact)


def test_the_model_imports_a_package_only_the_environment_has(tarball):
    assert importlib.util.find_spec(probe_wheels.PROBE.replace("-", "_")) is None  # not in the server's Python
    local = f"{sys.version_info.major}.{sys.version_info.minor}"
    with SingleModelEndpoint(tarball) as endpoint:
        request = encode_request([NamedTensor("IN", "FP32", np.ones((2, 1), dtype=np.float32))], binary=False)
        (where,) = invoke_url(endpoint.url, request).outputs
        notes = endpoint.stand_in_notes
        log = endpoint.log_path.read_text()
    value, module_file, prefix = where.array[0][0].decode().split(" ")
    assert (where.name, where.array.shape, value) == ("WHERE", (2, 1), probe_wheels.PROBE_VALUE)
    # Triton unpacked the environment into /tmp/python_env_*/N and the stub took it as sys.prefix.
    assert "/python_env_" in prefix and module_file == f"{prefix}/lib/python{local}/site-packages/tritonsm_probe/__init__.py"
    assert "Using Python execution env " in log
    env_file = load_manifest(tarball.parent / "manifest.json").models["probe"].execution_environment.file
    assert notes == [f"probe/{env_file}: execution environment rebuilt for the local server (CPython {local}) "
                     "from the same 2 pinned requirements; the endpoint gets the one built for CPython 3.12"]


def test_a_killed_server_s_environments_are_removed_when_it_is_ended(tarball, capsys):
    """A server killed with SIGKILL cannot remove its /tmp/python_env_* folder nor its stubs' /dev/shm regions; the
    endpoint that ends it does (those its log names). A server that stops on its own removes them itself: the same
    call then finds nothing."""
    import os
    import signal

    with SingleModelEndpoint(tarball) as endpoint:
        request = encode_request([NamedTensor("IN", "FP32", np.ones((1, 1), dtype=np.float32))], binary=False)
        (where,) = invoke_url(endpoint.url, request).outputs
        folder = pathlib.Path(where.array[0][0].decode().split(" ")[2]).parent
        assert folder.is_dir() and folder.name.startswith("python_env_")
        os.kill(endpoint.server_pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while endpoint._process.exit_code() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert folder.is_dir()  # the killed server left it
        regions = shm_leftovers.regions_in_log(endpoint.log_path.read_text())
        left = [region for region in regions if region.exists()]
        assert regions and left, regions  # and shared memory of its stubs (a stub that saw it go unlinks its own)
        log_path = endpoint.log_path
    assert not folder.exists()
    assert not any(region.exists() for region in regions)
    assert f"tritonsm: removed {len(left)} shared-memory region(s) of the ended server's Python models from " \
           "/dev/shm (" in log_path.read_text()
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith(f"removed {folder} (")]
    assert len(said) == 1 and said[0].endswith("): the Python execution environments the ended Triton server left")
