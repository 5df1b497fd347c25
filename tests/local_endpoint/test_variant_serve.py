"""`tritonsm serve` on a spec with variants and a shadow, on the real Triton server, called through boto3's
sagemaker-runtime client as an application calls the deployed endpoint.

``ab`` splits 80/20 between A (``times2``: doubles) and B (``times3``: triples); ``shadowed`` answers with Prod
(``times2``) and copies half of the requests to its shadow (``times3``). One `tritonsm serve --all` serves both for
the module; the last test stops it with SIGTERM. `tritonsm serve ab` alone is stopped with SIGINT.
"""
from __future__ import annotations

import collections
import dataclasses
import json
import pathlib
import re
import signal
import subprocess
import sys
import time

import boto3
import psutil
import pytest
from botocore.config import Config

from local_endpoint.server.ports import free_port
from variant_fixtures import AB, SHADOWED, body, records, variants_spec

REPOSITORY_ROOT = pathlib.Path(__file__).resolve().parents[2]
STARTED = "press Ctrl-C to stop"
REQUESTS = 200


@dataclasses.dataclass
class Served:
    process: subprocess.Popen
    lines: list[str]   # what it printed up to STARTED
    url: str
    captures: pathlib.Path

    @property
    def servers(self) -> list[psutil.Process]:
        return [p for p in psutil.Process(self.process.pid).children(recursive=True) if p.name() == "tritonserver"]


def start_serve(spec: tuple[pathlib.Path, pathlib.Path], captures: pathlib.Path, *target: str) -> Served:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "tritonsm", "serve", *target, "--spec", str(spec[0]), "--manifest", str(spec[1]),
         "--port", str(port), "--capture-dir", str(captures)],
        cwd=REPOSITORY_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    assert process.stdout is not None
    for line in process.stdout:
        lines.append(line.rstrip("\n"))
        if STARTED in line:
            return Served(process, lines, f"http://127.0.0.1:{port}", captures)
    raise AssertionError(f"tritonsm serve did not start: {lines} {process.stderr.read() if process.stderr else ''}")


def stop(served: Served, sig: signal.Signals) -> tuple[int, str, str]:
    if served.process.poll() is None:
        served.process.send_signal(sig)
    stdout, stderr = served.process.communicate(timeout=120)
    return served.process.returncode, stdout.strip(), stderr


@pytest.fixture(scope="module")
def served(module_tmp):
    root = module_tmp.mktemp("variants")
    # --shadow-queue-size reaches the shadow through --all (its default, 64: test_variant_routing).
    started = start_serve(variants_spec(root), root / "captures", "--all", "--shadow-queue-size", "32")
    yield started
    stop(started, signal.SIGTERM)


@pytest.fixture(scope="module")
def client(served: Served):
    return boto3.client("sagemaker-runtime", endpoint_url=served.url, region_name="eu-west-1",
                        aws_access_key_id="app", aws_secret_access_key="app",
                        config=Config(retries={"total_max_attempts": 1}))


def call(client, endpoint: str, values: list[float], **extra) -> tuple[str, list[float]]:
    response = client.invoke_endpoint(EndpointName=endpoint, ContentType="application/json", Body=body(values),
                                      **extra)
    return response["InvokedProductionVariant"], json.loads(response["Body"].read())["outputs"][0]["data"]


def settled_records(captures: pathlib.Path, endpoint: str, variant: str, quiet: float = 3.0) -> list[dict]:
    """The variant's records once no new one has come for ``quiet`` seconds (the shadow's copies run after the
    callers' answers)."""
    deadline, seen, since = time.monotonic() + 120, -1, time.monotonic()
    while time.monotonic() < deadline:
        found = records(captures, endpoint, variant)
        if len(found) != seen:
            seen, since = len(found), time.monotonic()
        elif time.monotonic() - since >= quiet:
            return found
        time.sleep(0.2)
    raise AssertionError(f"{endpoint}/{variant}: records still coming after 120 s")


def event_ids(found: list[dict]) -> set[str]:
    return {r["eventMetadata"]["eventId"] for r in found}


def output(record: dict) -> list[float]:
    return json.loads(record["captureData"]["endpointOutput"]["data"])["outputs"][0]["data"]


