"""Starts `tritonserver` in a network namespace of its own, reachable from this machine's 127.0.0.1 only.

Triton's SageMaker front end takes no address: it listens on 0.0.0.0 (`sagemaker_address_{"0.0.0.0"}` in
src/command_line_parser.h, with no option to change it; `tritonserver --help` of the nvidia-pytriton 0.7.0 wheel
lists `--sagemaker-port` only). Run on a developer's machine, that is an unauthenticated inference server open to
its networks. This launcher, run as a script by ``local_endpoint.server.loopback`` (standard library only, so it
starts with ``python -I -S``), keeps it off them:

1. binds 127.0.0.1:<port> for each relayed port while still in this machine's network namespace: a socket stays in
   the namespace it was created in (network_namespaces(7));
2. unshare(2)s a network namespace (with a user namespace unless it may create one plainly, i.e. as root):
   user_namespaces(7) lets an unprivileged process create one, and gives it the capabilities, in it, to bring up the
   new namespace's only interface, `lo`, whose 0.0.0.0 is then 127.0.0.1 of that namespace alone;
3. starts tritonserver there (dying with this launcher, PR_SET_PDEATHSIG), and relays each connection accepted on
   the host-side sockets to 127.0.0.1:<port> inside. A host-side socket listens only once Triton listens on its
   port inside, so a connection is refused until then, as it was when Triton listened itself (the readiness wait
   relies on it for the metrics port).

Python-backend stubs talk to Triton through shared memory in /dev/shm: the mount and IPC namespaces are unchanged.

Where the namespace cannot be made (unprivileged user namespaces turned off, a container's seccomp profile), or the
variable ``NO_NAMESPACE_VARIABLE`` is set (tests), the launcher writes why to the status file and becomes
tritonserver itself (execv), listening as the SageMaker container does; the caller warns. SIGTERM, SIGINT and SIGHUP
are passed on to tritonserver; the launcher exits as tritonserver did (same exit code, or the same signal).

Usage: python -I -S loopback_launcher.py STATUS_FILE PORT[,PORT...] -- TRITONSERVER ARGUMENTS...
"""
from __future__ import annotations

import ctypes
import errno
import os
import resource
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

NO_NAMESPACE_VARIABLE = "TRITONSM_NO_NAMESPACE"   # tests: behave as on a machine without user namespaces
ISOLATED = "isolated"   # the status file's content when tritonserver runs in a namespace of its own
PROBE = "--probe"   # argv[1]: only report whether a namespace can be made (exit 0), or why not (exit 1)

CLONE_NEWUSER = 0x10000000   # <linux/sched.h>
CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1   # <linux/prctl.h>
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1   # <linux/sockios.h>, <net/if.h>
LISTEN_POLL_SECONDS = 0.02
WAIT_STEP_SECONDS = 0.2  # the longest a signal taken by a relay thread waits for the main thread to pass it on
TCP_LISTEN = "0A"   # the state column of /proc/net/tcp for a listening socket (include/net/tcp_states.h)
CHUNK = 65536

_libc = ctypes.CDLL(None, use_errno=True)


def _unshare(flags: int) -> None:
    if _libc.unshare(flags) != 0:
        number = ctypes.get_errno()
        raise OSError(number, os.strerror(number))


def _write(path: str, text: str) -> None:
    with open(path, "w") as file:
        file.write(text)


