"""The Inference Recommender request: valid for botocore's sagemaker model, malformed ones refused with its message."""
import copy
import json

import pytest

from tritonsm.benchmarking import recommender_request as rr
from tritonsm.cli import main

ROLE = "arn:aws:iam::123456789012:role/InferenceRecommender"


@pytest.fixture()
def request_dict(tiny_spec):
    return rr.build_request(spec=tiny_spec, endpoint="tiny-sme", job_name="tiny-sme-load-test", role_arn=ROLE,
                            model_name="TinyModel-1A2B3C", endpoint_name="TinyEndpoint-4D5E6F",
                            sample_payload_url="s3://bucket/payloads/tiny.tar.gz", content_type="application/json",
                            instance_types=["ml.g4dn.xlarge"])


def test_the_request_is_an_advanced_phased_job_with_the_spec_values(request_dict):
    rr.validate(request_dict)
    assert request_dict["JobType"] == "Advanced"
    assert request_dict["InputConfig"]["TrafficPattern"] == {
        "TrafficType": "PHASES", "Phases": [{"InitialNumberOfUsers": 2, "SpawnRate": 2, "DurationInSeconds": 1500}]}
    # The endpoint's latency SLA (alarms.latency_sla_ms 300) is the stopping threshold.
    assert request_dict["StoppingConditions"]["ModelLatencyThresholds"] == [
        {"Percentile": "P99", "ValueInMilliseconds": 300}]
    # The spec's instance type first, then the extra candidate.
    assert request_dict["InputConfig"]["EndpointConfigurations"] == [
        {"InstanceType": "ml.g5.xlarge"}, {"InstanceType": "ml.g4dn.xlarge"}]
    assert request_dict["InputConfig"]["Endpoints"] == [{"EndpointName": "TinyEndpoint-4D5E6F"}]


def test_a_malformed_request_is_rejected_with_botocores_message(request_dict):
    bad = copy.deepcopy(request_dict)
    del bad["RoleArn"]
    bad["InputConfig"]["JobDurationInSeconds"] = "3000"
    bad["InputConfig"]["TrafficPattern"]["Phases"][0]["Users"] = 2
    with pytest.raises(rr.RecommenderRequestError) as caught:
        rr.validate(bad)
    assert str(caught.value) == (
        "Parameter validation failed:\n"
        'Missing required parameter in input: "RoleArn"\n'
        "Invalid type for parameter InputConfig.JobDurationInSeconds, value: 3000, type: <class 'str'>, "
        "valid types: <class 'int'>\n"
        'Unknown parameter in InputConfig.TrafficPattern.Phases[0]: "Users", must be one of: '
        "InitialNumberOfUsers, SpawnRate, DurationInSeconds")


def test_values_botocore_leaves_to_the_service_are_caught_too(request_dict):
    # botocore's client-side validator accepts these; the service would not.
    bad = copy.deepcopy(request_dict)
    bad["JobType"] = "ADVANCED"
    bad["InputConfig"]["EndpointConfigurations"][1]["InstanceType"] = "ml.g5.huge"
    bad["JobName"] = "tiny_sme"
    with pytest.raises(rr.RecommenderRequestError) as caught:
        rr.validate(bad)
    assert str(caught.value) == (
        "Request would be rejected by the service:\n"
        "JobName: 'tiny_sme' does not match the pattern [a-zA-Z0-9](-*[a-zA-Z0-9]){0,63}\n"
        "JobType: 'ADVANCED' is not a valid RecommendationJobType (Default, Advanced)\n"
        "InputConfig.EndpointConfigurations[1].InstanceType: 'ml.g5.huge' is not a valid "
        f"ProductionVariantInstanceType (one of {len(rr.input_shape().members['InputConfig'].members['EndpointConfigurations'].member.members['InstanceType'].enum)} values)")


def test_cli_writes_a_file_for_the_aws_cli(tiny_spec, tmp_path, capsys):
    out = tmp_path / "ir.json"
    code = main(["bench", "--spec", str(tiny_spec.path), "recommender", "tiny-sme", "--endpoint-name", "TinyEndpoint",
                 "--model-name", "TinyModel", "--role-arn", ROLE, "--sample-payload-url", "s3://b/p.tar.gz",
                 "--phase", "1:1:120", "--phase", "4:2:300", "--out", str(out)])
    assert code == 0
    written = json.loads(out.read_text())
    rr.validate(written)
    assert written["InputConfig"]["TrafficPattern"]["Phases"] == [
        {"InitialNumberOfUsers": 1, "SpawnRate": 1, "DurationInSeconds": 120},
        {"InitialNumberOfUsers": 4, "SpawnRate": 2, "DurationInSeconds": 300}]
    assert f"--cli-input-json file://{out}" in capsys.readouterr().out


def test_cli_reports_a_bad_role_without_a_traceback(tiny_spec, tmp_path, capsys):
    code = main(["bench", "--spec", str(tiny_spec.path), "recommender", "tiny-sme", "--endpoint-name", "E",
                 "--model-name", "M", "--role-arn", "my-role", "--sample-payload-url", "s3://b/p.tar.gz",
                 "--out", str(tmp_path / "ir.json")])
    assert code == 2
    assert capsys.readouterr().err == (
        "error: Parameter validation failed:\n"
        "Invalid length for parameter RoleArn, value: 7, valid min length: 20\n")
    assert not (tmp_path / "ir.json").exists()
