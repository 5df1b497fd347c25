"""`tritonsm serve ENDPOINT --image` and `tritonsm smoke --image` as processes, with a fake `docker` first on PATH.

The fake (fake_docker.py) is a real executable: `docker run` stays in the foreground serving the container's
port like an attached client, `docker stop` sends it SIGTERM. So these tests run the real process lifecycle:
start, readiness, Ctrl-C / SIGTERM whatever the process inherited, a crash, the parent's SIGKILL, the
container's removal, and SageMaker's multi-model load calls against the container's /opt/ml/models paths.
"""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import psutil
import pytest

from local_endpoint.client.invoke import invoke_url
from local_endpoint.client.payload import NamedTensor, encode_request
from local_endpoint.server.ports import free_port
from tritonsm.cli import main as tritonsm_main
from image_fixtures import install_fake_docker, write_built_spec

REPOSITORY_ROOT = pathlib.Path(__file__).resolve().parents[2]
STARTED = "press Ctrl-C to stop"


@pytest.fixture
def built(tmp_path, tarballs):
    return write_built_spec(tmp_path / "project", tarballs)


@pytest.fixture
def docker(tmp_path):
    return install_fake_docker(tmp_path / "fake")


def serve(built, docker, endpoint: str, *flags: str, inherit_ignored: tuple[int, ...] = (), **fake_env: str):
    port = free_port()

    def ignore():  # as a background job (`cmd &`) or nohup starts it
        for sig in inherit_ignored:
            signal.signal(sig, signal.SIG_IGN)

    process = subprocess.Popen(
        [sys.executable, "-m", "tritonsm", "serve", endpoint, "--image", "ngc", *built.flags(), "--port", str(port),
         *flags], cwd=REPOSITORY_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=docker.env(FAKE_DOCKER_HAVE_IMAGE="1", **fake_env), preexec_fn=ignore)
    return process, port


def started(process) -> list[str]:
    lines = []
    for line in process.stdout:
        lines.append(line.rstrip("\n"))
        if STARTED in line:
            return lines
    raise AssertionError(f"serve ended before it started: {lines} {process.stderr.read()}")


def fake_run_pid(docker) -> int:
    return next(c["pid"] for c in docker.calls() if c.get("argv", [""])[0] == "run")


def wait_gone(pid: int, seconds: float = 15) -> None:
    deadline = time.monotonic() + seconds
    while psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, f"process {pid} still runs"
        time.sleep(0.05)


@pytest.mark.parametrize("sig, inherited", [
    (signal.SIGINT, (signal.SIGINT,)),                   # Ctrl-C to a background job, which inherited SIGINT ignored
    (signal.SIGTERM, (signal.SIGINT, signal.SIGTERM)),   # kill, CodeBuild, a service manager
], ids=["sigint-inherited-ignored", "sigterm-inherited-ignored"])
def test_a_stop_signal_stops_and_removes_the_container_whatever_was_inherited(built, docker, sig, inherited):
    process, port = serve(built, docker, "add-sme", inherit_ignored=inherited)
    lines = started(process)
    name = docker.run_argv()[docker.run_argv().index("--name") + 1]
    assert lines[0] == f"serving 1 model archive(s) (SME) at http://127.0.0.1:{port}"
    assert lines[2].startswith("image: nvcr.io/nvidia/tritonserver:25.09-py3 in container tritonsm-add-sme-")
    assert "serve script serve.r25.04 mounted at /usr/bin/serve" in lines[2]
    answer = invoke_url(f"http://127.0.0.1:{port}", encode_request(
        [NamedTensor("A", "FP32", np.full((1, 4), 0.5, np.float32))] * 2, binary=True))
    assert answer.outputs[0].name == "SUM"
    process.send_signal(sig)
    stdout, stderr = process.communicate(timeout=30)
    assert (process.returncode, stdout.strip(), stderr) == (0, "stopped", "")
    assert [argv[:2] for argv in docker.commands()] == [
        ["image", "inspect"], ["run", "--rm"], ["stop", "-t"], ["rm", "--force"]]
    assert docker.commands()[2:] == [["stop", "-t", "30", name], ["rm", "--force", name]]
    assert {"pid": fake_run_pid(docker), "signal": "SIGTERM", "name": name} in docker.calls()
    wait_gone(fake_run_pid(docker))
    assert not model_folder(docker).exists()  # the unpacked copy is gone


def test_when_serve_is_killed_the_docker_client_gets_sigterm_and_stops_the_container(built, docker):
    process, _ = serve(built, docker, "add-sme")
    started(process)
    process.kill()  # SIGKILL: no handler runs; the kernel tells the docker client (parent-death signal)
    process.wait(timeout=10)
    wait_gone(fake_run_pid(docker))
    # docker's signal proxy hands that SIGTERM to the container, and --rm removes it
    assert any(c.get("signal") == "SIGTERM" for c in docker.calls())
    assert "--rm" in docker.run_argv() and "--sig-proxy=true" in docker.run_argv()
    # What no process of ours could do after SIGKILL: delete the unpacked model folder.
    shutil.rmtree(model_folder(docker).parent)


def model_folder(docker) -> pathlib.Path:
    """The host folder mounted at /opt/ml/model or /opt/ml/models."""
    mount = next(a for a in docker.run_argv() if a.startswith("type=bind,") and "target=/opt/ml/model" in a)
    return pathlib.Path(mount.split(",")[1].removeprefix("source="))


