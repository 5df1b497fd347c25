"""Where the Triton server of the nvidia-pytriton wheel lives, and how to run it.

The wheel ships `tritonserver`, the Python backend (`libtriton_python.so`) and
one `triton_python_backend_stub` per Python version. Started directly (not
through PyTriton's API), Triton looks for the stub next to
`libtriton_python.so` and fails with "triton_python_backend_stub is not found".
We therefore assemble a backend directory of our own from symlinks; the
installed wheel is never written to.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import pathlib
import sys
import sysconfig

from local_endpoint.errors import LocalEndpointError

# Triton resolves these without a backend library of their own.
BUILT_IN_BACKENDS = ("ensemble",)
# The wheel the Triton server comes from, installed with --no-deps (its Python API's dependencies clash with
# sagemaker's pins; only its tritonserver binary is used). scripts/bootstrap.sh reads this line.
PYTRITON = "nvidia-pytriton==0.7.0"


@dataclasses.dataclass(frozen=True)
class TritonInstall:
    """Paths inside the installed nvidia-pytriton wheel."""

    root: pathlib.Path

    @property
    def server_binary(self) -> pathlib.Path:
        return self.root / "bin" / "tritonserver"

    @property
    def backends_dir(self) -> pathlib.Path:
        return self.root / "backends"

    @property
    def bundled_libs_dir(self) -> pathlib.Path:
        # auditwheel puts the shared libraries next to the package directory.
        return self.root.parent.parent / "nvidia_pytriton.libs"

    def stub_for(self, python_version: str) -> pathlib.Path:
        return self.root / "python_backend_stubs" / python_version / "triton_python_backend_stub"

    def available_backends(self) -> tuple[str, ...]:
        """Backend names this server can load, e.g. ('ensemble', 'python')."""
        shipped = sorted(p.name for p in self.backends_dir.iterdir() if p.is_dir())
        return tuple(sorted(set(shipped) | set(BUILT_IN_BACKENDS)))


def find_triton_install() -> TritonInstall:
    """Locate the Triton server inside the installed nvidia-pytriton wheel."""
    spec = importlib.util.find_spec("pytriton")
    if spec is None or spec.origin is None:
        raise LocalEndpointError(
            "the Triton server comes from the PyPI package nvidia-pytriton, which is not installed "
            f"in this Python ({sys.executable}); install it without its dependencies: {sys.executable} -m pip "
            f"install --no-deps {PYTRITON} (in a checkout, scripts/bootstrap.sh does it) and try again"
        )
    install = TritonInstall(pathlib.Path(spec.origin).parent / "tritonserver")
    if not install.server_binary.is_file():
        raise LocalEndpointError(
            f"nvidia-pytriton is installed but {install.server_binary} is missing; "
            f"reinstall it: {sys.executable} -m pip install --force-reinstall --no-deps {PYTRITON}"
        )
    return install


@dataclasses.dataclass(frozen=True)
class StubPython:
    """The CPython a Python-backend stub embeds: its version, a folder whose `python3` is it, its libpython folder."""

    version: str
    bin_dir: pathlib.Path
    libdir: str | None


def this_python() -> StubPython:
    """This interpreter, whose stub the local endpoint runs."""
    shared = sysconfig.get_config_var("Py_ENABLE_SHARED")
    return StubPython(f"{sys.version_info.major}.{sys.version_info.minor}", pathlib.Path(sys.prefix) / "bin",
                      sysconfig.get_config_var("LIBDIR") if shared else None)


def prepare_backend_directory(install: TritonInstall, destination: pathlib.Path,
                              python_version: str | None = None) -> pathlib.Path:
    """Build a `--backend-directory` whose python backend has the stub of `python_version` (default: this Python's).

    Every shipped backend is linked as is; the python backend gets its library
    and utilities linked file by file plus the stub for that Python.
    Returns `destination`.
    """
    python_version = python_version or this_python().version
    stub = install.stub_for(python_version)
    if not stub.is_file():
        shipped = sorted(p.name for p in (install.root / "python_backend_stubs").iterdir())
        raise LocalEndpointError(
            f"nvidia-pytriton has no Python backend stub for Python {python_version} "
            f"(it ships stubs for {', '.join(shipped)}); run the local endpoint with one of those "
            "Python versions (the project pins 3.11)"
        )
    destination.mkdir(parents=True, exist_ok=True)
    for backend in install.backends_dir.iterdir():
        if not backend.is_dir():
            continue
        target = destination / backend.name
        if backend.name != "python":
            _symlink(backend, target)
            continue
        target.mkdir(exist_ok=True)
        for item in backend.iterdir():
            if item.is_file():
                _symlink(item, target / item.name)
        _symlink(stub, target / stub.name)
    return destination


def server_process_environment(install: TritonInstall, extra: dict[str, str],
                               python: StubPython | None = None) -> dict[str, str]:
    """The environment for `tritonserver`: ours, plus `extra`, plus two paths.

    - The stub embeds libpython and finds its prefix by looking up `python3`
      on PATH; putting this interpreter's bin directory first makes the model
      code see this virtualenv's site-packages (numpy, torch, transformers).
    - The stub links libpython3.11.so.1.0 dynamically; without help the
      loader takes the system's copy (e.g. Debian's 3.11.2), older than this
      interpreter's standard library, and extension modules such as `_ssl`
      (imported by transformers) fail with "undefined symbol: _PyModule_Add".
      This interpreter's own libpython directory goes first.
    - `python` names another CPython for the stub of its version (`tritonsm verify --gpu` runs
      the image's); both paths are then that interpreter's.
    - Libraries the backends open by name at run time resolve against the
      wheel's bundled libraries, as PyTriton arranges it too.
    """
    # Only the given container environment counts, not SAGEMAKER_* variables
    # that happen to be set in the user's shell.
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAGEMAKER_")}
    env.update(extra)
    python = python or this_python()
    env["PATH"] = os.pathsep.join([str(python.bin_dir), env.get("PATH", "")])
    library_path = [str(install.bundled_libs_dir)]
    if python.libdir:
        library_path.insert(0, python.libdir)
    if env.get("LD_LIBRARY_PATH"):
        library_path.append(env["LD_LIBRARY_PATH"])
    env["LD_LIBRARY_PATH"] = os.pathsep.join(library_path)
    return env


def _symlink(source: pathlib.Path, link: pathlib.Path) -> None:
    if link.is_symlink() or link.exists():
        if link.is_symlink() and link.resolve() == source.resolve():
            return
        link.unlink()
    link.symlink_to(source)
