"""`tritonsm bench recommender ENDPOINT --import JOB`: a finished Inference Recommender job, read
through boto3 against botocore's Stubber (which checks the request and the response against the
sagemaker service model), becomes the endpoint's capacity record."""
import datetime
import json

import boto3
import pytest
from botocore.stub import Stubber

from deployment_spec import load_spec

from tritonsm.cli import main

from bench_prices import TEST_PRICE_SOURCE

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]
SPEC = ROOT / "triton.yaml"
NOW = datetime.datetime(2026, 11, 23, tzinfo=datetime.timezone.utc)


def _job(status="COMPLETED", **extra):
    return {"JobName": "classifier-load-test", "JobType": "Advanced",
            "JobArn": "arn:aws:sagemaker:us-east-1:111122223333:inference-recommendations-job/classifier-load-test",
            "RoleArn": "arn:aws:iam::111122223333:role/recommender", "Status": status, "CreationTime": NOW,
            "LastModifiedTime": NOW, "InputConfig": {"ModelName": "model-abc"}, **extra}


ENDPOINT_JOB_HAS_NO_COST = (
    "the job measured an existing endpoint: its EndpointPerformances carry MaxInvocations and ModelLatency only "
    "(botocore InferenceMetrics), no CostPerHour or CostPerInference")
PERFORMANCE = {"EndpointPerformances": [{"Metrics": {"MaxInvocations": 1800, "ModelLatency": 412},
                                         "EndpointInfo": {"EndpointName": "Triton-prod-classifier"}}]}


@pytest.fixture
def sagemaker(monkeypatch):
    client = boto3.client("sagemaker", region_name="us-east-1", aws_access_key_id="test",
                          aws_secret_access_key="test")
    stubber = Stubber(client)
    monkeypatch.setattr(boto3, "client", lambda *args, **kwargs: client)
    with stubber:
        yield stubber
        stubber.assert_no_pending_responses()


def _import(tmp_path, *extra, spec=SPEC, endpoint="classifier"):
    return main(["bench", "--spec", str(spec), "recommender", endpoint, "--import", "classifier-load-test",
                 "--capacity", str(tmp_path / "capacity.json"), *extra])


def test_a_finished_job_becomes_the_capacity_record(sagemaker, tmp_path, capsys):
    sagemaker.add_response("describe_inference_recommendations_job", _job(**PERFORMANCE),
                           {"JobName": "classifier-load-test"})
    assert _import(tmp_path) == 0
    sla = load_spec(SPEC).endpoints["classifier"].alarms.latency_sla_ms
    # 1800 invocations per minute on the instance = 30 req/s.
    recorded = json.loads((tmp_path / "capacity.json").read_text())["endpoints"]["classifier"]
    costs, aws = recorded.pop("cost_per_million"), recorded.pop("recommender_cost")
    assert recorded == {
        "max_rps_per_instance": 30.0, "latency_sla_ms": float(sla), "p99_ms": 412.0,
        "measured_on": "ml.g5.xlarge, endpoint Triton-prod-classifier, Inference Recommender job classifier-load-test",
        "command": "tritonsm bench recommender classifier --import classifier-load-test"}
    # The shipped snapshot prices ml.g5.xlarge in us-east-1 ($1.4084/h: 1.4084 / (30 x 3600) x 1e6 per million) and
    # nothing in us-west-2, which stays unknown, with the reason.
    assert [(c["region"], c["usd_per_million"] and round(c["usd_per_million"], 2), (c["unknown"] or "")[:14])
            for c in costs] == [("us-east-1", 13.04, ""), ("us-west-2", None, "unknown price:")]
    # A job on an existing endpoint reports no cost of its own (botocore InferenceMetrics): kept as unknown.
    assert aws == {"job": "classifier-load-test", "region": "us-east-1", "instance_type": "ml.g5.xlarge",
                   "cost_per_hour": None, "cost_per_inference": None, "not_reported": ENDPOINT_JOB_HAS_NO_COST}
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ("classifier: 412 ms model latency at 30 req/s per instance (ml.g5.xlarge, endpoint "
                        "Triton-prod-classifier, Inference Recommender job classifier-load-test)")
    assert lines[1].startswith(f"recorded 30 req/s for endpoint classifier in {tmp_path / 'capacity.json'}: ")


def test_an_unfinished_job_is_refused(sagemaker, tmp_path, capsys):
    sagemaker.add_response("describe_inference_recommendations_job",
                           _job("FAILED", FailureReason="endpoint not InService"), {"JobName": "classifier-load-test"})
    assert _import(tmp_path) == 2
    assert capsys.readouterr().err == ("error: Inference Recommender job classifier-load-test is FAILED: endpoint not "
                                       "InService; import it once it is COMPLETED\n")
    assert not (tmp_path / "capacity.json").exists()


