"""`serve` and `invoke` as a user runs them: exit codes and messages, never a traceback."""

from __future__ import annotations

import json
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

import numpy as np
import psutil
import pytest

from local_endpoint.server import work_dirs
from deployment_spec.sections.endpoint import EndpointKind
from local_endpoint.cli import invoke_main, serve_main
from local_endpoint.endpoints.single_model import SingleModelEndpoint
from local_endpoint.runtime.local_runtime import LocalRuntime, NamedEndpoint
from local_endpoint.server.ports import free_port
from tritonsm.cli import main as tritonsm_main

REPOSITORY_ROOT = pathlib.Path(__file__).resolve().parents[2]
SERVE = "import sys; from local_endpoint.cli import serve_main; sys.exit(serve_main(sys.argv[1:]))"


def run_serve(*args: str, preexec_fn=None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", SERVE, *args], cwd=REPOSITORY_ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, preexec_fn=preexec_fn,
    )


def assert_ctrl_c_stops_it(process: subprocess.Popen) -> None:
    """SIGINT to a started `serve`: it stops its server and exits 0 saying "stopped"."""
    server = psutil.Process(process.pid).children()[0]
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=30)
    assert (process.returncode, stdout.strip(), stderr) == (0, "stopped", "")
    assert not server.is_running()


def wait_for_line(process: subprocess.Popen, text: str) -> list[str]:
    lines = []
    for line in process.stdout:
        lines.append(line.rstrip("\n"))
        if text in line:
            return lines
    raise AssertionError(f"serve ended before printing {text!r}: {lines} {process.stderr.read()}")


@pytest.mark.triton
def test_serve_runs_until_ctrl_c_and_stops_the_server(tarballs: dict[str, pathlib.Path]) -> None:
    port = free_port()
    process = run_serve(str(tarballs["add"]), "--port", str(port), "--env", "SAGEMAKER_TRITON_LOG_VERBOSE=0")
    lines = wait_for_line(process, "press Ctrl-C to stop")
    assert lines[:2] == [f"serving 1 model archive(s) (SME) at http://127.0.0.1:{port}", "default model: add"]
    assert_ctrl_c_stops_it(process)


@pytest.mark.triton
def test_serve_restarts_a_killed_server_once_then_stops_at_the_bound(tarballs: dict[str, pathlib.Path]) -> None:
    # --max-restarts 1: the first SIGKILL is a restart (on the same port: the address printed stays right), the
    # second ends serve with the bound, and nothing of it is left.
    log_file = pathlib.Path(tempfile.mkdtemp()) / "bound.log"
    process = run_serve(str(tarballs["add"]), "--max-restarts", "1", "--log-file", str(log_file))
    wait_for_line(process, "press Ctrl-C to stop")
    first = psutil.Process(process.pid).children()[0]
    first.kill()
    wait_for_line(process, "endpoint tritonsm-local: the Triton server serves again (restarted in ")
    second = psutil.Process(process.pid).children()[0]
    assert second.pid != first.pid
    started = psutil.Process(process.pid).children(recursive=True)
    second.kill()
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 1
    warning, error = stderr.split("\nerror: ")
    assert warning.startswith(
        "warning: endpoint tritonsm-local: the Triton server exited unexpectedly with signal SIGKILL; restarting it "
        "(restart 1 of at most 1 within 600 s), as SageMaker replaces a failed container; last lines of its log "
        f"({log_file}):\n")
    assert error.startswith(
        "endpoint tritonsm-local: the Triton server exited unexpectedly with signal SIGKILL, and it has been "
        "restarted 1 time(s) within 600 s, the most allowed (--max-restarts 1, --restart-window 600); `tritonsm "
        "serve` stops: fix what the log shows and serve again (or allow more restarts with --max-restarts); last "
        f"lines of its log ({log_file}):\n")
    assert "Traceback" not in stderr
    _, alive = psutil.wait_procs(started, timeout=20)
    assert alive == []
    shutil.rmtree(log_file.parent)


