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

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]
SPEC = ROOT / "triton.yaml"
NOW = datetime.datetime(2026, 11, 23, tzinfo=datetime.timezone.utc)


def _job(status="COMPLETED", **extra):
    return {"JobName": "classifier-load-test", "JobType": "Advanced",
            "JobArn": "arn:aws:sagemaker:us-east-1:111122223333:inference-recommendations-job/classifier-load-test",
            "RoleArn": "arn:aws:iam::111122223333:role/recommender", "Status": status, "CreationTime": NOW,
            "LastModifiedTime": NOW, "InputConfig": {"ModelName": "model-abc"}, **extra}


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


def _import(tmp_path, *extra):
    return main(["bench", "--spec", str(SPEC), "recommender", "classifier", "--import", "classifier-load-test",
                 "--capacity", str(tmp_path / "capacity.json"), *extra])


def test_a_finished_job_becomes_the_capacity_record(sagemaker, tmp_path, capsys):
    sagemaker.add_response("describe_inference_recommendations_job", _job(**PERFORMANCE),
                           {"JobName": "classifier-load-test"})
    assert _import(tmp_path) == 0
    sla = load_spec(SPEC).endpoints["classifier"].alarms.latency_sla_ms
    # 1800 invocations per minute on the instance = 30 req/s.
    assert json.loads((tmp_path / "capacity.json").read_text())["endpoints"]["classifier"] == {
        "max_rps_per_instance": 30.0, "latency_sla_ms": float(sla), "p99_ms": 412.0,
        "measured_on": "ml.g5.xlarge, endpoint Triton-prod-classifier, Inference Recommender job classifier-load-test",
        "command": "tritonsm bench recommender classifier --import classifier-load-test"}
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