def test_a_job_without_the_endpoint_s_instance_type_is_refused(sagemaker, tmp_path, capsys):
    other = {"InferenceRecommendations": [{
        "Metrics": {"CostPerHour": 1.0, "CostPerInference": 0.001, "MaxInvocations": 600, "ModelLatency": 90},
        "EndpointConfiguration": {"EndpointName": "x", "VariantName": "v", "InstanceType": "ml.g4dn.xlarge",
                                  "InitialInstanceCount": 1},
        "ModelConfiguration": {}}]}
    sagemaker.add_response("describe_inference_recommendations_job", _job(**other),
                           {"JobName": "classifier-load-test"})
    assert _import(tmp_path) == 2
    assert capsys.readouterr().err == (
        "error: Inference Recommender job classifier-load-test has no result for ml.g5.xlarge (endpoint classifier's "
        "instance type); run a job that includes it (tritonsm bench recommender classifier ...)\n")


def test_an_api_error_is_explained(sagemaker, tmp_path, capsys):
    sagemaker.add_client_error("describe_inference_recommendations_job", service_error_code="ResourceNotFound",
                               service_message="Job not found", expected_params={"JobName": "classifier-load-test"})
    assert _import(tmp_path) == 2
    assert capsys.readouterr().err == (
        "error: cannot read Inference Recommender job classifier-load-test: An error occurred (ResourceNotFound) when "
        "calling the DescribeInferenceRecommendationsJob operation: Job not found\n")


def test_a_request_without_its_flags_says_which(capsys):
    assert main(["bench", "--spec", str(SPEC), "recommender", "classifier", "--model-name", "m"]) == 2
    assert capsys.readouterr().err == (
        "error: a recommender request needs --endpoint-name, --role-arn, --sample-payload-url; or give --import "
        "JOB_NAME to record a finished job's result\n")


# ------------------------------------------------------------------ AWS's own cost against ours (test price figures)

def _recommendation(instance_type="ml.g5.xlarge", **metrics):
    # 600 invocations per minute = 10 req/s; at the test figure of $2/h in us-east-1 ours is $55.56 per million.
    return {"InferenceRecommendations": [{
        "Metrics": {"MaxInvocations": 600, "ModelLatency": 90, **metrics},
        "EndpointConfiguration": {"EndpointName": "x", "VariantName": "v", "InstanceType": instance_type,
                                  "InitialInstanceCount": 1},
        "ModelConfiguration": {}}]}


def _in(region, job):
    return {**job, "JobArn": f"arn:aws:sagemaker:{region}:111122223333:inference-recommendations-job/classifier-load-test"}


def _compared(sagemaker, tmp_path, capsys, priced_spec, job):
    sagemaker.add_response("describe_inference_recommendations_job", job, {"JobName": "classifier-load-test"})
    assert _import(tmp_path, spec=priced_spec.path, endpoint="tiny-sme") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1].startswith("compared: Inference Recommender job classifier-load-test in ")
    return lines[-1].removeprefix("compared: Inference Recommender job classifier-load-test in ")


OURS_US_EAST_1 = ("$55.56 per million inferences in us-east-1 at 10 req/s per instance within the 300 ms SLA "
                  f"(ml.g5.xlarge at $2/h in us-east-1, prices of 2026-11-01, on demand, source: {TEST_PRICE_SOURCE})")


def test_aws_s_cost_per_inference_is_kept_and_compared_with_ours(sagemaker, tmp_path, capsys, priced_spec):
    # AWS says $0.00005 per inference: $50 per million; ours at the test figure is $55.56: 1.11 times AWS's.
    line = _compared(sagemaker, tmp_path, capsys, priced_spec,
                     _job(**_recommendation(CostPerHour=1.8, CostPerInference=0.00005)))
    assert line == ("us-east-1, ml.g5.xlarge: AWS's CostPerInference 5e-05 × 1e6 = $50.00 per million, CostPerHour "
                    f"1.8; ours {OURS_US_EAST_1}; ours / AWS's = 1.11")
    recorded = json.loads((tmp_path / "capacity.json").read_text())["endpoints"]["tiny-sme"]
    assert recorded["recommender_cost"] == {
        "job": "classifier-load-test", "region": "us-east-1", "instance_type": "ml.g5.xlarge", "cost_per_hour": 1.8,
        "cost_per_inference": 0.00005, "not_reported": None}
    # Measured on the endpoint's own type: no stand-in where it is served on it, a stand-in where it is not.
    assert [(c["region"], c["instance_type"], c["stand_in"]) for c in recorded["cost_per_million"]] == [
        ("eu-west-1", "ml.g5.xlarge", False), ("us-east-1", "ml.g5.xlarge", False),
        ("us-west-2", "ml.g6.xlarge", True)]