@pytest.mark.parametrize(("flags", "message"), [
    (["--max-restarts", "-1"], "--max-restarts -1: give 0 or more (0: stop on the first failure)"),
    (["--restart-window", "0"], "--restart-window 0: give a number of seconds above 0"),
    (["--unhealthy-after", "-2"], "--unhealthy-after -2: give a number of seconds above 0"),
])
def test_restart_flags_out_of_range_are_refused(flags: list[str], message: str, tarballs, capsys) -> None:
    assert serve_main([str(tarballs["add"]), *flags]) == 1
    assert capsys.readouterr().err == f"error: {message}\n"


def test_serve_reports_a_busy_port(tarballs: dict[str, pathlib.Path], capsys: pytest.CaptureFixture) -> None:
    with socket.socket() as squatter:
        squatter.bind(("0.0.0.0", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        assert serve_main([str(tarballs["add"]), "--port", str(port)]) == 1
    assert capsys.readouterr().err == (
        f"error: port {port} is already in use by another process; stop that process, choose another port "
        "with --port, or leave --port out to use a free one\n"
    )


def test_serve_reports_a_bare_config_tarball(tarballs: dict[str, pathlib.Path], capsys: pytest.CaptureFixture) -> None:
    assert serve_main([str(tarballs["bare"])]) == 1
    assert capsys.readouterr().err.startswith(
        f"error: model archive {tarballs['bare']} has config.pbtxt at its top level (found: 1, config.pbtxt); "
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["a.tar.gz", "b.tar.gz"], "--mode sme serves one tarball, got 2; use --mode mme for several"),
        (["a.tar.gz", "--env", "THREADS"], "--env 'THREADS' must be KEY=VALUE, e.g. --env SAGEMAKER_TRITON_THREAD_COUNT=16"),
        (["a.tar.gz", "--mme-capacity", "2"], "--mme-capacity applies to --mode mme only"),
        (["--mode", "mme", "a.tar.gz", "--default-model", "x"],
         "--default-model applies to --mode sme only; an MME picks the model per request (tritonsm invoke --target-model)"),
    ],
)
def test_serve_argument_mistakes(argv: list[str], message: str, capsys: pytest.CaptureFixture) -> None:
    assert serve_main(argv) == 2
    assert capsys.readouterr().err.endswith(f"tritonsm serve: error: {message}\n")


@pytest.fixture(scope="module")
def add_endpoint(tarballs: dict[str, pathlib.Path]):
    # As `tritonsm serve` runs it: behind the local SageMaker Runtime, which `invoke --url` calls through boto3.
    named = NamedEndpoint("Tests-dev-add", EndpointKind.SINGLE_MODEL, SingleModelEndpoint(tarballs["add"]))
    with LocalRuntime([named], container_contract=True) as endpoint:
        yield endpoint


@pytest.mark.triton
@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
def test_invoke_prints_and_saves_outputs(add_endpoint, tmp_path: pathlib.Path, capsys, binary: bool) -> None:
    np.savez(tmp_path / "in.npz", A=np.full((1, 4), 1.5, np.float32), B=np.ones((1, 4), np.float32))
    argv = ["--url", add_endpoint.url, "--input", str(tmp_path / "in.npz"), "--output", str(tmp_path / "out.json")]
    assert invoke_main(argv + (["--binary"] if binary else [])) == 0
    assert capsys.readouterr().out == (
        f"model: add\nSUM FP32 [1, 4]\n[[2.5 2.5 2.5 2.5]]\noutputs saved to {tmp_path / 'out.json'}\n"
    )
    assert json.loads((tmp_path / "out.json").read_text())["outputs"][0]["data"] == [2.5] * 4


@pytest.mark.triton
def test_invoke_reports_a_rejected_request(add_endpoint, tmp_path: pathlib.Path, capsys) -> None:
    np.save(tmp_path / "a.npy", np.ones((1, 4), np.float32))
    assert invoke_main(["--url", add_endpoint.url, "--input", str(tmp_path / "a.npy"), "--input-name", "A"]) == 1
    original = ("[request id: <id_unknown>] expected 2 inputs but got 1 inputs for model 'add'. Got input(s) ['A'], "
                "but missing required input(s) ['B']. Please provide all required input(s).")
    # The container's 400 reaches boto3 as SageMaker's ModelError, its status and message as the original's.
    assert capsys.readouterr().err == (
        "error: endpoint 'Tests-dev-add' rejected the request (ModelError, HTTP 400): Received client error (400) "
        f"from AllTraffic with message \"{{\"error\":\"{original}\"}}\". "
        f"See {add_endpoint.endpoints[0].server.log_path} "
        "(deployed: log group /aws/sagemaker/Endpoints/Tests-dev-add) for more information.\n"
    )


