"""`tritonsm compare` on a deployed endpoint's captures: read from S3 (moto's S3), only the window's hour folders;
latency from CloudWatch's ModelLatency (botocore's Stubber, responses validated against the service model); the
refusals when S3 or CloudWatch cannot be read."""
from __future__ import annotations

import datetime as dt
import json

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from deployment_spec.parsing.errors import UserError

from tritonsm.cli import build_parser, main
from tritonsm.commands.compare import run
from tritonsm.comparing import cloudwatch

T0 = dt.datetime(2026, 11, 28, 5, 10, tzinfo=dt.timezone.utc)
SINCE, UNTIL = dt.datetime(2026, 11, 28, 5, 0, tzinfo=dt.timezone.utc), dt.datetime(2026, 11, 28, 5, 30,
                                                                                      tzinfo=dt.timezone.utc)
WINDOW = ["--since", "2026-11-28T05:00:00Z", "--until", "2026-11-28T05:30:00Z"]
BUCKET, PREFIX = "capture-bucket", "datacapture"


def sagemaker_record(i: int, score: float, seconds: int = 0) -> str:
    """A record as SageMaker writes it: no latency, no error field; inferenceTime to the second."""
    answer = {"outputs": [{"name": "scores", "datatype": "FP32", "shape": [1, 2], "data": [score, 1 - score]}]}
    return json.dumps({"captureData": {
        "endpointInput": {"observedContentType": "application/json", "mode": "INPUT", "encoding": "JSON",
                          "data": json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 1],
                                                          "data": [i]}]})},
        "endpointOutput": {"observedContentType": "application/json", "mode": "OUTPUT", "encoding": "JSON",
                           "data": json.dumps(answer)}},
        "eventMetadata": {"eventId": f"{score}-{i}",
                          "inferenceTime": (T0 + dt.timedelta(seconds=i + seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")},
        "eventVersion": "0"})


@pytest.fixture
def bucket(monkeypatch):
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                        ("AWS_DEFAULT_REGION", "us-east-1")):
        monkeypatch.setenv(name, value)
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)

        def put(variant: str, hour: str, name: str, lines: list[str]) -> None:
            s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}/ep/{variant}/{hour}/{name}", Body="\n".join(lines) + "\n")

        # Production answers 0.8; the shadow 0.7 (same top label); its eventIds differ, its requests are the same.
        put("AllTraffic", "2026/11/28/05", "10-00-000-a.jsonl", [sagemaker_record(i, 0.8) for i in range(4)])
        put("Shadow", "2026/11/28/05", "10-00-000-b.jsonl", [sagemaker_record(i, 0.7, 1) for i in range(4)])
        # Hour folders outside the window are never listed or read (they would not parse).
        put("Shadow", "2026/11/28/04", "x.jsonl", ["not json"])
        put("Shadow", "2026/11/28/06", "x.jsonl", ["not json"])
        yield s3


def _minutes(values: list[float]) -> dict:
    return {"Timestamps": [T0 + dt.timedelta(minutes=m) for m in range(len(values))], "Values": values,
            "StatusCode": "Complete"}


