"""`tritonsm serve --all` supervising its Triton servers as SageMaker supervises containers: the real server killed
with SIGKILL (or stopped with SIGSTOP, so /ping hangs) under a real-time and an asynchronous endpoint, seen through
an application's boto3 clients.

One serve for the module (a spec of two single-model endpoints over tiny Python-backend models built by `tritonsm
build`): ``realtime`` doubles its input; ``queued`` is asynchronous (2 at a time) and sleeps the seconds its input
asks for, logging each request's tag as it starts, so a request sent twice shows. The restart bound itself, and a
crash ending serve, are tested in test_local_cli (one server, --max-restarts 1).
"""
from __future__ import annotations

import collections
import json
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Iterator

import psutil
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

import boto3
import triton_model_fixtures as models
from async_fixtures import KEYS, REGION, app_client, audit, listed_objects, wait_for_object
from local_endpoint.server.ports import free_port
from tritonsm.cli import main as tritonsm_main

pytestmark = pytest.mark.triton

REPOSITORY_ROOT = pathlib.Path(__file__).resolve().parents[2]
REALTIME, QUEUED = "Tests-dev-realtime", "Tests-dev-queued"
SPEC = """\
project: Tests
triton_version: "25.04"
models:
  times2: {backend: python, source: {python_dir: times2_model}, max_batch_size: 8}
  slow: {backend: python, source: {python_dir: slow_model}, max_batch_size: 8}
endpoints:
  realtime: {kind: single-model, models: [times2], instance_type: ml.c5.xlarge}
  queued:
    kind: single-model
    models: [slow]
    instance_type: ml.c5.xlarge
    asynchronous: {max_concurrent_invocations_per_instance: 2, max_payload_mb: 1}
environments:
  dev: {region: eu-west-1, removal_policy: destroy}
"""
# INPUT [[seconds, tag]]: logs the tag when the request reaches the model, sleeps, answers INPUT * 2.
SLOW_CONFIG = models.AFFINE_CONFIG.format(input="INPUT", output="OUTPUT", factor=2, offset=0).replace(
    "count: 1", "count: 2") + 'parameters { key: "log" value: { string_value: "%s" } }\n'
SLOW_MODEL = """\
import json
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.log = json.loads(args["model_config"])["parameters"]["log"]["string_value"]

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()
            with open(self.log, "a") as log:
                log.write(f"{int(x[0][1])}\\n")
            time.sleep(float(x[0][0]))
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", x * 2)]))
        return responses
"""
RESTARTING = ("Endpoint {name} is restarting its model container: {why}. `tritonsm serve` starts it again, as "
              "SageMaker replaces a failed container; try your call again in a few seconds")