@pytest.mark.triton
@pytest.mark.parametrize("path", ["/invocations", "/endpoints/Tests-dev-add/invocations", "/"])
def test_invoke_takes_the_paths_people_paste_after_the_address(add_endpoint, path: str, tmp_path, capsys) -> None:
    # Before, `--url http://127.0.0.1:PORT/invocations` sent boto3 to /invocations/endpoints/...: Triton's
    # 400 came back as "rejected the request (400, HTTP 400): " with no reason.
    np.savez(tmp_path / "in.npz", A=np.full((1, 4), 1.5, np.float32), B=np.ones((1, 4), np.float32))
    assert invoke_main(["--url", add_endpoint.url + path, "--input", str(tmp_path / "in.npz")]) == 0
    assert capsys.readouterr().out == "model: add\nSUM FP32 [1, 4]\n[[2.5 2.5 2.5 2.5]]\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--url", "http://127.0.0.1:9/v2/models/add/infer"],
         "--url 'http://127.0.0.1:9/v2/models/add/infer' has a path this command does not call (/v2/models/add/infer); "
         "give the address `tritonsm serve` prints, e.g. http://127.0.0.1:9 (the request goes to "
         "/endpoints/<EndpointName>/invocations, as InvokeEndpoint's does)"),
        (["--url", "http://127.0.0.1:9/invocations?x=1"],
         "--url 'http://127.0.0.1:9/invocations?x=1' has a path this command does not call (/invocations?x=1); "
         "give the address `tritonsm serve` prints, e.g. http://127.0.0.1:9 (the request goes to "
         "/endpoints/<EndpointName>/invocations, as InvokeEndpoint's does)"),
        (["--url", "http://127.0.0.1:9/endpoints/T-dev-a/invocations", "--endpoint-name", "T-dev-b"],
         "--url 'http://127.0.0.1:9/endpoints/T-dev-a/invocations' names endpoint 'T-dev-a' but the request is "
         "for 'T-dev-b'; give one of them"),
    ],
)
def test_invoke_refuses_a_url_path_it_would_not_call(argv: list[str], message: str, tmp_path, capsys) -> None:
    np.save(tmp_path / "a.npy", np.ones((1, 4), np.float32))
    assert invoke_main([*argv, "--input", str(tmp_path / "a.npy"), "--input-name", "A"]) == 1
    assert capsys.readouterr().err == f"error: {message}\n"


def test_invoke_reports_nothing_listening(tmp_path: pathlib.Path, capsys) -> None:
    np.save(tmp_path / "a.npy", np.ones((1, 4), np.float32))
    port = free_port()
    assert invoke_main(["--url", f"http://127.0.0.1:{port}", "--input", str(tmp_path / "a.npy"), "--input-name", "A"]) == 1
    assert capsys.readouterr().err == (
        f"error: nothing answers at http://127.0.0.1:{port} (Connection refused); start the endpoint first "
        "(tritonsm serve ...) or fix --url\n"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--url", "http://x:1", "--text", "hi", "--tokenizer", "tok", "--text-pair", "there"],
         "--text-pair goes with --text, sent as raw text (without --tokenizer)"),
        (["--url", "http://x:1", "--input", "in.json", "--text-pair", "there"],
         "--text-pair goes with --text, sent as raw text (without --tokenizer)"),
        (["--url", "http://x:1", "--text", "hi", "--input-name", "T", "--output", "o.csv"], "--output o.csv must end in .json or .npz"),
        (["--text", "hi"], "one of the arguments --url --endpoint-name is required"),
        (["--url", "http://x:1", "--text", "hi", "--parameter", "threshold"],
         "--parameter 'threshold' must be KEY=VALUE, e.g. --parameter threshold=0.3"),
    ],
)
def test_invoke_argument_mistakes(argv: list[str], message: str, capsys) -> None:
    assert invoke_main(argv) == 2
    assert capsys.readouterr().err.endswith(f"tritonsm invoke: error: {message}\n")