def enter_namespace() -> None:
    """Move this (single-threaded) process into a new network namespace whose `lo` is up; OSError saying why not."""
    if os.environ.get(NO_NAMESPACE_VARIABLE):
        raise OSError(errno.EPERM, f"{NO_NAMESPACE_VARIABLE} is set")
    try:
        _unshare(CLONE_NEWNET)   # enough with CAP_SYS_ADMIN (root): no user namespace, file access unchanged
    except OSError:
        uid, gid = os.geteuid(), os.getegid()
        try:
            _unshare(CLONE_NEWUSER | CLONE_NEWNET)
        except OSError as error:
            raise OSError(error.errno, f"unshare(CLONE_NEWUSER|CLONE_NEWNET): {error.strerror}") from None
        # The same ids inside (files, /dev/shm and signals see the same user); an unprivileged process must deny
        # setgroups(2) before it may write gid_map (user_namespaces(7)).
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as control:   # created inside: it configures that lo
        import fcntl

        request = struct.pack("16sh22x", b"lo", 0)
        flags = struct.unpack("16sh22x", fcntl.ioctl(control, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(control, SIOCSIFFLAGS, struct.pack("16sh22x", b"lo", flags | IFF_UP))


def _bind_host_side(port: int) -> socket.socket:
    host_side = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    host_side.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # as Triton's own listener
    try:
        host_side.bind(("127.0.0.1", port))
    except OSError as error:
        host_side.close()
        if error.errno == errno.EADDRINUSE:
            _log(f"cannot relay port {port}: Socket '127.0.0.1:{port}' already in use")
            sys.exit(1)
        raise
    return host_side


def _listening_inside(port: int) -> bool:
    """Whether something in this namespace listens on ``port`` (read from /proc, so Triton sees no probe)."""
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        try:
            with open(table) as rows:
                next(rows)
                for row in rows:
                    local, state = row.split()[1], row.split()[3]
                    if state == TCP_LISTEN and int(local.rsplit(":", 1)[1], 16) == port:
                        return True
        except OSError:
            continue
    return False


def _relay(host_side: socket.socket, port: int, server: subprocess.Popen) -> None:
    while not _listening_inside(port):
        if server.poll() is not None:
            return
        time.sleep(LISTEN_POLL_SECONDS)
    host_side.listen(socket.SOMAXCONN)
    while True:
        try:
            client, _ = host_side.accept()
        except OSError:
            return
        threading.Thread(target=_connect, args=(client, port), daemon=True).start()


def _connect(client: socket.socket, port: int) -> None:
    try:
        inside = socket.create_connection(("127.0.0.1", port))   # a new socket: made in Triton's namespace
    except OSError:
        # Triton stopped listening: reset, as a closed port would refuse.
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.close()
        return
    for end in (client, inside):
        end.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)   # pass each write on as it comes
    answers = threading.Thread(target=_pump, args=(inside, client), daemon=True)
    answers.start()
    _pump(client, inside)
    answers.join()
    client.close()
    inside.close()


def _pump(source: socket.socket, destination: socket.socket) -> None:
    try:
        while data := source.recv(CHUNK):
            destination.sendall(data)
        destination.shutdown(socket.SHUT_WR)   # pass a half-close on
    except OSError:
        for end in (source, destination):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _log(line: str) -> None:
    print(f"tritonsm loopback launcher: {line}", flush=True)


def _die_with(parent: int) -> None:
    """In tritonserver before exec: SIGTERM when this launcher dies; exit at once if it already has."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:
        os._exit(1)


def _exit_as(code: int) -> None:
    """End this process as tritonserver ended: its exit code, or killed by the same signal (without a core)."""
    sys.stdout.flush()
    if code >= 0:
        os._exit(code)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if -code not in (signal.SIGKILL, signal.SIGSTOP):   # which have no handler to reset
        signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
    os._exit(128 - code)


def main(argv: list[str]) -> None:
    if argv[1:] == [PROBE]:
        try:
            enter_namespace()
        except OSError as error:
            print(error.strerror or str(error))
            sys.exit(1)
        sys.exit(0)
    status_file, ports, command = argv[1], [int(p) for p in argv[2].split(",")], argv[4:]
    stopping: list[int] = []
    server: list[subprocess.Popen] = []

    def pass_on(number: int, _frame: object) -> None:
        stopping.append(number)
        if server:
            server[0].send_signal(signal.SIGTERM if number == signal.SIGHUP else number)

    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, pass_on)
    parent = os.getppid()
    host_sides = [_bind_host_side(port) for port in ports]
    try:
        enter_namespace()
    except OSError as error:
        for host_side in host_sides:
            host_side.close()
        _write(status_file + ".part", error.strerror or str(error))
        os.replace(status_file + ".part", status_file)
        _log(f"not in a network namespace of its own ({error.strerror or error}): tritonserver listens on every "
             "interface of this machine")
        if stopping:   # told to stop before tritonserver started
            _exit_as(-stopping[0])
        for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(number, signal.SIG_DFL)
        os.execv(command[0], command)
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)   # kept through unshare; set again should the kernel clear it
    if os.getppid() != parent:
        sys.exit(1)
    _write(status_file + ".part", ISOLATED)
    os.replace(status_file + ".part", status_file)
    _log(f"tritonserver runs in a network namespace of its own; this machine reaches it on 127.0.0.1 only, port "
         f"{', '.join(map(str, ports))} relayed")
    launcher = os.getpid()
    server.append(subprocess.Popen(command, preexec_fn=lambda: _die_with(launcher)))
    if stopping:
        server[0].send_signal(signal.SIGTERM)
    for host_side, port in zip(host_sides, ports):
        threading.Thread(target=_relay, args=(host_side, port, server[0]), daemon=True).start()
    _exit_as(_wait(server[0]))


def _wait(server: subprocess.Popen) -> int:
    """The server's exit code, waited for in short steps. A signal sent to this process goes to any of its threads;
    Python runs the handler (``pass_on``) in the main thread, once that thread runs Python again. Blocked in a plain
    ``wait()`` (waitpid until the server ends) while a relay thread took the SIGTERM, it never passed it on."""
    while True:
        try:
            return server.wait(timeout=WAIT_STEP_SECONDS)
        except subprocess.TimeoutExpired:
            continue


if __name__ == "__main__":
    main(sys.argv)