class Serve:
    """The running `tritonsm serve --all`: its output, read as it comes, and its processes."""

    def __init__(self, process: subprocess.Popen, log: pathlib.Path) -> None:
        self.process, self.model_log = process, log
        self.out: list[str] = []
        self.err: list[str] = []
        for stream, lines in ((process.stdout, self.out), (process.stderr, self.err)):
            threading.Thread(target=self._read, args=(stream, lines), daemon=True).start()

    @staticmethod
    def _read(stream: Any, lines: list[str]) -> None:
        for line in stream:
            lines.append(line.rstrip("\n"))

    def wait_for(self, lines: list[str], text: str, timeout: float = 90.0, after: int = 0) -> int:
        """The index of the first line from ``after`` on that contains ``text``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for index in range(after, len(lines)):
                if text in lines[index]:
                    return index
            assert self.process.poll() is None, f"serve ended: {self.out} {self.err}"
            time.sleep(0.05)
        raise AssertionError(f"no line with {text!r} within {timeout:g} s: {self.out} {self.err}")

    def triton(self, model: str) -> psutil.Process:
        """The tritonserver process that serves ``model`` (the single-model server loads it by name)."""
        for child in psutil.Process(self.process.pid).children(recursive=True):
            try:
                if child.name() == "tritonserver" and f"--load-model={model}" in child.cmdline():
                    return child
            except psutil.NoSuchProcess:
                continue
        raise AssertionError(f"no tritonserver loads {model}")

    def env(self, name: str) -> str:
        line = next(line for line in self.out if f"export {name}=" in line)
        return line.split(f"export {name}=", 1)[1].split()[0]


@pytest.fixture(scope="module")
def serve(module_tmp) -> Iterator[Serve]:
    root = module_tmp.mktemp("restarts")
    (root / "spec.yaml").write_text(SPEC)
    (root / "times2_model").mkdir()
    (root / "times2_model" / "config.pbtxt").write_text(
        models.AFFINE_CONFIG.format(input="INPUT", output="OUTPUT", factor=2, offset=0))
    (root / "times2_model" / "model.py").write_text(models.AFFINE_MODEL)
    (root / "slow_model").mkdir()
    (root / "slow_model" / "config.pbtxt").write_text(SLOW_CONFIG % (root / "requests.log"))
    (root / "slow_model" / "model.py").write_text(SLOW_MODEL)
    assert tritonsm_main(["build", "--spec", str(root / "spec.yaml"), "--out", str(root / "assets")]) == 0
    process = subprocess.Popen(
        [sys.executable, "-m", "tritonsm", "serve", "--all", "--spec", str(root / "spec.yaml"), "--manifest",
         str(root / "assets" / "manifest.json"), "--port", str(free_port()), "--max-restarts", "5",
         "--unhealthy-after", "2"], cwd=REPOSITORY_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    served = Serve(process, root / "requests.log")
    try:
        served.wait_for(served.out, "press Ctrl-C to stop", timeout=180)
        yield served
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)


def runtime(serve: Serve) -> Any:
    return boto3.client("sagemaker-runtime", endpoint_url=serve.env("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME"),
                        region_name=REGION, **KEYS,
                        config=Config(retries={"total_max_attempts": 1}, read_timeout=20, connect_timeout=5))


def body(*values: float) -> bytes:
    return json.dumps({"inputs": [{"name": "INPUT", "shape": [1, len(values)], "datatype": "FP32",
                                   "data": list(values)}]}).encode()


def doubled(reply: dict[str, Any]) -> list[float]:
    return json.loads(reply["Body"].read())["outputs"][0]["data"]


def invoke_until_answered(client: Any, timeout: float = 90.0) -> tuple[list[float], list[tuple[int, str, str]]]:
    """InvokeEndpoint on the real-time endpoint until it answers: the answer, and every error before it."""
    errors = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return doubled(client.invoke_endpoint(EndpointName=REALTIME, ContentType="application/json",
                                                  Body=body(1, 2, 3))), errors
        except ClientError as error:
            meta, details = error.response["ResponseMetadata"], error.response["Error"]
            errors.append((meta["HTTPStatusCode"], details["Code"], details["Message"]))
            time.sleep(0.1)
    raise AssertionError(f"no answer within {timeout:g} s; errors: {errors[-3:]}")


def test_a_killed_server_answers_service_unavailable_until_it_serves_again(serve) -> None:
    client = runtime(serve)
    assert invoke_until_answered(client) == ([2.0, 4.0, 6.0], [])
    before = len(serve.err)
    serve.triton("times2").kill()
    answer, errors = invoke_until_answered(client)
    assert answer == [2.0, 4.0, 6.0]
    why = "the Triton server exited unexpectedly with signal SIGKILL"
    assert errors and set(errors) == {(503, "ServiceUnavailable", RESTARTING.format(name=REALTIME, why=why))}
    told = serve.err[serve.wait_for(serve.err, "restarting it", after=before)]
    assert told.startswith(f"warning: endpoint {REALTIME}: {why}; restarting it (restart ")
    assert told.endswith(" of at most 5 within 600 s), as SageMaker replaces a failed container; last lines of "
                         "its log (" + told.split("its log (", 1)[1])
    serve.wait_for(serve.out, f"endpoint {REALTIME}: the Triton server serves again (restarted in ")


def test_requests_accepted_across_a_kill_each_end_in_one_object(serve) -> None:
    """Eight asynchronous requests of 0.8 s, two at a time; the server killed while two run and the others wait:
    the two are sent again once it serves, and every request is answered, once, and notified once."""
    aws = serve.env("AWS_ENDPOINT_URL_S3")
    client, s3 = runtime(serve), app_client("s3", aws)
    sns, sqs = app_client("sns", aws, "eu-west-1"), app_client("sqs", aws, "eu-west-1")
    queue_url = sqs.create_queue(QueueName="restart-notifications")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    for topic in ("queued-async-success", "queued-async-error"):
        sns.subscribe(TopicArn=f"arn:aws:sns:eu-west-1:000000000000:{topic}", Protocol="sqs", Endpoint=queue_arn)
    serve.model_log.unlink(missing_ok=True)
    accepted = {}
    for tag in range(8):
        reply = client.invoke_endpoint_async(EndpointName=QUEUED, ContentType="application/json",
                                             Body=body(0.8, tag), InferenceId=f"kill-{tag}")
        accepted[reply["InferenceId"]] = (reply["OutputLocation"], reply["FailureLocation"])
    time.sleep(1.2)   # the first two answered, the next two at the model, four waiting
    serve.triton("slow").kill()
    for output, failure in accepted.values():
        wait_for_object(s3, output, failure, timeout=120)
    outputs, failures = (folder.rsplit("/", 1)[0] + "/" for folder in next(iter(accepted.values())))
    found = audit(accepted, listed_objects(s3, outputs, failures))
    assert (found.succeeded, found.missing, found.twice, found.strays) == (8, [], [], []), found
    seen = collections.Counter(int(tag) for tag in serve.model_log.read_text().split())
    assert set(seen) == set(range(8)) and 1 <= sum(seen.values()) - 8 <= 2, seen   # in flight at the kill: sent again
    notified = []
    deadline = time.monotonic() + 30
    while len(notified) < 8 and time.monotonic() < deadline:
        for message in sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=1,
                                           MaxNumberOfMessages=10).get("Messages", []):
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
            notified.append(json.loads(json.loads(message["Body"])["Message"]))
    assert sorted((n["inferenceId"], n["invocationStatus"]) for n in notified) == [
        (f"kill-{tag}", "Completed") for tag in range(8)]


def test_a_server_that_stops_answering_ping_is_replaced(serve) -> None:
    hung = serve.triton("times2")
    before = len(serve.err)
    hung.suspend()   # SIGSTOP: the process runs on paper, /ping gets no answer
    told = serve.err[serve.wait_for(serve.err, "restarting it", after=before)]
    assert told.startswith(f"warning: endpoint {REALTIME}: the Triton server did not answer /ping with 200 for 2 s "
                           "(last: no answer); restarting it (restart ")
    answer, _ = invoke_until_answered(runtime(serve))
    assert answer == [2.0, 4.0, 6.0]
    assert psutil.wait_procs([hung], timeout=10)[1] == []   # killed, not left stopped


def test_sigterm_in_the_middle_of_a_restart_stops_everything(serve) -> None:
    moto_port = serve.env("AWS_ENDPOINT_URL_S3").rsplit(":", 1)[1]
    folders = {arg.split("=", 1)[1] for model in ("times2", "slow") for arg in serve.triton(model).cmdline()
               if arg.startswith("--model-repository=")}
    before = len(serve.err)
    serve.triton("times2").kill()
    serve.wait_for(serve.err, "restarting it", after=before)
    serve.process.send_signal(signal.SIGTERM)
    assert serve.process.wait(timeout=60) == 0
    time.sleep(0.5)   # the readers take the last lines
    # The whole stderr in the message: pytest's own repr of the list cuts the traceback this looks for.
    assert serve.out[-1] == "stopped" and not any("Traceback" in line for line in serve.err), "\n".join(serve.err)
    deadline = time.monotonic() + 20
    while left := [p.pid for p in psutil.process_iter(["cmdline"])
                   if any(folder in arg for arg in p.info["cmdline"] or [] for folder in folders)
                   or f"-p {moto_port}" in " ".join(p.info["cmdline"] or [])]:
        assert time.monotonic() < deadline, f"left running: {left}"
        time.sleep(0.2)
    assert os.getpid() not in left