# What `tritonsm invoke --url URL --help` shows (at 100 columns): the request options of the local endpoint.
INVOKE_URL_HELP = """\
usage: tritonsm invoke [-h] [--url URL] [--endpoint-name ENDPOINT_NAME] [--region REGION]
                       [--target-model TARGET_MODEL] [--inference-component INFERENCE_COMPONENT]
                       (--input INPUT | --text TEXT | --image FILE [FILE ...] | --audio FILE [FILE ...])
                       [--text-pair TEXT_PAIR] [--input-name INPUT_NAME] [--tokenizer TOKENIZER]
                       [--max-length MAX_LENGTH] [--token-datatype {INT64,INT32}] [--binary]
                       [--parameter KEY=VALUE] [--output OUTPUT] [--stream] [--timeout TIMEOUT]

Send one KServe v2 request through boto3's sagemaker-runtime InvokeEndpoint to a local endpoint
(--url) or a deployed one (--endpoint-name).

options:
  -h, --help            show this help message and exit
  --url URL             the local SageMaker Runtime of `tritonsm serve`, e.g.
                        http://127.0.0.1:8080
  --endpoint-name ENDPOINT_NAME
                        the EndpointName: a deployed SageMaker endpoint, or with --url one the
                        local runtime serves (default there: its only one)
  --region REGION       the deployed endpoint's region (default: boto3's)
  --target-model TARGET_MODEL
                        MME: the model archive to run, e.g. resnet.tar.gz
  --inference-component INFERENCE_COMPONENT
                        an endpoint of inference components: the component to run
                        (InferenceComponentName)
  --input INPUT         inputs: KServe v2 .json, .npy (with --input-name) or .npz
  --text TEXT           text input: sent as BYTES --input-name (default TEXT, what a task's
                        ensemble takes), or tokenized with --tokenizer
  --image FILE [FILE ...]
                        image files (JPEG, PNG, WebP) sent as their encoded bytes: one BYTES row
                        each as IMAGE (what an image task's ensemble takes, in binary+json), or
                        with --input-name one UINT8 row each (a DALI model or an ensemble starting
                        with one)
  --audio FILE [FILE ...]
                        audio files (WAV, FLAC, Ogg, MP3...) sent as their bytes, one BYTES row
                        each as AUDIO (what an audio task's ensemble takes, in binary+json); one
                        file per request for clips of different lengths
  --text-pair TEXT_PAIR
                        with --text: the second text of a pair, sent as BYTES TEXT_PAIR (a
                        question-answering context, an NLI hypothesis, a reranked passage)
  --input-name INPUT_NAME
                        model input fed by a .npy file, by raw --text or by --image
  --tokenizer TOKENIZER
                        directory of the model's saved tokenizer
  --max-length MAX_LENGTH
                        pad/truncate tokens to this length (fixed-shape models)
  --token-datatype {INT64,INT32}
                        datatype of the token inputs (default INT64)
  --binary              send binary+json (application/vnd.sagemaker-triton.binary+json) instead of
                        JSON
  --parameter KEY=VALUE
                        a KServe v2 request parameter, repeatable; VALUE is read as JSON where it
                        is one (numbers, true/false), else as text; e.g. --parameter threshold=0.3
                        for a detector
  --output OUTPUT       also save the outputs (.json or .npz)
  --stream              call InvokeEndpointWithResponseStream with --text as the generate JSON
                        {"text_input": TEXT, "parameters": {--parameter ...}} of a decoupled
                        (streaming) model, or one --audio FILE as {"audio": <base64>, ...} of a
                        speech model, printing each event's text_output as it arrives
  --timeout TIMEOUT     seconds to wait for a local endpoint
"""