def test_a_job_on_an_existing_endpoint_has_no_aws_figure_and_the_line_says_so(sagemaker, tmp_path, capsys,
                                                                               priced_spec):
    job = _job(EndpointPerformances=[{"Metrics": {"MaxInvocations": 600, "ModelLatency": 90},
                                      "EndpointInfo": {"EndpointName": "TinyBench-dev-tiny-sme"}}])
    line = _compared(sagemaker, tmp_path, capsys, priced_spec, job)
    assert line == (f"us-east-1, ml.g5.xlarge: AWS's cost per million unknown: {ENDPOINT_JOB_HAS_NO_COST}; ours "
                    f"{OURS_US_EAST_1}; no ratio: AWS's figure is unknown")


def test_a_result_without_cost_per_inference_names_the_missing_field(sagemaker, tmp_path, capsys, priced_spec):
    line = _compared(sagemaker, tmp_path, capsys, priced_spec, _job(**_recommendation(CostPerHour=1.8)))
    assert line == ("us-east-1, ml.g5.xlarge: AWS's cost per million unknown: the job's result for ml.g5.xlarge "
                    f"carries no CostPerInference; ours {OURS_US_EAST_1}; no ratio: AWS's figure is unknown")


def test_a_job_in_an_unpriced_region_has_no_figure_of_ours(sagemaker, tmp_path, capsys, priced_spec):
    from deployment_spec.cost import pricing

    missing = pricing.load_prices(priced_spec.root).missing("eu-west-1", "ml.g5.xlarge")
    line = _compared(sagemaker, tmp_path, capsys, priced_spec,
                     _in("eu-west-1", _job(**_recommendation(CostPerHour=1.8, CostPerInference=0.00005))))
    assert line == ("eu-west-1, ml.g5.xlarge: AWS's CostPerInference 5e-05 × 1e6 = $50.00 per million, CostPerHour "
                    f"1.8; ours unknown: {missing}; no ratio: ours is unknown")
    line = _compared(sagemaker, tmp_path, capsys, priced_spec, _in("eu-west-1", _job(**_recommendation())))
    assert line.endswith("; no ratio: both are unknown")


def test_a_result_without_max_invocations_is_refused_with_the_field(sagemaker, tmp_path, capsys):
    # MaxInvocations and ModelLatency are optional in RecommendationMetrics: a result may lack them.
    job = _job(**_recommendation())
    del job["InferenceRecommendations"][0]["Metrics"]["MaxInvocations"]
    sagemaker.add_response("describe_inference_recommendations_job", job, {"JobName": "classifier-load-test"})
    assert _import(tmp_path) == 2
    assert capsys.readouterr().err == (
        "error: Inference Recommender job classifier-load-test's result for ml.g5.xlarge has no MaxInvocations; "
        "nothing to record (the capacity record needs both): run the job again, or set "
        "endpoints.classifier.scaling.max_rps_per_instance\n")
    assert not (tmp_path / "capacity.json").exists()


def test_every_other_instance_type_the_job_tried_is_compared_too(sagemaker, tmp_path, capsys, priced_spec):
    # The job ran in us-west-2, where the test figures price ml.g6.xlarge ($3.60/h) and not ml.g5.xlarge.
    job = _recommendation(CostPerHour=1.2, CostPerInference=0.00004)
    other = _recommendation("ml.g6.xlarge", CostPerHour=1.0, CostPerInference=0.0001)["InferenceRecommendations"]
    incomplete = _recommendation("ml.g4dn.xlarge")["InferenceRecommendations"]
    del incomplete[0]["Metrics"]["MaxInvocations"]  # left out: nothing to price
    sagemaker.add_response("describe_inference_recommendations_job", _in("us-west-2", _job(
        InferenceRecommendations=job["InferenceRecommendations"] + other + incomplete)),
        {"JobName": "classifier-load-test"})
    assert _import(tmp_path, spec=priced_spec.path, endpoint="tiny-sme") == 0
    also = [line for line in capsys.readouterr().out.splitlines() if line.startswith("also measured: ")]
    assert also == [
        "also measured: 10 req/s per instance, 90 ms model latency; Inference Recommender job classifier-load-test in "
        "us-west-2, ml.g6.xlarge: AWS's CostPerInference 0.0001 × 1e6 = $100 per million, CostPerHour 1; ours "
        "$100 per million inferences in us-west-2 at 10 req/s per instance within the 300 ms SLA (ml.g6.xlarge "
        f"at $3.6/h in us-west-2, prices of 2026-11-01, on demand, source: {TEST_PRICE_SOURCE}); ours / AWS's = 1.00"]
    # Only the endpoint's own type goes into capacity.json.
    recorded = json.loads((tmp_path / "capacity.json").read_text())["endpoints"]["tiny-sme"]
    assert recorded["recommender_cost"]["instance_type"] == "ml.g5.xlarge"
