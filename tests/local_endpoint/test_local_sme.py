"""A single-model endpoint on the real Triton server, started like the SageMaker container."""

from __future__ import annotations

import os
import pathlib
import shutil
import signal
import socket
import time

import numpy as np
import psutil
import pytest

import triton_model_fixtures as models
from local_endpoint.client.http_call import call
from local_endpoint.client.invoke import invoke_url
from local_endpoint.client.payload import NamedTensor, encode_request
from local_endpoint.endpoints.single_model import SingleModelEndpoint
from local_endpoint.errors import InvokeError, PortInUseError, RestartLimitError, ServerCrashedError, ServerStartError
from local_endpoint.server.supervision import RestartPolicy

pytestmark = pytest.mark.triton

INPUT = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=np.float32)


@pytest.fixture(scope="module")
def ensemble_endpoint(tarballs: dict[str, pathlib.Path], module_tmp):
    log_file = module_tmp.mktemp("logs") / "ensemble.log"
    env = {"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "pipeline", "SAGEMAKER_TRITON_THREAD_COUNT": "4"}
    with SingleModelEndpoint(tarballs["ensemble"], env=env, log_file=log_file) as endpoint:
        yield endpoint


def send(endpoint, tensors: list[NamedTensor], binary: bool = False):
    return invoke_url(endpoint.url, encode_request(tensors, binary=binary))


def test_ping_answers_as_on_sagemaker(ensemble_endpoint) -> None:
    assert call("127.0.0.1", ensemble_endpoint.port, "GET", "/ping").status == 200


def test_ensemble_of_python_models_answers_correctly(ensemble_endpoint) -> None:
    # OUTPUT = INPUT * 2 + 1 through two Python-backend steps.
    response = send(ensemble_endpoint, [NamedTensor("INPUT", "FP32", INPUT)])
    assert response.model_name == "pipeline"
    assert response.outputs[0].array.tolist() == (INPUT * 2 + 1).tolist()


def test_json_and_binary_payloads_give_the_same_outputs(ensemble_endpoint) -> None:
    as_json = send(ensemble_endpoint, [NamedTensor("INPUT", "FP32", INPUT)], binary=False)
    as_binary = send(ensemble_endpoint, [NamedTensor("INPUT", "FP32", INPUT)], binary=True)
    assert np.array_equal(as_json.outputs[0].array, as_binary.outputs[0].array)
    assert as_binary.outputs[0].array.dtype == np.float32


def test_server_started_with_the_serve_scripts_flags(ensemble_endpoint) -> None:
    # The log opens with the exact command line: SageMaker front end only,
    # explicit control, the default model, env-derived flags, our backends.
    command = ensemble_endpoint.log_path.read_text().splitlines()[0]
    for flag in ("--allow-sagemaker=true", "--allow-http=false", "--model-control-mode=explicit",
                 "--load-model=pipeline", "--sagemaker-thread-count=4",
                 "--backend-config=python,shm-default-byte-size=16777216", "--backend-directory="):
        assert flag in command


@pytest.mark.parametrize(
    ("tensor", "message"),
    [
        (NamedTensor("IMAGE", "FP32", INPUT),
         "the endpoint rejected the request (HTTP 400): unexpected inference input 'IMAGE' for model 'pipeline'"),
        (NamedTensor("INPUT", "FP32", np.ones((2, 2, 2), dtype=np.float32)),
         "the endpoint rejected the request (HTTP 400): [request id: <id_unknown>] unexpected shape for input "
         "'INPUT' for model 'pipeline'. Expected [-1,-1], got [2,2,2]. NOTE: Setting a non-zero max_batch_size "
         "in the model config requires a batch dimension to be prepended to each input shape. If you want to "
         "specify the full shape including the batch dim in your input dims config, try setting "
         "max_batch_size to zero. See the model configuration docs for more info on max_batch_size."),
        (NamedTensor("INPUT", "INT32", INPUT.astype(np.int32)),
         "the endpoint rejected the request (HTTP 400): [request id: <id_unknown>] inference input 'INPUT' "
         "data-type is 'INT32', but model 'pipeline' expects 'FP32'"),
    ],
    ids=["wrong-name", "wrong-shape", "wrong-datatype"],
)
def test_bad_requests_surface_tritons_message(ensemble_endpoint, tensor: NamedTensor, message: str) -> None:
    with pytest.raises(InvokeError) as caught:
        send(ensemble_endpoint, [tensor])
    assert str(caught.value) == message


def test_a_port_in_use_is_refused_before_start(tarballs: dict[str, pathlib.Path]) -> None:
    with socket.socket() as squatter:
        squatter.bind(("0.0.0.0", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        with pytest.raises(PortInUseError) as caught:
            SingleModelEndpoint(tarballs["add"], port=port).start()
    assert str(caught.value) == (
        f"port {port} is already in use by another process; stop that process, choose another port "
        "with --port, or leave --port out to use a free one"
    )


def _log_lines(log_file: pathlib.Path) -> list[str]:
    """The log's lines as ServerProcess.log_tail splits them."""
    return log_file.read_text(errors="replace").rstrip("\n").splitlines()


def test_a_crash_mid_run_is_reported_with_the_log_tail(tarballs: dict[str, pathlib.Path], tmp_path: pathlib.Path) -> None:
    # The server dies while serving; the next check says how and shows the log.
    log_file = tmp_path / "crash.log"
    with SingleModelEndpoint(tarballs["add"], log_file=log_file) as endpoint:
        endpoint.check_running()  # healthy so far
        before = len(_log_lines(log_file))
        os.kill(endpoint.server_pid, signal.SIGKILL)
        with pytest.raises(ServerCrashedError) as caught:
            for _ in range(50):  # until the kernel has reaped it
                endpoint.check_running()
                time.sleep(0.1)
        # The orphaned Python stubs may still append to the log (their UNLOADING lines) after the error took its
        # tail: the message must show the last 30 lines of the log as it stood at some moment between the kill and
        # now, i.e. the 30 lines (or all, if fewer) ending at one line count from `before` on.
        with log_file.open("a") as log:  # the race made certain: a line after the tail was taken
            log.write("I0000 00:00:00.000000 1 model_lifecycle.cc:000] \"successfully unloaded 'add' version 1\"\n")
        lines = _log_lines(log_file)
        heading = f"the Triton server exited unexpectedly with signal SIGKILL; last lines of its log ({log_file}):\n"
        ends = [end for end in range(before, len(lines) + 1)
                if str(caught.value) == heading + "\n".join(lines[max(0, end - 30):end])]
        assert ends, f"{caught.value}\n--- is not the tail of the log as it grew:\n" + "\n".join(lines)
        assert max(ends) < len(lines)  # taken before the planted line
        with pytest.raises(InvokeError, match=r"^nothing answers at http://127\.0\.0\.1:\d+ \(Connection refused\)"):
            send(endpoint, [NamedTensor("A", "FP32", np.ones((1, 4), np.float32))])


def test_a_model_failing_to_load_stops_start_up_with_the_log(tmp_path: pathlib.Path) -> None:
    # A broken model.py: the server exits (as the container would) and we show why.
    models.write_model(tmp_path / "repo", "broken", models.ADD_CONFIG, {"model.py": "raise RuntimeError('boom')\n"})
    tarball = models.pack(tmp_path / "repo", tmp_path / "broken.tar.gz")
    with pytest.raises(ServerStartError) as caught:
        SingleModelEndpoint(tarball, log_file=tmp_path / "broken.log").start()
    message = str(caught.value)
    assert message.startswith(
        f"the Triton server exited during start-up with exit code 1; last lines of its log ({tmp_path / 'broken.log'}):\n"
    )
    assert "RuntimeError: boom" in message


def test_a_server_not_ready_in_time_is_stopped_and_reported(tmp_path: pathlib.Path) -> None:
    # A model still initialising at the deadline: stop the server, show the log.
    slow_model = "import time\n\n\nclass TritonPythonModel:\n    def initialize(self, args):\n        time.sleep(60)\n"
    models.write_model(tmp_path / "repo", "slow", models.ADD_CONFIG, {"model.py": slow_model})
    tarball = models.pack(tmp_path / "repo", tmp_path / "slow.tar.gz")
    endpoint = SingleModelEndpoint(tarball, log_file=tmp_path / "slow.log", startup_timeout=1)
    servers_before = triton_children()
    with pytest.raises(ServerStartError) as caught:
        endpoint.start()
    assert str(caught.value).startswith(
        "the Triton server did not answer /ping with 200 within 1 s; if the models are just slow to load, "
        f"raise the start-up timeout (--startup-timeout); last lines of its log ({tmp_path / 'slow.log'}):\n"
    )
    assert triton_children() == servers_before  # stopped, not left running


def triton_children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True) if p.name() == "tritonserver"}


def test_tritons_metrics_count_the_requests_sent(tarballs: dict[str, pathlib.Path]) -> None:
    # The spec's default container environment turns the metrics on (port 23000 on SageMaker); locally each
    # server gets a free port, and the counters match what was sent.
    from local_endpoint.server.triton_metrics import explain, scrape, since

    env = {"SAGEMAKER_TRITON_ALLOW_METRICS": "true", "SAGEMAKER_TRITON_METRICS_PORT": "23000"}
    with SingleModelEndpoint(tarballs["add"], env=env) as endpoint:
        assert endpoint.metrics_url is not None and not endpoint.metrics_url.endswith(":23000/metrics")
        before = scrape(endpoint.metrics_url)
        for _ in range(7):
            send(endpoint, [NamedTensor("A", "FP32", np.ones((1, 4), np.float32)),
                            NamedTensor("B", "FP32", np.ones((1, 4), np.float32))])
        after = since(scrape(endpoint.metrics_url), before)
    [(model, counters)] = after.items()
    assert (counters.requests, counters.inferences, counters.executions) == (7, 7, 7)
    assert counters.request_us >= counters.queue_us + counters.compute_us > 0
    assert explain(model, counters).startswith(f"{model}: 7 requests, no batches formed (one request per execution); ")


def test_metrics_stay_off_unless_the_environment_turns_them_on(tarballs: dict[str, pathlib.Path]) -> None:
    with SingleModelEndpoint(tarballs["add"]) as endpoint:
        assert endpoint.metrics_url is None
        assert "--allow-metrics=false" in endpoint.log_path.read_text().splitlines()[0]


def test_a_server_that_cannot_start_again_is_tried_until_the_restart_bound(
        tarballs: dict[str, pathlib.Path], tmp_path: pathlib.Path, capsys: pytest.CaptureFixture) -> None:
    # Supervised (as `tritonsm serve` does), a killed server whose model is gone fails to start again: each failed
    # start counts as a restart, and the bound ends it with the start's own reason.
    log_file = tmp_path / "loop.log"
    policy = RestartPolicy(max_restarts=2)
    with SingleModelEndpoint(tarballs["add"], log_file=log_file) as endpoint:
        endpoint.supervise(policy, "endpoint loop")
        repository = next(arg.split("=", 1)[1] for arg in _log_lines(log_file)[0].split()
                          if arg.startswith("--model-repository="))
        shutil.rmtree(pathlib.Path(repository) / "add")
        os.kill(endpoint.server_pid, signal.SIGKILL)
        time.sleep(0.5)
        with pytest.raises(RestartLimitError) as caught:
            endpoint.supervise(policy, "endpoint loop")
    failed = "the Triton server did not start again (the Triton server exited during start-up with exit code 1)"
    assert str(caught.value).startswith(
        f"endpoint loop: {failed}, and it has been restarted 2 time(s) within 600 s, the most allowed "
        "(--max-restarts 2, --restart-window 600); `tritonsm serve` stops: fix what the log shows and serve again (or "
        f"allow more restarts with --max-restarts); last lines of its log ({log_file}):\n")
    told = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning: ")]
    assert told == [
        "warning: endpoint loop: the Triton server exited unexpectedly with signal SIGKILL; restarting it (restart 1 "
        f"of at most 2 within 600 s), as SageMaker replaces a failed container; last lines of its log ({log_file}):",
        f"warning: endpoint loop: {failed}; restarting it (restart 2 of at most 2 within 600 s), as SageMaker "
        f"replaces a failed container; last lines of its log ({log_file}):"]