def input_values(record: dict) -> list[float]:
    return json.loads(record["captureData"]["endpointInput"]["data"])["inputs"][0]["data"]


@pytest.mark.triton
def test_startup_says_each_variant_its_share_what_it_serves_and_where_captures_go(served: Served) -> None:
    printed = "\n".join(served.lines)
    captures = served.captures
    assert f"  {AB}: single-model, 2 production variant(s): A 80 %, B 20 %" in served.lines
    assert f"  {SHADOWED}: single-model, 1 production variant(s): Prod 100 %; shadow Shadow gets a copy of 50 % of " \
           "the requests" in served.lines
    assert ("    variant A: 80 % of the requests; model times2 (build ab, default model times2); server log: "
            "/") in printed
    assert ("    variant B: 20 % of the requests; model times3 (build ab.B, default model times3); server log: "
            "/") in printed
    assert ("    variant Shadow: shadow, a copy of 50 % of the requests, answers captured, never returned; model "
            "times3 (build shadowed.Shadow, default model times3); server log: ") in printed
    assert (f"    captures: {captures / SHADOWED}/<variant>/YYYY/MM/DD/HH/*.jsonl (every request copied to the shadow, "
            "with the shadow's answer under the same eventId; 20 % of all requests (data_capture); SageMaker Data "
            "Capture's records, which `tritonsm compare` reads)") in served.lines
    assert ("    captures: none (no shadow and no data_capture); add data_capture to the endpoint to capture a share "
            f"of the requests under {captures} for `tritonsm compare`") in served.lines
    assert ("    shadow Shadow: up to 32 copies wait for its server (--shadow-queue-size); a copy that finds them full "
            "is dropped, and the drops are told here") in served.lines
    assert len(served.servers) == 4   # one Triton server per variant


@pytest.mark.triton
def test_requests_split_by_weight_and_the_header_names_who_answered(client) -> None:
    answers = [call(client, AB, [i, 1.0]) for i in range(REQUESTS)]
    by_variant = collections.Counter(variant for variant, _ in answers)
    # 80/20 over 200 requests: a binomial's standard deviation is 5.7 requests; 0.65-0.95 is over 5 of them.
    assert set(by_variant) == {"A", "B"} and 0.65 <= by_variant["A"] / REQUESTS <= 0.95, by_variant
    factor = {"A": 2.0, "B": 3.0}
    assert all(values == [i * factor[variant], factor[variant]] for i, (variant, values) in enumerate(answers))


@pytest.mark.triton
def test_target_variant_pins_every_answer(client) -> None:
    assert [call(client, AB, [1.0], TargetVariant="B") for _ in range(20)] == [("B", [3.0])] * 20
    assert [call(client, AB, [1.0], TargetVariant="A") for _ in range(20)] == [("A", [2.0])] * 20


@pytest.mark.triton
def test_an_unknown_or_shadow_target_variant_is_refused(client) -> None:
    with pytest.raises(client.exceptions.ValidationError) as unknown:
        call(client, AB, [1.0], TargetVariant="C")
    assert unknown.value.response["Error"]["Message"] == (
        f"TargetVariant C is not a production variant of endpoint {AB}; pass one of: A, B, or leave TargetVariant "
        "out to route by the variants' weights")
    with pytest.raises(client.exceptions.ValidationError) as shadow:
        call(client, SHADOWED, [1.0], TargetVariant="Shadow")
    assert shadow.value.response["Error"]["Message"] == (
        f"TargetVariant Shadow of endpoint {SHADOWED} is its shadow variant, which only receives copies of the "
        "production variant's requests and never answers a caller; pass a production variant (Prod) or leave "
        "TargetVariant out")


