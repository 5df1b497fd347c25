"""`tritonsm serve ENDPOINT` for a spec endpoint with an ``asynchronous:`` block: what it prints, an application
run with nothing but the AWS endpoint variables it prints, and no process left behind after SIGTERM or SIGKILL.

The spec's model is the tests' ``add`` archive under a hand-written build manifest (no `tritonsm build`).
"""
from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import textwrap

import psutil
import pytest

from async_fixtures import adder_spec
from local_endpoint.server.ports import free_port

REPOSITORY_ROOT = pathlib.Path(__file__).resolve().parents[2]
STARTED = "press Ctrl-C to stop"
NAME = "Tests-dev-adder"   # <project>-<environment>-<endpoint>
# The application: plain boto3 clients, configured by the environment only (as deployed, but for the URLs).
APP = textwrap.dedent("""\
    import json, sys, time
    import boto3
    s3, runtime = boto3.client("s3"), boto3.client("sagemaker-runtime")
    body = json.dumps({"inputs": [{"name": "A", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]},
                                  {"name": "B", "shape": [1, 4], "datatype": "FP32", "data": [1, 1, 1, 1]}]})
    s3.put_object(Bucket="tritonsm-local", Key="async/adder/input/app.json", Body=body)
    out = runtime.invoke_endpoint_async(EndpointName=sys.argv[1], ContentType="application/json",
                                        InputLocation="s3://tritonsm-local/async/adder/input/app.json")
    bucket, key = out["OutputLocation"][5:].split("/", 1)
    for _ in range(300):
        try:
            print(s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode())
            break
        except s3.exceptions.NoSuchKey:
            time.sleep(0.1)
""")


@pytest.fixture(scope="module")
def spec(tarballs: dict[str, pathlib.Path], module_tmp) -> tuple[pathlib.Path, pathlib.Path]:
    return adder_spec(module_tmp.mktemp("async-spec"), tarballs["add"])


def start_serve(spec: tuple[pathlib.Path, pathlib.Path], port: int) -> tuple[subprocess.Popen, list[str]]:
    process = subprocess.Popen(
        [sys.executable, "-m", "tritonsm", "serve", "adder", "--spec", str(spec[0]), "--manifest", str(spec[1]),
         "--port", str(port)], cwd=REPOSITORY_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    assert process.stdout is not None
    for line in process.stdout:
        lines.append(line.rstrip("\n"))
        if STARTED in line:
            return process, lines
    raise AssertionError(f"tritonsm serve did not start: {lines} {process.stderr.read() if process.stderr else ''}")


def descendants(process: subprocess.Popen) -> list[psutil.Process]:
    return psutil.Process(process.pid).children(recursive=True)


@pytest.mark.triton
def test_serve_prints_where_everything_is_and_an_unchanged_app_gets_its_answer(spec) -> None:
    port = free_port()
    process, lines = start_serve(spec, port)
    try:
        printed = "\n".join(lines)
        aws = re.search(r"export AWS_ENDPOINT_URL_S3=(\S+) AWS_ENDPOINT_URL_SNS=(\S+) AWS_ENDPOINT_URL_SQS=(\S+)",
                        printed)
        assert aws and aws.group(1) == aws.group(2) == aws.group(3), printed
        url = aws.group(1)
        assert f"local S3, SNS and SQS (moto) at {url}; point boto3 and the AWS CLI there: export" in printed
        assert (f"asynchronous endpoint {NAME}: InvokeEndpointAsync at http://127.0.0.1:{port}/endpoints/{NAME}/"
                "async-invocations (2 at a time, payloads up to 1 MB, RequestTTLSeconds 21600, "
                "InvocationTimeoutSeconds 900 by default)") in lines
        assert "  inputs: upload under s3://tritonsm-local/async/adder/input/" in lines
        assert not any(line.startswith("SageMaker Runtime API: InvokeEndpoint") for line in lines)   # refused here
        assert ("  answers: s3://tritonsm-local/async/adder/output/<uuid>.out; failures: "
                "s3://tritonsm-local/async/adder/failure/<uuid>-error.out") in lines
        assert ("  notifications: SNS arn:aws:sns:eu-west-1:000000000000:adder-async-success (success), "
                "arn:aws:sns:eu-west-1:000000000000:adder-async-error (error); subscribe an SQS queue of yours in "
                "eu-west-1") in lines
        environment = {**os.environ, "AWS_ENDPOINT_URL_S3": url, "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME":
                       f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "app", "AWS_SECRET_ACCESS_KEY": "app",
                       "AWS_DEFAULT_REGION": "eu-west-1"}
        app = subprocess.run([sys.executable, "-c", APP, NAME], env=environment, capture_output=True, text=True,
                             timeout=60)
        assert app.returncode == 0, app.stderr
        assert json.loads(app.stdout)["outputs"][0]["data"] == [2.0, 3.0, 4.0, 5.0]
        started = descendants(process)
        assert {p.name() for p in started} >= {"tritonserver"} and any("moto.server" in " ".join(p.cmdline())
                                                                        for p in started)
    finally:
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=60)
    assert (process.returncode, stdout.strip(), stderr) == (0, "stopped", "")
    _, alive = psutil.wait_procs(started, timeout=20)
    assert alive == []


@pytest.mark.triton
def test_the_local_aws_server_dies_with_a_killed_serve(spec) -> None:
    process, _ = start_serve(spec, free_port())
    started = descendants(process)
    moto = [p for p in started if "moto.server" in " ".join(p.cmdline())]
    assert len(moto) == 1
    (folder,) = {pathlib.Path(arg.split("=", 1)[-1]).parent for p in started if p.name() == "tritonserver"
                 for arg in p.cmdline() if "tritonsm-sme-" in arg}
    process.kill()   # no chance to stop anything: the kernel's parent-death signal stops both servers
    process.communicate(timeout=30)
    _, alive = psutil.wait_procs(started, timeout=20)
    assert alive == []
    # What a killed serve cannot do is delete its unpacked model (the next serve would): done here.
    shutil.rmtree(folder)