def test_a_container_that_dies_is_reported_with_its_log_and_removed(built, docker):
    process, _ = serve(built, docker, "add-sme", FAKE_DOCKER_CRASH_AFTER="1")
    started(process)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 1
    assert stderr.startswith("error: the Triton server exited unexpectedly with exit code 1; last lines of its log (")
    assert "boom: the model crashed the server" in stderr and "Traceback" not in stderr
    assert docker.commands()[-1][:2] == ["rm", "--force"]


def test_a_host_without_the_gpu_runtime_is_told_what_to_install(built, docker):
    process, _ = serve(built, docker, "add-sme", FAKE_DOCKER_RUN_FAILS=(
        'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].'))
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 1
    assert stderr.startswith("error: container tritonsm-add-sme-") and "exited during start-up with exit code 125" in stderr
    assert stderr.rstrip().endswith(
        "the Docker engine cannot give the container GPUs: install an NVIDIA driver and the NVIDIA Container Toolkit "
        "(https://github.com/NVIDIA/nvidia-container-toolkit), or run `tritonsm verify --gpu` on a CUDA host without "
        "Docker")


def test_the_multi_model_container_gets_sagemakers_load_calls_with_its_own_paths(built, docker):
    process, port = serve(built, docker, "add-mme", "--mme-capacity", "1")
    try:
        lines = started(process)
        assert lines[1].startswith("target models: add-") and ", times2-" in lines[1]
        targets = lines[1].removeprefix("target models: ").split(", ")
        x = encode_request([NamedTensor("INPUT", "FP32", np.ones((1, 3), np.float32))], binary=True)
        for target in (targets[1], targets[0]):  # capacity 1: the second load evicts the first
            invoke_url(f"http://127.0.0.1:{port}", x, target_model=target)
        run = docker.run_argv()
        assert "SAGEMAKER_MULTI_MODEL=true" in run and "SAGEMAKER_TRITON_THREAD_COUNT=4" in run
        host_root = model_folder(docker)
        requests = [c for c in docker.calls() if "request" in c]
        loads = [json.loads(c["body"]) for c in requests if c["request"] == ["POST", "/models"]]
        assert [load["url"] for load in loads] == [f"/opt/ml/models/{load['model_name']}/model" for load in loads]
        assert all((host_root / load["model_name"] / "model").is_dir() for load in loads)
        assert [c["request"] for c in requests] == [
            ["POST", "/models"], ["POST", f"/models/{loads[0]['model_name']}/invoke"],
            ["DELETE", f"/models/{loads[0]['model_name']}"],
            ["POST", "/models"], ["POST", f"/models/{loads[1]['model_name']}/invoke"]]
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=30)
    assert process.returncode == 0 and not host_root.exists()


def test_smoke_image_records_the_answers_of_the_container_and_removes_it(built, docker, tmp_path, monkeypatch, capsys):
    for key, value in docker.env(FAKE_DOCKER_HAVE_IMAGE="1").items():
        monkeypatch.setenv(key, value)
    assert tritonsm_main(["smoke", "add-sme", *built.flags(), "--image", "ngc", "--record-dir", str(tmp_path / "rec")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("smoke add-sme (nvcr.io/nvidia/tritonserver:25.09-py3 in container tritonsm-add-sme-")
    assert out[1:] == ["  add: ok, outputs as recorded by the build", f"recorded 1 model(s) in {tmp_path / 'rec' / 'add-sme.json'}",
                       "smoke add-sme: all 1 model(s) answered as the build recorded"]
    assert json.loads((tmp_path / "rec" / "add-sme.json").read_text())["models"] == {"add": {"SUM": [[1.0] * 4]}}
    assert [argv[0] for argv in docker.commands()] == ["image", "run", "stop", "rm"]


def test_smoke_image_reports_an_endpoint_that_does_not_start_and_goes_on(built, docker, monkeypatch, capsys):
    for key, value in docker.env(FAKE_DOCKER_HAVE_IMAGE="1", FAKE_DOCKER_RUN_FAILS="docker: no such image").items():
        monkeypatch.setenv(key, value)
    assert tritonsm_main(["smoke", *built.flags(), "--image", "ngc"]) == 1
    out = capsys.readouterr().out
    assert out.count("error: smoke test of ") == 2 and "docker: no such image" in out
    assert [argv[0] for argv in docker.commands()].count("rm") == 2


def test_the_sagemaker_image_without_a_region_anywhere_is_refused_before_docker_runs(built, docker, monkeypatch, capsys):
    for key, value in docker.env().items():
        monkeypatch.setenv(key, value)
    spec = built.spec.read_text().replace("dev: {region: us-east-1, ", "dev: {")
    built.spec.write_text(spec)
    assert tritonsm_main(["serve", "add-sme", *built.flags(), "--image"]) == 2
    assert capsys.readouterr().err == (
        "error: --image sagemaker pulls from the SageMaker registry of a region, and none is known: set AWS_REGION "
        "(or a region in your AWS profile), give --region, or set the environment's region: in the spec; or use "
        "--image ngc, which needs no AWS account\n")
    assert docker.calls() == []


def test_image_and_cpu_stand_in_exclude_each_other(built, capsys):
    assert tritonsm_main(["serve", "add-sme", *built.flags(), "--image", "ngc", "--cpu-stand-in"]) == 2
    assert capsys.readouterr().err == ("error: --cpu-stand-in and --image exclude each other: the image runs every "
                                       "backend itself, on the GPU; drop one of them\n")
