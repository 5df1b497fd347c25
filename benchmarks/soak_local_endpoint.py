#!/usr/bin/env python3
"""Soak test of `tritonsm serve --all`: traffic from boto3 clients for minutes while its Triton servers are killed.

    .venv/bin/python benchmarks/soak_local_endpoint.py [--minutes 10] [--kills 3] [--work DIR]

Writes a small spec of its own (tiny Python-backend models, built by `tritonsm build` in a second): ``realtime``
(a single-model endpoint that doubles its input), ``queued`` (asynchronous, 2 at a time, 50 ms a request) and
``shadowed`` (a production variant that triples, a shadow that quadruples, half the requests copied). It serves them
with `tritonsm serve --all`, drives each from its own boto3 clients as an application would (InvokeEndpoint, and
InvokeEndpointAsync with the answer read back from the local S3 and the notifications from an SQS queue subscribed
to the endpoint's topics), and kills a Triton server (SIGKILL) ``--kills`` times at evenly spread moments, in turn
the asynchronous endpoint's, the real-time one's, the shadowed endpoint's production variant's and its shadow's.

It prints, per endpoint: requests sent, answered, failed (by reason), lost (sent without an answer or an error, or
accepted without an output or failure object: must be 0) and written twice (must be 0); the server restarts
`tritonsm serve` reported; the resident memory of the serve process tree at the start and at the end. Exit 0 when
nothing was lost or written twice and every kill was followed by a restart. Not run by the test suite (it takes
minutes): `tests/local_endpoint/test_serve_restarts.py` is the quick check of the same behaviour.
"""
from __future__ import annotations

import argparse
import collections
import ctypes
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Callable, Optional

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import boto3  # noqa: E402
import psutil  # noqa: E402
from botocore.config import Config  # noqa: E402

from local_endpoint.server.ports import free_port  # noqa: E402
from local_endpoint.server.stop_signals import interrupting  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
REGION = "us-east-1"
KEYS = {"aws_access_key_id": "soak", "aws_secret_access_key": "soak"}   # nothing checks signatures locally
REALTIME, QUEUED, SHADOWED = "Soak-dev-realtime", "Soak-dev-queued", "Soak-dev-shadowed"
SPEC = """\
project: Soak
triton_version: "25.04"
models:
  times2: {backend: python, source: {python_dir: times2_model}, max_batch_size: 8}
  times3: {backend: python, source: {python_dir: times3_model}, max_batch_size: 8}
  times4: {backend: python, source: {python_dir: times4_model}, max_batch_size: 8}
  slow: {backend: python, source: {python_dir: slow_model}, max_batch_size: 8}
endpoints:
  realtime: {kind: single-model, models: [times2], instance_type: ml.c5.xlarge}
  queued:
    kind: single-model
    models: [slow]
    instance_type: ml.c5.xlarge
    asynchronous: {max_concurrent_invocations_per_instance: 2, max_payload_mb: 1}
  shadowed:
    kind: single-model
    models: [times3]
    instance_type: ml.c5.xlarge
    shadow: {model: times4, sampling_percent: 50}
environments:
  dev: {region: us-east-1, removal_policy: destroy}
"""
CONFIG = """\
backend: "python"
max_batch_size: 8
input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_FP32 dims: [ -1 ] } ]
parameters { key: "factor" value: { string_value: "%s" } }
parameters { key: "sleep" value: { string_value: "%s" } }
instance_group [ { kind: KIND_CPU count: 2 } ]
"""
MODEL = """\
import json
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        parameters = json.loads(args["model_config"])["parameters"]
        self.factor = float(parameters["factor"]["string_value"])
        self.sleep = float(parameters["sleep"]["string_value"])

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()
            time.sleep(self.sleep)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", x * self.factor)]))
        return responses
"""
MODELS = {"times2": (2, 0), "times3": (3, 0), "times4": (4, 0), "slow": (2, 0.05)}   # factor, seconds per request
# Whose server each kill hits, in turn: the Triton server that loads this model (a single-model server loads its
# default model by name).
KILL_ORDER = (("slow", QUEUED), ("times2", REALTIME), ("times3", f"{SHADOWED} production"), ("times4", f"{SHADOWED} shadow"))
INPUT = [1.0, 2.0, 3.0]


def body(values: list[float]) -> bytes:
    return json.dumps({"inputs": [{"name": "INPUT", "shape": [1, len(values)], "datatype": "FP32",
                                   "data": values}]}).encode()


def output_of(raw: bytes) -> list[float]:
    return json.loads(raw)["outputs"][0]["data"]