@pytest.mark.parametrize("argv", [["--url", "http://127.0.0.1:8080", "--help"], ["-h", "--url=http://127.0.0.1:8080"]])
def test_invoke_help_with_a_url_shows_the_request_options(argv: list[str], monkeypatch, capsys) -> None:
    # `tritonsm invoke --help` promises these options "as in `tritonsm invoke --url URL --help`".
    monkeypatch.setenv("COLUMNS", "100")
    assert tritonsm_main(["invoke", *argv]) == 0
    assert capsys.readouterr() == (INVOKE_URL_HELP, "")


def test_invoke_help_without_a_url_shows_the_spec_options_and_the_request_options(monkeypatch, capsys) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    assert tritonsm_main(["invoke", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: tritonsm invoke [--spec SPEC] [-h] [--endpoint ENDPOINT]")
    spec_part, request_part = out.split("\nrequest options:\n")
    assert "--endpoint ENDPOINT" in spec_part and "--text TEXT" not in spec_part
    # The request options, each once (the local parser's -h is this one's), as --url --help lists them.
    for flag in ("--url URL", "--text TEXT", "--text-pair TEXT_PAIR", "--target-model TARGET_MODEL", "--stream"):
        assert request_part.count(flag) == 1, flag
    assert "-h, --help" not in request_part
    assert request_part.rstrip() in INVOKE_URL_HELP


def test_invoke_reports_a_malformed_url(tmp_path: pathlib.Path, capsys) -> None:
    assert invoke_main(["--url", "localhost", "--text", "hi", "--input-name", "T"]) == 1
    assert capsys.readouterr().err == (
        "error: --url 'localhost' must look like http://127.0.0.1:8080 (host and port of `tritonsm serve`)\n"
    )


def _ignoring_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # what a background job (`cmd &`) starts with


@pytest.mark.triton
def test_serve_stops_on_ctrl_c_even_when_started_with_sigint_ignored(tarballs: dict[str, pathlib.Path]) -> None:
    process = run_serve(str(tarballs["add"]), "--env", "SAGEMAKER_TRITON_LOG_VERBOSE=0", preexec_fn=_ignoring_sigint)
    wait_for_line(process, "press Ctrl-C to stop")
    assert_ctrl_c_stops_it(process)


def _server_folder(process: subprocess.Popen) -> tuple[psutil.Process, pathlib.Path]:
    """A started serve's Triton server and its work folder (--model-repository=<tmp>/tritonsm-sme-XXXX/opt-ml-model)."""
    server = psutil.Process(process.pid).children()[0]
    return server, next(pathlib.Path(arg.split("=", 1)[-1]).parent for arg in server.cmdline()
                        if "tritonsm-sme-" in arg)


@pytest.mark.triton
def test_the_server_dies_with_a_killed_serve_and_the_next_serve_removes_its_folder(
        tarballs: dict[str, pathlib.Path]) -> None:
    serves = []

    def serve() -> tuple[subprocess.Popen, list[str]]:
        serves.append(run_serve(str(tarballs["add"]), "--env", "SAGEMAKER_TRITON_LOG_VERBOSE=0"))
        return serves[-1], wait_for_line(serves[-1], "press Ctrl-C to stop")

    try:
        # SIGKILL leaves `serve` no chance to stop anything: the kernel's parent-death signal stops the server.
        killed, _ = serve()
        server, folder = _server_folder(killed)
        live, _ = serve()
        _, live_folder = _server_folder(live)
        killed.kill()
        killed.communicate(timeout=30)
        gone, alive = psutil.wait_procs([server], timeout=20)
        assert alive == [] and gone == [server]
        # What a killed process cannot do is delete its unpacked model: that folder is left...
        assert folder.name.startswith("tritonsm-sme-") and folder.is_dir()
        size = sum(f.lstat().st_size for f in folder.rglob("*") if f.is_file() and not f.is_symlink())
        # ...until the next serve starts: it removes the folder whose processes are gone, not the live serve's.
        following, lines = serve()
        assert [line for line in lines if "left by a serve" in line] == [
            f"removed {folder} ({work_dirs.human_size(size)}), left by a serve that is gone "
            f"(pid {killed.pid}, {server.pid})"]
        assert not folder.exists() and live_folder.is_dir()
        assert_ctrl_c_stops_it(live)
        assert_ctrl_c_stops_it(following)
    finally:
        for process in serves:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
                process.communicate(timeout=60)