@pytest.mark.triton
def test_the_caller_gets_productions_answers_and_the_shadows_are_captured_beside_them(served: Served,
                                                                                      client) -> None:
    answers = [call(client, SHADOWED, [i, 0.5]) for i in range(REQUESTS)]
    assert answers == [("Prod", [i * 2.0, 1.0]) for i in range(REQUESTS)]   # never the shadow's tripled values
    shadow = settled_records(served.captures, SHADOWED, "Shadow")
    production = records(served.captures, SHADOWED, "Prod")
    # Half the requests are copied (a loose bound over 200); each copy pairs with its production record.
    assert 0.35 <= len(shadow) / REQUESTS <= 0.65, len(shadow)
    assert event_ids(shadow) <= event_ids(production) and len(event_ids(shadow)) == len(shadow)
    by_id = {r["eventMetadata"]["eventId"]: r for r in production}
    for record in shadow:
        paired = by_id[record["eventMetadata"]["eventId"]]
        assert input_values(record) == input_values(paired)
        assert output(record) == [v * 3 for v in input_values(record)]
        assert output(paired) == [v * 2 for v in input_values(record)]
        assert record["eventMetadata"]["tritonsmLatencyMs"] > 0
    # Production also captures data_capture's 20 % of the rest: 1 - 0.5 * 0.8 = 60 % of all requests.
    assert len(shadow) < len(production) <= REQUESTS


@pytest.mark.triton
def test_failed_calls_are_captured_with_tritons_message(served: Served, client) -> None:
    wrong = json.dumps({"inputs": [{"name": "X", "shape": [1, 1], "datatype": "FP32", "data": [1.0]}]})
    for _ in range(20):   # P(none of 20 copied at 50 %) is one in a million
        with pytest.raises(client.exceptions.ModelError):
            client.invoke_endpoint(EndpointName=SHADOWED, ContentType="application/json", Body=wrong)
    failed = [r for r in settled_records(served.captures, SHADOWED, "Shadow") if "tritonsmError" in r["eventMetadata"]]
    production = {r["eventMetadata"]["eventId"]: r for r in records(served.captures, SHADOWED, "Prod")}
    assert failed
    for record in failed:
        assert "endpointOutput" not in record["captureData"]
        assert "unexpected inference input 'X'" in record["eventMetadata"]["tritonsmError"]
        paired = production[record["eventMetadata"]["eventId"]]
        assert "endpointOutput" not in paired["captureData"]
        assert "unexpected inference input 'X'" in paired["eventMetadata"]["tritonsmError"]


# The line the shadow's worker prints at the stop: every copy it was given is dropped, answered or failed.
SHADOW_SUMMARY = re.compile(r"shadow Shadow: (\d+) of (\d+) copies dropped \(queue full, size 32\)(?:, (\d+) more "
                            r"dropped at the stop)?; (\d+) answered, (\d+) failed(?:; a larger --shadow-queue-size, or "
                            r"a lower shadow\.sampling_percent, keeps more)?")


@pytest.mark.triton
def test_sigterm_stops_every_variants_server_and_the_shadow_accounts_for_every_copy(served: Served) -> None:
    servers = served.servers
    assert len(servers) == 4
    code, stdout, stderr = stop(served, signal.SIGTERM)
    assert (code, stdout.splitlines()[-1], stderr) == (0, "stopped", "")
    summary = SHADOW_SUMMARY.fullmatch(stdout.splitlines()[-2])
    assert summary, stdout
    full, offered, at_stop, answered, failed = (int(n or 0) for n in summary.groups())
    assert offered >= 50 and full + at_stop + answered + failed == offered, summary.groups()
    _, alive = psutil.wait_procs(servers, timeout=30)
    assert alive == []


@pytest.mark.triton
def test_serve_one_endpoint_starts_its_variants_and_ctrl_c_stops_them(tmp_path: pathlib.Path) -> None:
    alone = start_serve(variants_spec(tmp_path), tmp_path / "captures", "ab")
    try:
        assert alone.lines[0] == f"serving endpoint {AB} at {alone.url}: single-model, 2 production variant(s): A 80 " \
                                 "%, B 20 %"
        assert [line.split(";")[0] for line in alone.lines[1:3]] == ["  variant A: 80 % of the requests",
                                                                     "  variant B: 20 % of the requests"]
        servers = alone.servers
        assert len(servers) == 2
    finally:
        code, stdout, stderr = stop(alone, signal.SIGINT)
    assert (code, stdout, stderr) == (0, "stopped", "")
    _, alive = psutil.wait_procs(servers, timeout=30)
    assert alive == []