def client(service: str, url: str) -> Any:
    """As an application builds it, with one attempt per call so every failure is counted."""
    return boto3.client(service, endpoint_url=url, region_name=REGION, **KEYS,
                        config=Config(retries={"total_max_attempts": 1}, read_timeout=70, connect_timeout=5,
                                      max_pool_connections=10))


def reason_of(error: Exception) -> str:
    response = getattr(error, "response", None)
    if response:
        details = response.get("Error", {})
        return f"{details.get('Code')}: {details.get('Message')}"
    return f"{type(error).__name__}: {error}"


def write_spec(work: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    (work / "spec.yaml").write_text(SPEC)
    for name, (factor, sleep) in MODELS.items():
        folder = work / f"{name}_model"
        folder.mkdir(exist_ok=True)
        (folder / "config.pbtxt").write_text(CONFIG % (factor, sleep))
        (folder / "model.py").write_text(MODEL)
    subprocess.run([sys.executable, "-m", "tritonsm", "build", "--spec", str(work / "spec.yaml"), "--out",
                    str(work / "assets")], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return work / "spec.yaml", work / "assets" / "manifest.json"


def _die_with_parent() -> None:
    """In the serve before exec: SIGTERM when this script dies, so a killed soak leaves no servers behind."""
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)   # PR_SET_PDEATHSIG


class Serve:
    """`tritonsm serve --all` as a child process, its output read as it comes (and kept in ``serve.log``)."""

    def __init__(self, spec: pathlib.Path, manifest: pathlib.Path, work: pathlib.Path, max_restarts: int) -> None:
        self.lines: list[str] = []
        self._log = (work / "serve.log").open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tritonsm", "serve", "--all", "--spec", str(spec), "--manifest", str(manifest),
             "--port", str(free_port()), "--capture-dir", str(work / "captures"), "--max-restarts",
             str(max_restarts)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            preexec_fn=_die_with_parent)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))
            self._log.write(line)
            self._log.flush()

    def wait_for(self, text: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if text in line:
                    return line
            if self.process.poll() is not None:
                raise SystemExit("tritonsm serve ended:\n" + "\n".join(self.lines[-40:]))
            time.sleep(0.1)
        raise SystemExit(f"tritonsm serve printed no {text!r} within {timeout:g} s")

    def exported(self, name: str) -> str:
        line = self.wait_for(f"export {name}=", 5)
        return line.split(f"export {name}=", 1)[1].split()[0]

    def triton(self, model: str) -> Optional[psutil.Process]:
        for process in psutil.Process(self.process.pid).children(recursive=True):
            try:
                if process.name() == "tritonserver" and f"--load-model={model}" in process.cmdline():
                    return process
            except psutil.NoSuchProcess:
                continue
        return None

    def resident(self) -> tuple[int, int]:
        """Bytes resident in the serve process and all its descendants, and how many processes that is."""
        tree = [psutil.Process(self.process.pid), *psutil.Process(self.process.pid).children(recursive=True)]
        total = 0
        for process in tree:
            try:
                total += process.memory_info().rss
            except psutil.NoSuchProcess:
                continue
        return total, len(tree)

    def restarts(self) -> list[str]:
        return [line for line in self.lines if "serves again (restarted in" in line]

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=120)
        time.sleep(0.2)
        self._log.close()
        return code


class Tally:
    """One endpoint's requests: sent, answered, failed by reason (thread-safe)."""

    def __init__(self) -> None:
        self.sent = self.answered = 0
        self.failed: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()

    def count(self, answered: bool, reason: str = "") -> None:
        with self._lock:
            if answered:
                self.answered += 1
            else:
                self.failed[reason[:200]] += 1

    def send(self) -> None:
        with self._lock:
            self.sent += 1


def drive_realtime(url: str, name: str, factor: float, stop: threading.Event, tally: Tally) -> None:
    runtime = client("sagemaker-runtime", url)
    expected = [v * factor for v in INPUT]
    while not stop.is_set():
        tally.send()
        try:
            reply = runtime.invoke_endpoint(EndpointName=name, ContentType="application/json", Body=body(INPUT))
            got = output_of(reply["Body"].read())
            tally.count(got == expected, f"wrong answer {got}, expected {expected}")
        except Exception as error:   # every kind of failure is counted with its reason
            tally.count(False, reason_of(error))
        stop.wait(0.05)


def drive_async(url: str, stop: threading.Event, tally: Tally, accepted: dict[str, tuple[str, str]],
                per_second: float) -> None:
    runtime = client("sagemaker-runtime", url)
    n = 0
    while not stop.is_set():
        n += 1
        tally.send()
        try:
            reply = runtime.invoke_endpoint_async(EndpointName=QUEUED, ContentType="application/json",
                                                  Body=body([float(n), 1.0]), InferenceId=f"soak-{n}")
            accepted[reply["InferenceId"]] = (reply["OutputLocation"], reply["FailureLocation"])
        except Exception as error:
            tally.count(False, "not accepted: " + reason_of(error))
        stop.wait(1 / per_second)


