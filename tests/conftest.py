"""Shared test setup: the repository root on sys.path, a temporary directory of this session's own,
and a check that the session leaves no Triton server and no server folder behind."""
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# Everything this session puts in the temporary directory (the local endpoints' tritonsm-sme-* and
# tritonsm-mme-* folders, pytest's tmp_path, subprocesses' files) lands here, so what it leaves
# behind is told apart from other runs on the same machine.
SESSION_TMP = pathlib.Path(tempfile.mkdtemp(prefix="tritonsm-tests-"))
os.environ["TMPDIR"] = str(SESSION_TMP)
tempfile.tempdir = str(SESSION_TMP)

# Where this machine gives the local Triton server no network namespace of its own (no unprivileged user
# namespaces), each server warns on stderr that it listens on every interface (local_endpoint.server.loopback);
# the suite acknowledges that there, so tests that read stderr exactly still pass. test_loopback_only unsets it.
if subprocess.run([sys.executable, "-I", "-S", str(ROOT / "local_endpoint" / "server" / "loopback_launcher.py"),
                   "--probe"], capture_output=True).returncode != 0:
    os.environ.setdefault("TRITONSM_LISTEN_ALL", "1")


class ModuleTmp:
    """`tmp_path_factory.mktemp` for one test module's fixtures; what it made is removed when the module's
    tests are done. The suite's disk use is then the largest module's, not the sum of all of them (2.6 GB
    kept to the end measured on 2026-11-24, and CI's disk is shared: a full one failed a run)."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        self._factory = factory
        self.made: list[pathlib.Path] = []

    def mktemp(self, name: str) -> pathlib.Path:
        path = self._factory.mktemp(name)
        self.made.append(path)
        return path


@pytest.fixture(scope="module")
def module_tmp(tmp_path_factory: pytest.TempPathFactory):
    """Folders for module-scoped fixtures; torn down after the fixtures that use them (servers stop first)."""
    folders = ModuleTmp(tmp_path_factory)
    yield folders
    for path in folders.made:
        shutil.rmtree(path, ignore_errors=True)


def _leftovers() -> tuple[list[str], list[str]]:
    import psutil

    servers = []
    for process in psutil.process_iter(["name", "cmdline"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if process.info["name"] == "tritonserver" and str(SESSION_TMP) in cmdline:
            servers.append(f"pid {process.pid}: {cmdline[:160]}")
    folders = sorted(p.name for p in SESSION_TMP.glob("tritonsm-[sm]me-*"))
    return servers, folders


@pytest.fixture(scope="session", autouse=True)
def no_server_left_behind():
    """Fails the session (an error in its teardown) if a test left a server running or its folder."""
    yield
    servers, folders = _leftovers()
    if servers or folders:
        pytest.fail(f"the tests left behind Triton servers {servers} and server folders {folders} "
                    f"(in {SESSION_TMP}); every endpoint a test starts must be stopped", pytrace=False)
    shutil.rmtree(SESSION_TMP, ignore_errors=True)


# The suite's tiers: `make check` runs the modules recorded as fast; `make test` records every module's time.
sys.path.append(str(ROOT / "tests"))  # --import-mode=importlib puts no test folder on sys.path
import suite_tiers  # noqa: E402


def pytest_addoption(parser: pytest.Parser) -> None:
    suite_tiers.add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    # A plugin, not a hook of this file: a conftest's fixture hooks are not called for session fixtures.
    config.pluginmanager.register(suite_tiers.FixtureClock(), "suite_tiers.FixtureClock")


def pytest_ignore_collect(collection_path: pathlib.Path, config: pytest.Config) -> bool | None:
    return True if suite_tiers.is_left_out(config, collection_path) else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    suite_tiers.select(items)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    suite_tiers.count(report)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:  # pytest-xdist's hook, on the controller: a worker's figures
    suite_tiers.take_from_worker(node)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    suite_tiers.hand_to_controller(session.config)
    suite_tiers.write(session.config)
    # Under xdist the workers' folders (each checked and removed by its no_server_left_behind) lie in the
    # controller's, which runs no fixture: it removes its own when the run passed (kept to look at otherwise).
    if session.config.getoption("numprocesses", None) and not suite_tiers.is_xdist_worker(session.config) \
            and exitstatus == 0:
        shutil.rmtree(SESSION_TMP, ignore_errors=True)
