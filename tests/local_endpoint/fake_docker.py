"""A stand-in `docker` executable for tests on machines without a Docker engine (installed first on PATH).

It records every call (argv, and stdin for `login`) as one JSON line in $FAKE_DOCKER_LOG and behaves
like the docker CLI where the caller depends on it: `run` stays in the foreground, like an attached
`docker run`, serving a minimal SageMaker container contract on the published host port (`/ping`,
`/invocations`, the multi-model `/models` calls, each request recorded) until SIGTERM, which it
records; `stop NAME` sends that SIGTERM to the `run` of that name; `rm`, `pull`, `login` succeed;
`image inspect` succeeds when $FAKE_DOCKER_HAVE_IMAGE is 1. $FAKE_DOCKER_RUN_FAILS makes `run` print
that text and exit 125 at once (docker's own failure); $FAKE_DOCKER_CRASH_AFTER makes it exit 1
after that many seconds of serving.
"""
import json
import os
import pathlib
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOG = pathlib.Path(os.environ["FAKE_DOCKER_LOG"])
STATE = LOG.parent / "fake-docker-state"
ANSWER = {"model_name": "add", "outputs": [{"name": "SUM", "datatype": "FP32", "shape": [1, 4],
                                            "data": [1.0, 1.0, 1.0, 1.0]}]}


def record(**entry) -> None:
    with LOG.open("a") as log:
        log.write(json.dumps({"pid": os.getpid(), **entry}) + "\n")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):  # noqa: N802
        self._answer(200, {} if self.path == "/ping" else {"error": "no route"})

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        record(request=["POST", self.path], body=body.decode(errors="replace") if self.path == "/models" else None)
        self._answer(200, ANSWER if self.path.endswith(("/invocations", "/invoke")) else {})

    def do_DELETE(self):  # noqa: N802
        record(request=["DELETE", self.path])
        self._answer(200, {})

    def _answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


class ContainerServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        # A client that hangs up mid-request (a readiness poll given up on a loaded machine) is no event:
        # tritonserver logs no Python traceback for it, and the crash test reads this log as the container's.
        print(f"fake container: client {client_address[0]}:{client_address[1]} hung up ({sys.exc_info()[1]})",
              flush=True)


def run(argv: list[str]) -> int:
    if os.environ.get("FAKE_DOCKER_RUN_FAILS"):
        print(os.environ["FAKE_DOCKER_RUN_FAILS"], flush=True)
        return 125
    name = argv[argv.index("--name") + 1]
    host_port = int(argv[argv.index("-p") + 1].split(":")[1])
    STATE.mkdir(exist_ok=True)
    (STATE / name).write_text(str(os.getpid()))
    server = ContainerServer(("127.0.0.1", host_port), Handler)
    stopped = threading.Event()

    def on_term(signum, _frame):
        record(signal=signal.Signals(signum).name, name=name)
        stopped.set()

    signal.signal(signal.SIGTERM, on_term)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"fake container {name} serving on {host_port}", flush=True)
    crash_after = float(os.environ.get("FAKE_DOCKER_CRASH_AFTER") or 0)
    deadline = time.monotonic() + crash_after if crash_after else None
    while not stopped.wait(0.05):
        if deadline and time.monotonic() > deadline:
            print("boom: the model crashed the server", flush=True)
            server.shutdown()
            return 1
    server.shutdown()
    return 143  # the container's exit status after SIGTERM


def main(argv: list[str]) -> int:
    if argv[:1] == ["login"]:
        record(argv=argv, stdin=sys.stdin.read())
        return 0
    record(argv=argv)
    if argv[:1] == ["run"]:
        return run(argv)
    if argv[:1] == ["stop"]:
        pid_file = STATE / argv[-1]
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGTERM)
        return 0
    if argv[:2] == ["image", "inspect"]:
        return 0 if os.environ.get("FAKE_DOCKER_HAVE_IMAGE") == "1" else 1
    return 0  # rm, pull


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