def split(url: str) -> tuple[str, str]:
    bucket, _, key = url.removeprefix("s3://").partition("/")
    return bucket, key


def listed(s3: Any, folder: str) -> list[str]:
    bucket, prefix = split(folder)
    found = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        found += [f"s3://{bucket}/{item['Key']}" for item in page.get("Contents", [])]
    return found


def subscribed_queue(aws: str) -> tuple[Any, str]:
    sns, sqs = client("sns", aws), client("sqs", aws)
    queue_url = sqs.create_queue(QueueName="soak-notifications")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    for topic in sns.list_topics()["Topics"]:
        if topic["TopicArn"].endswith((":queued-async-success", ":queued-async-error")):
            sns.subscribe(TopicArn=topic["TopicArn"], Protocol="sqs", Endpoint=arn)
    return sqs, queue_url


def drain_notifications(sqs: Any, queue_url: str, notified: collections.Counter[str], stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            messages = sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=1,
                                           MaxNumberOfMessages=10).get("Messages", [])
        except Exception:   # the local SQS goes with serve at the end
            return
        for message in messages:
            notified[json.loads(json.loads(message["Body"])["Message"])["inferenceId"]] += 1
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])


def kill_on_schedule(serve: Serve, moments: list[float], started: float, stop: threading.Event,
                     kills: list[str], say: Callable[[str], None]) -> None:
    for index, moment in enumerate(moments):
        if stop.wait(max(0.0, started + moment - time.monotonic())):
            return
        model, whose = KILL_ORDER[index % len(KILL_ORDER)]
        deadline = time.monotonic() + 60   # a server restarted by the previous kill may not be up yet
        while (server := serve.triton(model)) is None and time.monotonic() < deadline:
            time.sleep(0.2)
        if server is None:
            say(f"kill {index + 1}: no Triton server of {whose} to kill")
            continue
        server.kill()
        kills.append(whose)
        say(f"kill {index + 1} at {moment:.0f} s: SIGKILL to the Triton server of {whose} (pid {server.pid})")


def mib(size: int) -> str:
    return f"{size / 2**20:.0f} MiB"