def test_s3_captures_with_cloudwatch_latency(bucket, tmp_path, capsys):
    client = boto3.client("cloudwatch", region_name="us-east-1")
    stubber = Stubber(client)
    queries = cloudwatch.queries("ep", ["AllTraffic", "Shadow"])
    expected = {"MetricDataQueries": queries, "StartTime": SINCE, "EndTime": UNTIL, "ScanBy": "TimestampAscending"}
    # ModelLatency in microseconds; two pages, the second after NextToken.
    stubber.add_response("get_metric_data", {"MetricDataResults": [
        {"Id": "v0_p50", **_minutes([10_000, 12_000, 14_000])}, {"Id": "v0_p99", **_minutes([30_000, 50_000, 40_000])},
        {"Id": "v0_n", **_minutes([100, 120, 80])}, {"Id": "v0_e4", **_minutes([0, 1, 0])},
        {"Id": "v0_e5", **_minutes([2, 0, 0])}], "NextToken": "page2"}, expected)
    stubber.add_response("get_metric_data", {"MetricDataResults": [
        {"Id": "v1_p50", **_minutes([20_000, 22_000])}, {"Id": "v1_p99", **_minutes([90_000, 70_000])},
        {"Id": "v1_n", **_minutes([50, 50])}, {"Id": "v1_e4", **_minutes([])}, {"Id": "v1_e5", **_minutes([3, 0])}]},
        {**expected, "NextToken": "page2"})
    # The roles as given: these captures' endpoint is no spec's.
    args = build_parser().parse_args(["compare", "--captures", f"s3://{BUCKET}/{PREFIX}/", "--endpoint", "ep",
                                      "--incumbent", "AllTraffic", *WINDOW, "--cloudwatch", "--plot", str(tmp_path / "p.png"),
                                      "--json", str(tmp_path / "r.json")])
    with stubber:
        assert run(args, cloudwatch=client) == 0
        stubber.assert_no_pending_responses()
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["records"] == {"AllTraffic": 4, "Shadow": 4}
    assert result["pairing"]["by_event_id"] == 0 and result["pairing"]["by_input"] == 4
    scores = result["agreement"]["outputs"]["scores"]
    assert scores["same_top_label_share"] == 1.0 and scores["max_abs_diff"] == pytest.approx(0.1, rel=1e-6)
    assert result["latency"] == {"source": cloudwatch.SOURCE, "variants": {
        "AllTraffic": {"count": 300, "p50_ms": 12.0, "p99_ms": 50.0, "4xx": 1, "5xx": 2},
        "Shadow": {"count": 100, "p50_ms": 21.0, "p99_ms": 90.0, "4xx": 0, "5xx": 3}}}
    out = capsys.readouterr().out
    assert f"Latency ({cloudwatch.SOURCE})" in out
    assert "| AllTraffic | incumbent | 300 | 12 | 50 | 1 | 2 |" in out
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_s3_captures_without_cloudwatch_say_there_is_no_latency(bucket, tmp_path, capsys):
    assert main(["compare", "--captures", f"s3://{BUCKET}/{PREFIX}", "--endpoint", "ep", "--incumbent",
                 "AllTraffic", *WINDOW, "--plot", str(tmp_path / "p.png")]) == 0
    assert ("Latency: none in these captures (SageMaker's records carry no latency); add --cloudwatch for the "
            "variants' ModelLatency\n") in capsys.readouterr().out


def test_refusals_when_s3_or_cloudwatch_cannot_be_read(bucket, tmp_path, capsys):
    def error(*argv: str, **clients) -> str:
        args = build_parser().parse_args(["compare", *argv, *WINDOW, "--plot", str(tmp_path / "p.png")])
        with pytest.raises(UserError) as raised:
            run(args, **clients)
        return str(raised.value)

    assert error("--captures", "s3://", "--endpoint", "ep") == (
        "--captures s3://: no bucket; give s3://BUCKET/PREFIX/ (the DestinationS3Uri of the endpoint's data capture) "
        "or a local folder")
    assert error("--captures", f"s3://{BUCKET}/{PREFIX}/", "--endpoint", "other") == (
        f"--endpoint other: nothing under s3://{BUCKET}/{PREFIX}/other/; give the endpoint's name as its data capture "
        "files it, and check --captures (the DestinationS3Uri of its data capture)")
    assert error("--captures", f"s3://missing-bucket/{PREFIX}/", "--endpoint", "ep") == (
        f"--captures s3://missing-bucket/{PREFIX}/: cannot read s3://missing-bucket/{PREFIX}/ep/ (An error occurred "
        "(NoSuchBucket) when calling the ListObjectsV2 operation: The specified bucket does not exist); check the "
        "bucket and prefix (the DestinationS3Uri of the endpoint's data capture) and that your credentials allow "
        "s3:ListBucket and s3:GetObject there")
    s3 = boto3.client("s3", region_name="us-east-1")
    with Stubber(s3) as stubber:
        stubber.add_client_error("list_objects_v2", "AccessDenied", "Access Denied", 403)
        assert error("--captures", f"s3://{BUCKET}/{PREFIX}/", "--endpoint", "ep", s3=s3) == (
            f"--captures s3://{BUCKET}/{PREFIX}/: cannot read s3://{BUCKET}/{PREFIX}/ep/ (An error occurred "
            "(AccessDenied) when calling the ListObjectsV2 operation: Access Denied); check the bucket and prefix "
            "(the DestinationS3Uri of the endpoint's data capture) and that your credentials allow s3:ListBucket "
            "and s3:GetObject there")
    client = boto3.client("cloudwatch", region_name="us-east-1")
    with Stubber(client) as stubber:
        stubber.add_client_error("get_metric_data", "AccessDenied", "User is not authorized", 403)
        assert error("--captures", f"s3://{BUCKET}/{PREFIX}/", "--endpoint", "ep", "--incumbent", "AllTraffic",
                     "--cloudwatch", cloudwatch=client) == (
            "--cloudwatch: cannot read AWS/SageMaker ModelLatency of endpoint ep (An error occurred (AccessDenied) "
            "when calling the GetMetricData operation: User is not authorized); check --region (the endpoint's) and "
            "that your credentials allow cloudwatch:GetMetricData")
