"""MME model management against a scripted stand-in for Triton's /models API.

The real server cannot be made to answer 409 or 507 on demand; a small fake
can, so SageMaker's handling of those answers is tested here and the happy
paths on the real server (test_local_mme.py).
"""

from __future__ import annotations

import json
import pathlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from local_endpoint.endpoints.model_cache import MultiModelCache


class FakeTriton(ThreadingHTTPServer):
    """Answers /models calls from a script of statuses and records every call."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), FakeHandler)
        self.calls: list[tuple[str, str, str]] = []  # (method, path, target model header)
        self.load_statuses: list[tuple[int, str]] = []  # consumed one per POST /models
        threading.Thread(target=self.serve_forever, daemon=True).start()


class FakeHandler(BaseHTTPRequestHandler):
    server: FakeTriton

    def _answer(self, status: int, body: bytes = b"") -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        target = self.headers.get("X-Amzn-SageMaker-Target-Model", "")
        self.server.calls.append(("POST", self.path, target))
        if self.path == "/models":
            status, message = self.server.load_statuses.pop(0) if self.server.load_statuses else (200, "")
            self._answer(status, json.dumps({"error": message}).encode() if message else b"")
        else:
            self._answer(200, json.dumps({"model_name": target, "outputs": []}).encode())

    def do_DELETE(self) -> None:  # noqa: N802
        self.server.calls.append(("DELETE", self.path, self.headers.get("X-Amzn-SageMaker-Target-Model", "")))
        self._answer(200)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def fake() -> FakeTriton:
    server = FakeTriton()
    yield server
    server.shutdown()
    server.server_close()


def make_cache(fake: FakeTriton, tarballs: dict[str, pathlib.Path], tmp_path: pathlib.Path, capacity: int | None):
    archives = {tarballs[k].name: tarballs[k] for k in ("times2", "times3", "times4", "bare")}
    return MultiModelCache(archives, fake.server_address[1], tmp_path / "models", capacity)


def test_least_recently_used_model_is_unloaded_at_capacity(fake, tarballs, tmp_path) -> None:
    # Capacity 2: touching times2 again makes times3 the least recently used.
    cache = make_cache(fake, tarballs, tmp_path, capacity=2)
    for target in ("times2.tar.gz", "times3.tar.gz", "times2.tar.gz", "times4.tar.gz"):
        assert cache.invoke(target, b"{}", "application/json").status == 200
    assert cache.loaded_models() == ["times2.tar.gz", "times4.tar.gz"]
    assert cache.events == [
        ("load", "times2.tar.gz"), ("load", "times3.tar.gz"), ("unload", "times3.tar.gz"), ("load", "times4.tar.gz")
    ]


def test_load_and_invoke_carry_the_sagemaker_contract(fake, tarballs, tmp_path) -> None:
    # POST /models, then POST /models/<hash>/invoke, each naming the target model.
    cache = make_cache(fake, tarballs, tmp_path, capacity=None)
    cache.invoke("times2.tar.gz", b"{}", "application/json")
    (load_method, load_path, load_target), (_, invoke_path, invoke_target) = fake.calls
    assert (load_method, load_path, load_target) == ("POST", "/models", "times2.tar.gz")
    assert invoke_path.startswith("/models/") and invoke_path.endswith("/invoke")
    assert invoke_target == "times2.tar.gz"


def test_out_of_memory_on_load_unloads_an_idle_model_and_retries(fake, tarballs, tmp_path) -> None:
    # 507 is SageMaker's cue to free memory: unload the LRU model, load again.
    cache = make_cache(fake, tarballs, tmp_path, capacity=None)
    cache.invoke("times2.tar.gz", b"{}", "application/json")
    fake.load_statuses = [(507, "CUDA out of memory")]
    assert cache.invoke("times3.tar.gz", b"{}", "application/json").status == 200
    assert cache.loaded_models() == ["times3.tar.gz"]
    assert ("unload", "times2.tar.gz") in cache.events


def test_out_of_memory_with_nothing_to_unload_reaches_the_client(fake, tarballs, tmp_path) -> None:
    cache = make_cache(fake, tarballs, tmp_path, capacity=None)
    fake.load_statuses = [(507, "Out of memory")]
    reply = cache.invoke("times2.tar.gz", b"{}", "application/json")
    assert reply.status == 507
    assert json.loads(reply.body)["error"] == (
        f"loading target model 'times2.tar.gz' ({tarballs['times2']}) failed with HTTP 507: Out of memory"
    )


def test_already_loaded_counts_as_loaded(fake, tarballs, tmp_path) -> None:
    # 409 means Triton has the model already: invoke it rather than fail.
    cache = make_cache(fake, tarballs, tmp_path, capacity=None)
    fake.load_statuses = [(409, "model repository has already been registered")]
    assert cache.invoke("times2.tar.gz", b"{}", "application/json").status == 200
    assert cache.loaded_models() == ["times2.tar.gz"]


def test_a_failed_load_names_the_tarball_and_triton_message(fake, tarballs, tmp_path) -> None:
    cache = make_cache(fake, tarballs, tmp_path, capacity=None)
    fake.load_statuses = [(400, "failed to load 'times2.tar.gz'")]
    reply = cache.invoke("times2.tar.gz", b"{}", "application/json")
    assert (reply.status, json.loads(reply.body)["error"]) == (
        400, f"loading target model 'times2.tar.gz' ({tarballs['times2']}) failed with HTTP 400: failed to load 'times2.tar.gz'"
    )
    assert cache.loaded_models() == []


def test_bare_layout_is_registered_through_its_parent_directory(fake, tarballs, tmp_path) -> None:
    # The front end accepts a top-level config.pbtxt only under /opt/ml/models/;
    # one level up, Triton sees a single "model" directory and loads it the same.
    cache = make_cache(fake, tarballs, tmp_path, capacity=None)
    model = cache._prepare("bare.tar.gz")
    assert pathlib.Path(model.url).name == model.name_hash
    assert (pathlib.Path(model.url) / "model" / "config.pbtxt").is_file()


def test_a_busy_model_is_not_evicted(fake, tarballs, tmp_path) -> None:
    # With every loaded model in flight, a new load waits for one to finish.
    cache = make_cache(fake, tarballs, tmp_path, capacity=1)
    cache.invoke("times2.tar.gz", b"{}", "application/json")
    cache._take_if_loaded("times2.tar.gz")  # a request on times2 is now in flight
    done = threading.Event()
    threading.Thread(target=lambda: (cache.invoke("times3.tar.gz", b"{}", ""), done.set()), daemon=True).start()
    assert not done.wait(0.5)
    assert cache.loaded_models() == ["times2.tar.gz"]
    with cache._state:  # the request on times2 finishes
        cache._in_flight["times2.tar.gz"] -= 1
        cache._state.notify_all()
    assert done.wait(5)
    assert cache.loaded_models() == ["times3.tar.gz"]