def soak(minutes: float, kill_count: int, work: pathlib.Path) -> int:
    def say(line: str) -> None:
        print(f"[{time.monotonic() - begun:6.1f} s] {line}", flush=True)

    begun = time.monotonic()
    spec, manifest = write_spec(work)
    say(f"built the spec's models under {work}; starting tritonsm serve --all")
    serve = Serve(spec, manifest, work, max_restarts=kill_count + 2)
    stop = threading.Event()
    threads: list[threading.Thread] = []
    try:
        serve.wait_for("press Ctrl-C to stop", 300)
        runtime_url, aws = serve.exported("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME"), serve.exported("AWS_ENDPOINT_URL_S3")
        memory_start = serve.resident()
        say(f"serving at {runtime_url}; local S3/SNS/SQS at {aws}; resident {mib(memory_start[0])} in "
            f"{memory_start[1]} processes")
        tallies = {REALTIME: Tally(), SHADOWED: Tally(), QUEUED: Tally()}
        accepted: dict[str, tuple[str, str]] = {}
        notified: collections.Counter[str] = collections.Counter()
        sqs, queue_url = subscribed_queue(aws)
        kills: list[str] = []
        seconds = minutes * 60
        moments = [seconds * (k + 1) / (kill_count + 1) for k in range(kill_count)]
        started = time.monotonic()
        threads = [
            threading.Thread(target=drive_realtime, args=(runtime_url, REALTIME, 2, stop, tallies[REALTIME])),
            threading.Thread(target=drive_realtime, args=(runtime_url, SHADOWED, 3, stop, tallies[SHADOWED])),
            threading.Thread(target=drive_async, args=(runtime_url, stop, tallies[QUEUED], accepted, 5.0)),
            threading.Thread(target=drain_notifications, args=(sqs, queue_url, notified, stop)),
            threading.Thread(target=kill_on_schedule, args=(serve, moments, started, stop, kills, say)),
        ]
        for thread in threads:
            thread.start()
        while time.monotonic() - started < seconds:
            time.sleep(min(30.0, seconds - (time.monotonic() - started)))
            say(f"sent {sum(t.sent for t in tallies.values())}, restarts so far {len(serve.restarts())}")
        stop.set()
        for thread in threads:
            thread.join()
        say(f"traffic stopped; waiting for the {len(accepted)} accepted asynchronous requests' objects")
        s3 = client("s3", aws)
        if not accepted:
            raise SystemExit("no asynchronous request was accepted: see " + str(work / "serve.log"))
        output_folder, failure_folder = (url.rsplit("/", 1)[0] + "/" for url in next(iter(accepted.values())))
        deadline = time.monotonic() + 300
        while True:
            objects = listed(s3, output_folder) + listed(s3, failure_folder)
            owners = collections.Counter()
            kinds = {url: (inference_id, kind) for inference_id, pair in accepted.items()
                     for url, kind in zip(pair, ("output", "failure"))}
            for url in objects:
                if url in kinds:
                    owners[kinds[url][0]] += 1
            if len(owners) == len(accepted) or time.monotonic() > deadline:
                break
            time.sleep(1)
        late = threading.Event()
        drainer = threading.Thread(target=drain_notifications, args=(sqs, queue_url, notified, late))
        drainer.start()
        deadline = time.monotonic() + 60
        while sum(notified.values()) < len(accepted) and time.monotonic() < deadline:
            time.sleep(0.5)
        late.set()
        drainer.join()
        answered_async = [url for url in objects if kinds.get(url, ("", ""))[1] == "output"]
        failed_async = [url for url in objects if kinds.get(url, ("", ""))[1] == "failure"]
        reasons: collections.Counter[str] = collections.Counter(
            s3.get_object(Bucket=split(url)[0], Key=split(url)[1])["Body"].read().decode(errors="replace")[:200]
            for url in failed_async)
        queued = tallies[QUEUED]
        queued.answered = len(answered_async)
        queued.failed.update(reasons)
        memory_end = serve.resident()
        captured = sum(len(path.read_text().splitlines())
                       for path in (work / "captures").glob(f"{SHADOWED}/Shadow/*/*/*/*/*.jsonl"))
        restarts = serve.restarts()
    finally:
        stop.set()
        code = serve.stop()
    lost_async = [i for i in accepted if owners[i] == 0]
    twice_async = [i for i in accepted if owners[i] > 1]
    strays = [url for url in objects if url not in kinds]
    print()
    print(f"soak of tritonsm serve --all: {minutes:g} min of traffic, {len(kills)} kill(s) "
          f"({', '.join(kills) or 'none'})")
    lost_total = 0
    for name, tally in tallies.items():
        failed = sum(tally.failed.values())
        if name == QUEUED:
            lost = len(lost_async)   # a call not accepted raised, and is counted as failed with its reason
            print(f"  {name} (asynchronous): sent {tally.sent}, accepted {len(accepted)}, answered {tally.answered}, "
                  f"failed {failed}, lost {lost}, written twice {len(twice_async)}, stray objects {len(strays)}; "
                  f"notifications {sum(notified.values())} for {len(accepted)} accepted (missing "
                  f"{sum(1 for i in accepted if notified[i] == 0)}, more than one "
                  f"{sum(1 for i in accepted if notified[i] > 1)})")
        else:
            lost = tally.sent - tally.answered - failed
            print(f"  {name}: sent {tally.sent}, answered {tally.answered}, failed {failed}, lost {lost}, "
                  "written twice 0 (real-time: one answer per call)")
        lost_total += lost
        for reason, count in tally.failed.most_common():
            print(f"      {count} x {reason}")
    print(f"  shadow copies captured: {captured}")
    print(f"  server restarts: {len(restarts)}")
    for line in restarts:
        print(f"      {line}")
    print(f"  resident memory of the serve process tree: start {mib(memory_start[0])} ({memory_start[1]} processes), "
          f"end {mib(memory_end[0])} ({memory_end[1]} processes)")
    print(f"  tritonsm serve stopped on SIGTERM with exit code {code}; its output: {work / 'serve.log'}")
    ok = lost_total == 0 and not twice_async and len(restarts) == len(kills) and code == 0
    print("  result: " + ("ok" if ok else "FAILED (lost or written twice, a kill without a restart, or a bad exit)"))
    return 0 if ok else 1


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="how long traffic runs (default: 10)")
    parser.add_argument("--kills", type=int, default=3, help="Triton servers killed, evenly spread (default: 3)")
    parser.add_argument("--work", type=pathlib.Path, help="where the spec, models, captures and serve.log go "
                                                          "(default: a new temporary folder)")
    args = parser.parse_args(argv)
    if args.minutes <= 0 or args.kills < 0:
        parser.error(f"--minutes {args.minutes:g} and --kills {args.kills}: give minutes above 0 and 0 or more kills")
    work = args.work or pathlib.Path(tempfile.mkdtemp(prefix="tritonsm-soak-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        with interrupting():   # SIGTERM and SIGHUP too: the finally in soak() stops the serve
            return soak(args.minutes, args.kills, work)
    except KeyboardInterrupt:
        print("soak interrupted; tritonsm serve stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
