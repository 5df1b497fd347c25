"""The local Triton server is reachable from this machine's 127.0.0.1 only (``local_endpoint.server.loopback``).

Its SageMaker front end listens on 0.0.0.0 whatever its flags, so it runs in a network namespace of its own behind
127.0.0.1 relays; where the machine forbids that, it listens everywhere and says so. Reachability is checked from
an address of this machine that is not loopback: what anyone on its networks would connect to.
"""
from __future__ import annotations

import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np
import psutil
import pytest

from deployment_spec.sections.endpoint import EndpointKind
from local_endpoint.client.invoke import invoke_url
from local_endpoint.client.payload import NamedTensor, encode_request
from local_endpoint.endpoints.single_model import SingleModelEndpoint
from local_endpoint.runtime.local_runtime import LocalRuntime, NamedEndpoint
from local_endpoint.server import loopback, loopback_launcher
from local_endpoint.server.ports import free_port
from local_endpoint.server.server_process import accepts, ping

REPOSITORY_ROOT = pathlib.Path(__file__).resolve().parents[2]
METRICS_ON = {"SAGEMAKER_TRITON_ALLOW_METRICS": "true", "SAGEMAKER_TRITON_LOG_VERBOSE": "0"}
ONES = [NamedTensor("A", "FP32", np.ones((1, 4), np.float32)), NamedTensor("B", "FP32", np.ones((1, 4), np.float32))]
WHY_NOT = loopback.namespace_unavailable()
needs_namespace = pytest.mark.skipif(WHY_NOT is not None, reason=f"no network namespace on this machine: {WHY_NOT}")


def outside_address() -> str | None:
    """An IPv4 address of this machine that is not loopback, or None."""
    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if address.family == socket.AF_INET and not address.address.startswith("127."):
                return address.address
    return None


def reachable_from(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=2):
            return True
    except ConnectionRefusedError:
        return False


def listening_addresses(port: int) -> set[str]:
    """The local addresses something listens on ``port`` with, in this machine's network namespace."""
    return {c.laddr.ip for c in psutil.net_connections("tcp") if c.status == psutil.CONN_LISTEN
            and c.laddr.port == port}


