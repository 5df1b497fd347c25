"""Where the Triton server is missing, the message says how a user of the wheel installs it."""
from __future__ import annotations

import subprocess
import sys

import pytest

from local_endpoint.errors import LocalEndpointError
from local_endpoint.server import triton_install


def test_without_nvidia_pytriton_the_message_gives_the_pip_command_of_this_python(monkeypatch):
    real = triton_install.importlib.util.find_spec
    monkeypatch.setattr(triton_install.importlib.util, "find_spec",
                        lambda name, *a: None if name == "pytriton" else real(name, *a))
    with pytest.raises(LocalEndpointError) as caught:
        triton_install.find_triton_install()
    assert str(caught.value) == (
        "the Triton server comes from the PyPI package nvidia-pytriton, which is not installed in this Python "
        f"({sys.executable}); install it without its dependencies: {sys.executable} -m pip install --no-deps "
        "nvidia-pytriton==0.7.0 (in a checkout, scripts/bootstrap.sh does it) and try again")


def test_bootstrap_installs_the_pin_the_message_names():
    # scripts/bootstrap.sh reads the pin from triton_install.py: one home for it.
    line = subprocess.run(["sed", "-n", r's/^PYTRITON = "\(.*\)"$/\1/p', triton_install.__file__],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert line == triton_install.PYTRITON == "nvidia-pytriton==0.7.0"