@pytest.fixture
def without_listen_all(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(loopback.LISTEN_ALL_VARIABLE, raising=False)
    monkeypatch.delenv(loopback_launcher.NO_NAMESPACE_VARIABLE, raising=False)


@pytest.mark.triton
@needs_namespace
def test_the_triton_ports_answer_on_loopback_only(tarballs: dict[str, pathlib.Path], without_listen_all,
                                                  capsys: pytest.CaptureFixture) -> None:
    server = SingleModelEndpoint(tarballs["add"], env=METRICS_ON)
    with LocalRuntime([NamedEndpoint("Tests-dev-add", EndpointKind.SINGLE_MODEL, server)],
                      container_contract=True) as runtime:
        assert server.port is not None and server.metrics_url is not None
        metrics_port = int(server.metrics_url.split(":")[-1].split("/")[0])
        # The front, Triton's SageMaker port and its metrics port all answer on 127.0.0.1, as before...
        assert ping(runtime.port) == 200 and ping(server.port) == 200 and accepts(metrics_port)
        answer = invoke_url(runtime.url, encode_request(ONES, binary=False))
        assert answer.outputs[0].array.tolist() == [[2.0, 2.0, 2.0, 2.0]]
        # ...and on nothing else: this machine's namespace has 127.0.0.1 listeners only, Triton's 0.0.0.0 is its own.
        assert listening_addresses(server.port) == listening_addresses(metrics_port) == {"127.0.0.1"}
        outside = outside_address()
        if outside is not None:
            assert not reachable_from(outside, server.port)
            assert not reachable_from(outside, metrics_port)
        command = server.log_path.read_text().splitlines()[0]
    # The local-only flags come first, so SAGEMAKER_TRITON_ADDITIONAL_ARGS (last) can still override them.
    assert command.index("--metrics-address=127.0.0.1") < command.index("--allow-sagemaker=true")
    assert capsys.readouterr().err == ""


@pytest.mark.triton
def test_without_a_namespace_the_server_listens_everywhere_and_says_so(
        tarballs: dict[str, pathlib.Path], without_listen_all, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv(loopback_launcher.NO_NAMESPACE_VARIABLE, "1")   # as where unshare(2) is refused
    with SingleModelEndpoint(tarballs["add"], env=METRICS_ON) as endpoint:
        assert endpoint.port is not None and endpoint.metrics_url is not None
        metrics_port = int(endpoint.metrics_url.split(":")[-1].split("/")[0])
        assert psutil.Process(endpoint.server_pid).name() == "tritonserver"   # the launcher became the server
        assert listening_addresses(endpoint.port) == {"0.0.0.0"}
        assert listening_addresses(metrics_port) == {"127.0.0.1"}   # --metrics-address still applies
        outside = outside_address()
        if outside is not None:
            assert reachable_from(outside, endpoint.port)   # the exposure the namespace prevents, detected
            assert not reachable_from(outside, metrics_port)
        assert ping(endpoint.port) == 200
    assert capsys.readouterr().err == (
        f"warning: the Triton server on port {endpoint.port} listens on every network interface of this machine, so "
        "anyone who can reach the machine can call it (it asks for no credentials): it could not run in a network "
        "namespace of its own, reachable from 127.0.0.1 only (TRITONSM_NO_NAMESPACE is set); allow unprivileged "
        "user namespaces (user_namespaces(7); e.g. sysctl kernel.apparmor_restrict_unprivileged_userns=0 on Ubuntu, "
        "user.max_user_namespaces > 0) or serve on a machine that allows them; set TRITONSM_LISTEN_ALL=1 to serve on "
        "every interface knowingly, without this warning\n")


@pytest.mark.triton
def test_listen_all_starts_the_server_as_before(tarballs: dict[str, pathlib.Path], monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv(loopback.LISTEN_ALL_VARIABLE, "1")
    with SingleModelEndpoint(tarballs["add"], env=METRICS_ON) as endpoint:
        assert endpoint.port is not None and endpoint.metrics_url is not None
        metrics_port = int(endpoint.metrics_url.split(":")[-1].split("/")[0])
        command = endpoint.log_path.read_text().splitlines()[0]
        assert listening_addresses(endpoint.port) == listening_addresses(metrics_port) == {"0.0.0.0"}
    assert command.startswith("$ ") and command.split()[1].endswith("/bin/tritonserver")
    assert "127.0.0.1" not in command
    assert capsys.readouterr().err == ""


SERVE = "import sys; from local_endpoint.cli import serve_main; sys.exit(serve_main(sys.argv[1:]))"


@pytest.mark.triton
@needs_namespace
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL], ids=lambda s: s.name)
def test_a_stopped_serve_leaves_neither_server_nor_relay(tarballs: dict[str, pathlib.Path], without_listen_all,
                                                         stop: signal.Signals) -> None:
    serve = subprocess.Popen([sys.executable, "-c", SERVE, str(tarballs["add"]), "--env", "SAGEMAKER_TRITON_LOG_VERBOSE=0"],
                             cwd=REPOSITORY_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for line in serve.stdout:
            if "press Ctrl-C to stop" in line:
                break
        (launcher,) = psutil.Process(serve.pid).children()
        started = [launcher, *launcher.children(recursive=True)]
        assert {p.name() for p in started} >= {"tritonserver", "triton_python_backend_stub"}
        folder = pathlib.Path(launcher.cmdline()[4]).parent   # STATUS_FILE in the server's work folder
        port = next(c.laddr.port for c in launcher.net_connections("tcp") if c.status == psutil.CONN_LISTEN)
        assert ping(port) == 200
        serve.send_signal(stop)
        stdout, stderr = serve.communicate(timeout=60)
        if stop != signal.SIGKILL:
            assert (serve.returncode, stdout.strip(), stderr) == (0, "stopped", "")
        _, alive = psutil.wait_procs(started, timeout=30)   # SIGKILL: the parent-death signals stop them
        assert alive == []
        assert ping(port) is None and not accepts(port)
        left = subprocess.run(["pgrep", "-f", str(folder)], capture_output=True, text=True)
        assert (left.returncode, left.stdout) == (1, "")
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.communicate()
    shutil.rmtree(folder, ignore_errors=True)   # what a killed serve cannot remove


# The launcher on its own, with a stand-in server: a Python program listening on 0.0.0.0 after a delay.
_STAND_IN = """\
import os, socket, sys, time
port, delay, code = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
time.sleep(delay)
server = socket.create_server(("0.0.0.0", port))
if code == "kill":
    os.kill(os.getpid(), 9)
if code != "serve":
    sys.exit(int(code))
while True:
    connection, _ = server.accept()
    with connection:
        connection.sendall(f"{os.getuid()} {os.readlink('/proc/self/ns/net')}".encode())
"""


def run_launcher(tmp_path: pathlib.Path, port: int, delay: float, code: str) -> subprocess.Popen:
    """The launcher as ``start_sagemaker_triton`` runs it, relaying ``port`` to the stand-in."""
    return subprocess.Popen([*loopback.launcher_command([port], tmp_path / "status"),
                             sys.executable, "-c", _STAND_IN, str(port), str(delay), code],
                            stdout=subprocess.PIPE, text=True)


def wait_until(condition, seconds: float = 30) -> None:
    """Polls ``condition`` every 50 ms; fails after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.05)


def read_all(port: int) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as connection:
        return connection.recv(200).decode()


@needs_namespace
def test_a_relayed_port_refuses_until_the_server_listens_inside(tmp_path: pathlib.Path) -> None:
    port = free_port()
    launcher = run_launcher(tmp_path, port, delay=1.0, code="serve")
    try:
        wait_until((tmp_path / "status").exists)   # written once in the namespace, before the server starts
        assert (tmp_path / "status").read_text() == "isolated"
        assert not accepts(port)   # bound, not yet listening: refused, as a server not yet started
        wait_until(lambda: accepts(port))
        uid, namespace = read_all(port).split()
        assert int(uid) == os.getuid() and namespace != os.readlink("/proc/self/ns/net")
        outside = outside_address()
        if outside is not None:
            assert not reachable_from(outside, port)
    finally:
        launcher.terminate()
        launcher.communicate(timeout=30)
    assert launcher.returncode == -signal.SIGTERM   # the stand-in died of the SIGTERM passed on; so did the launcher


@needs_namespace
def test_a_sigterm_the_kernel_hands_to_a_relay_thread_still_stops_the_launcher(tmp_path: pathlib.Path) -> None:
    # A process-directed signal goes to any thread that does not block it. Python runs its handler in the main
    # thread, and only when that thread runs Python again: a main thread blocked in waitpid until the server ended
    # never passed the SIGTERM on (seen once in a suite on a loaded machine: 30 s, then a timeout). Sent here to a
    # relay thread on purpose (tgkill), the launcher must still stop the server and end as it did.
    import ctypes

    port = free_port()
    launcher = run_launcher(tmp_path, port, delay=0, code="serve")
    try:
        wait_until(lambda: accepts(port) or launcher.poll() is not None)
        read_all(port)
        threads = [int(t) for t in os.listdir(f"/proc/{launcher.pid}/task") if int(t) != launcher.pid]
        assert threads, "the launcher runs its relay in threads"
        libc = ctypes.CDLL(None, use_errno=True)
        assert libc.syscall(234, launcher.pid, threads[0], signal.SIGTERM) == 0   # 234: tgkill on x86-64
        launcher.communicate(timeout=10)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.communicate()
    assert launcher.returncode == -signal.SIGTERM


@needs_namespace
@pytest.mark.parametrize(("code", "returncode"), [("3", 3), ("kill", -signal.SIGKILL)])
def test_the_launcher_ends_as_its_server_did(tmp_path: pathlib.Path, code: str, returncode: int) -> None:
    launcher = run_launcher(tmp_path, free_port(), delay=0, code=code)
    launcher.communicate(timeout=30)
    assert launcher.returncode == returncode


def test_a_taken_port_is_said_in_the_log(tmp_path: pathlib.Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as squatter:
        port = squatter.getsockname()[1]
        launcher = run_launcher(tmp_path, port, delay=0, code="serve")
        stdout, _ = launcher.communicate(timeout=30)
    assert (launcher.returncode, stdout) == (
        1, f"tritonsm loopback launcher: cannot relay port {port}: Socket '127.0.0.1:{port}' already in use\n")


AS_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def _python_for_nobody() -> str | None:
    """A Python that user nobody may start, and that may start itself (the launcher starts the stand-in)."""
    itself = "import subprocess, sys; subprocess.run([sys.executable, '-c', ''], check=True)"
    for python in (sys.executable, "/usr/bin/python3"):
        if shutil.which("setpriv") and os.path.exists(python) and subprocess.run(
                [*AS_NOBODY, python, "-I", "-S", "-c", itself], capture_output=True).returncode == 0:
            return python
    return None


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the launcher as another, unprivileged user")
def test_an_unprivileged_user_gets_a_user_namespace_too(without_listen_all) -> None:
    """As root the launcher needs no user namespace; as anyone else it makes one, mapping the user to itself."""
    python = _python_for_nobody()
    if python is None:
        pytest.skip("no Python that user nobody may run (setpriv --reuid=65534)")
    shared = pathlib.Path("/tmp")   # the session's own temporary folders are root's alone (0700)
    if not (shared.is_dir() and shared.stat().st_mode & 0o001):
        pytest.skip("no /tmp that user nobody may enter")
    folder = pathlib.Path(tempfile.mkdtemp(prefix="tritonsm-loopback-", dir=shared))
    try:
        folder.chmod(0o777)
        shutil.copy(loopback.LAUNCHER, folder / "launcher.py")
        (folder / "launcher.py").chmod(0o644)
        launcher_as_nobody = [*AS_NOBODY, python, "-I", "-S", str(folder / "launcher.py")]
        why_not = subprocess.run([*launcher_as_nobody, loopback_launcher.PROBE], capture_output=True, text=True)
        if why_not.returncode:
            pytest.skip(f"this machine gives unprivileged users no user namespace: {why_not.stdout.strip()}{why_not.stderr.strip()}")
        port = free_port()
        launcher = subprocess.Popen(
            [*launcher_as_nobody, str(folder / "status"), str(port), "--", python, "-c", _STAND_IN, str(port), "0",
             "serve"], stdout=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 30
            while not accepts(port):
                assert time.monotonic() < deadline and launcher.poll() is None
                time.sleep(0.05)
            uid, namespace = read_all(port).split()
            assert (uid, (folder / "status").read_text()) == ("65534", "isolated")
            assert namespace != os.readlink("/proc/self/ns/net")
        finally:
            launcher.terminate()
            launcher.communicate(timeout=30)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
