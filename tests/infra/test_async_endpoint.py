"""Asynchronous Inference on TritonSageMakerEndpoint, as a user's own CDK app uses it: the configuration, the
queue's scaling, alarms, topics, least-privilege IAM and grant_invoke_async, and every refused combination with
its exact message. (The example spec examples/image-async-sme.yaml runs through cfn-lint, cdk-nag, checkov,
Control Tower, Security Hub and the API-model check with every other example: tests/infra/test_cdk_app.py.)"""
from __future__ import annotations

import pathlib

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam, aws_lambda as lambda_
from aws_cdk.assertions import Annotations, Match, Template
from cdk_nag import AwsSolutionsChecks

import yaml

from deployment_spec.cost.capacity import Drain
from synth_helpers import resource_id, statements, synth_spec
from user_app import user_stack
from triton_constructs import (Asynchronous, DataCapture, LoadMetric, ModelArchive, ModelRepositories, PropsError,
                               Scaling, TritonSageMakerEndpoint)

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "image-async-sme.yaml"
ARCHIVE = "s3://my-models/photos/photos-0123456789ab.tar.gz"
NAME = "photos-async"


def _models() -> ModelRepositories:
    return ModelRepositories.from_archives([ModelArchive.from_s3(ARCHIVE, ["photos"])])


def _endpoint(stack: cdk.Stack, **props) -> TritonSageMakerEndpoint:
    props.setdefault("asynchronous", Asynchronous())
    props.setdefault("scaling", Scaling(min_instances=0, max_instances=4))
    return TritonSageMakerEndpoint(stack, "Photos", models=_models(), instance_type="ml.g5.xlarge",
                                   endpoint_name=NAME, **props)


def _model_bucket(template: Template) -> str:
    """The KMS-encrypted bucket (the other one holds its access logs)."""
    return resource_id(template, "AWS::S3::Bucket", {"BucketEncryption": {"ServerSideEncryptionConfiguration": [
        Match.object_like({"ServerSideEncryptionByDefault": Match.object_like({"SSEAlgorithm": "aws:kms"})})]}})


@pytest.fixture(scope="module")
def synthesized() -> tuple[cdk.Stack, TritonSageMakerEndpoint, Template]:
    stack = user_stack()
    endpoint = _endpoint(stack, asynchronous=Asynchronous(max_concurrent_invocations_per_instance=8,
                                                          backlog_per_instance=3, oldest_request_age_s=600,
                                                          include_response_in_notifications=True))
    caller = lambda_.Function(stack, "Caller", runtime=lambda_.Runtime.PYTHON_3_12, handler="index.handler",
                              code=lambda_.Code.from_inline("def handler(event, context):\n    return None\n"))
    endpoint.grant_invoke_async(caller)
    return stack, endpoint, Template.from_stack(stack)


def test_the_configuration_sends_answers_failures_and_notifications_where_it_says(synthesized):
    _, _, template = synthesized
    config = next(iter(template.find_resources("AWS::SageMaker::EndpointConfig").values()))["Properties"]
    async_config = config["AsyncInferenceConfig"]
    assert async_config["ClientConfig"] == {"MaxConcurrentInvocationsPerInstance": 8}
    output = async_config["OutputConfig"]
    assert output["NotificationConfig"]["IncludeInferenceResponseIn"] == ["SUCCESS_NOTIFICATION_TOPIC",
                                                                           "ERROR_NOTIFICATION_TOPIC"]
    assert output["KmsKeyId"] == config["KmsKeyId"]  # the stage key encrypts answers and the volume alike
    bucket = _model_bucket(template)
    assert output["S3OutputPath"] == {"Fn::Join": ["", ["s3://", {"Ref": bucket}, f"/async/{NAME}/output/"]]}
    assert output["S3FailurePath"] == {"Fn::Join": ["", ["s3://", {"Ref": bucket}, f"/async/{NAME}/failure/"]]}


def test_the_topics_are_encrypted_with_the_stage_key_and_ssl_only(synthesized):
    _, _, template = synthesized
    topics = template.find_resources("AWS::SNS::Topic")
    assert len(topics) == 2
    key = resource_id(template, "AWS::KMS::Key")
    assert all(t["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [key, "Arn"]} for t in topics.values())
    policies = template.find_resources("AWS::SNS::TopicPolicy")
    denied = [s for p in policies.values() for s in p["Properties"]["PolicyDocument"]["Statement"]
              if s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}]
    assert len(denied) == 2


def test_the_queue_scales_on_backlog_per_instance_from_zero(synthesized):
    _, _, template = synthesized
    template.has_resource_properties("AWS::ApplicationAutoScaling::ScalableTarget",
                                     {"MinCapacity": 0, "MaxCapacity": 4})
    tracking = [p["Properties"] for p in template.find_resources("AWS::ApplicationAutoScaling::ScalingPolicy").values()
                if p["Properties"]["PolicyType"] == "TargetTrackingScaling"]
    # The backlog target only: no invocations policy (not published) and no GPU one (no data at zero instances).
    assert [t["TargetTrackingScalingPolicyConfiguration"]["CustomizedMetricSpecification"] for t in tracking] == [{
        "Dimensions": [{"Name": "EndpointName", "Value": NAME}], "MetricName": "ApproximateBacklogSizePerInstance",
        "Namespace": "AWS/SageMaker", "Statistic": "Average"}]
    assert tracking[0]["TargetTrackingScalingPolicyConfiguration"]["TargetValue"] == 3
    step = resource_id(template, "AWS::ApplicationAutoScaling::ScalingPolicy", {"PolicyType": "StepScaling"})
    template.has_resource_properties("AWS::ApplicationAutoScaling::ScalingPolicy", {
        "PolicyType": "StepScaling", "StepScalingPolicyConfiguration": {
            "AdjustmentType": "ChangeInCapacity", "StepAdjustments": [
                {"MetricIntervalLowerBound": 0, "ScalingAdjustment": 1}]}})
    # One minute of backlog without capacity adds the first instance (about two minutes with the metric's delay).
    template.has_resource_properties("AWS::CloudWatch::Alarm", {
        "MetricName": "HasBacklogWithoutCapacity", "Dimensions": [{"Name": "EndpointName", "Value": NAME}],
        "Period": 60, "EvaluationPeriods": 1, "Threshold": 1, "AlarmActions": [{"Ref": step}]})


def test_a_floor_above_zero_needs_no_step_from_zero():
    template = Template.from_stack(_endpoint(user_stack(), scaling=Scaling(min_instances=1, max_instances=2))
                                   .node.scope)  # type: ignore[arg-type]
    assert not template.find_resources("AWS::ApplicationAutoScaling::ScalingPolicy",
                                       {"Properties": {"PolicyType": "StepScaling"}})


def test_alarms_watch_failures_expiry_and_the_oldest_request(synthesized):
    _, _, template = synthesized
    alarms = {a["Properties"]["MetricName"]: a["Properties"]
              for a in template.find_resources("AWS::CloudWatch::Alarm").values() if "MetricName" in a["Properties"]}
    for name in ("InvocationFailures", "ExpiredRequests", "RequestDownloadFailures", "ResponseUploadFailures",
                 "NotificationFailures"):
        assert alarms[name]["Threshold"] == 1 and alarms[name]["Statistic"] == "Sum", name
    assert alarms["ApproximateAgeOfOldestRequest"]["Threshold"] == 600
    assert alarms["ApproximateAgeOfOldestRequest"]["Statistic"] == "Maximum"


def test_the_dashboard_draws_the_queue_not_invocations(synthesized):
    _, _, template = synthesized
    body = str(next(iter(template.find_resources("AWS::CloudWatch::Dashboard").values()))["Properties"]["DashboardBody"])
    for metric in ("ApproximateBacklogSize", "ApproximateAgeOfOldestRequest", "TotalProcessingTime",
                   "InvocationFailures"):
        assert metric in body
    assert '"Invocations"' not in body  # not published for asynchronous endpoints


def test_the_role_reads_inputs_and_writes_answers_under_its_own_prefixes_only(synthesized):
    _, endpoint, template = synthesized
    role = resource_id(template, "AWS::IAM::Role", {"Description": "Runs one Triton model on SageMaker (least privilege)"})
    granted = statements(template, role)
    by_action = {str(s["Action"]): s for s in granted}
    bucket = _model_bucket(template)
    reads = [s for s in granted if s["Action"] == "s3:GetObject"]
    assert {"Fn::Join": ["", [{"Fn::GetAtt": [bucket, "Arn"]}, f"/async/{NAME}/input/*"]]} in [s["Resource"] for s in reads]
    writes = by_action[str(["s3:PutObject", "s3:AbortMultipartUpload"])]["Resource"]
    assert [w["Fn::Join"][1][-1] for w in writes] == [f"/async/{NAME}/output/*", f"/async/{NAME}/failure/*"]
    published = by_action["sns:Publish"]["Resource"]
    topics = sorted(template.find_resources("AWS::SNS::Topic"))
    assert sorted(r["Ref"] for r in published) == topics


def test_grant_invoke_async_lets_a_caller_put_requests_invoke_and_read_answers(synthesized):
    stack, endpoint, template = synthesized
    caller = stack.node.find_child("Caller")
    caller_role = stack.get_logical_id(caller.role.node.default_child)
    granted = {str(s["Action"]): s["Resource"] for s in statements(template, caller_role)}
    assert "sagemaker:InvokeEndpointAsync" in granted
    assert granted["s3:PutObject"]["Fn::Join"][1][-1] == f"/async/{NAME}/input/*"
    assert [r["Fn::Join"][1][-1] for r in granted["s3:GetObject"]] == [f"/async/{NAME}/output/*",
                                                                        f"/async/{NAME}/failure/*"]
    assert "sagemaker:InvokeEndpoint" not in granted  # the real-time call is not what was granted


def test_cdk_nag_finds_nothing_under_the_construct_nor_on_the_granted_caller(synthesized):
    stack, _, _ = synthesized
    violations = [str(v) for v in AwsSolutionsChecks().validate_scope(stack).violations]
    assert [v for v in violations if "/Photos/" in v] == []
    # The caller's own function has findings of its own (its managed basic-execution policy); none is about what
    # grant_invoke_async added.
    assert [v for v in violations if "/Caller/" in v and "async" in v] == []
    assert [v for v in violations if "/Caller/" in v], "the check looked at the caller (its own findings remain)"


def test_a_payload_over_64_mb_becomes_tritons_input_size_argument():
    stack = user_stack()
    _endpoint(stack, asynchronous=Asynchronous(max_payload_mb=200), triton_version="26.05")
    model = next(iter(Template.from_stack(stack).find_resources("AWS::SageMaker::Model").values()))
    environment = model["Properties"]["PrimaryContainer"]["Environment"]
    assert environment["SAGEMAKER_TRITON_ADDITIONAL_ARGS"] == "--http-max-input-size=209715200"


def test_your_own_locations_and_topics_are_used_as_given():
    stack = user_stack()
    _endpoint(stack, asynchronous=Asynchronous(
        output_path="s3://team-results/photos/out", failure_path="s3://team-results/photos/failed",
        success_topic_arn="arn:aws:sns:us-east-1:111122223333:photos-done",
        error_topic_arn="arn:aws:sns:us-east-1:111122223333:photos-failed"))
    template = Template.from_stack(stack)
    assert not template.find_resources("AWS::SNS::Topic")
    output = next(iter(template.find_resources("AWS::SageMaker::EndpointConfig").values()))[
        "Properties"]["AsyncInferenceConfig"]["OutputConfig"]
    assert (output["S3OutputPath"], output["S3FailurePath"]) == ("s3://team-results/photos/out",
                                                                 "s3://team-results/photos/failed")
    assert output["NotificationConfig"] == {"SuccessTopic": "arn:aws:sns:us-east-1:111122223333:photos-done",
                                            "ErrorTopic": "arn:aws:sns:us-east-1:111122223333:photos-failed"}


# --- what SageMaker refuses beside Asynchronous Inference, refused at synth ----------------------------------

def _refused(**props) -> str:
    with pytest.raises(PropsError) as caught:
        _endpoint(user_stack(), **props)
    return str(caught.value)


def test_async_on_a_multi_model_endpoint_is_refused():
    assert _refused(multi_model=True, scaling=None) == (
        "TritonSageMakerEndpoint UserApp/Photos: 1 problem\n"
        "  - asynchronous: got an asynchronous block on kind: multi-model; allowed: single-model endpoints "
        "only (Asynchronous Inference serves one model on one variant: no multi-model endpoints, no inference "
        "components); fix: make the endpoint kind: single-model, or remove asynchronous")


def test_async_with_data_capture_is_refused():
    assert _refused(data_capture=DataCapture()) == (
        "TritonSageMakerEndpoint UserApp/Photos: 1 problem\n"
        "  - data_capture: got a data capture setting; allowed: no data capture on an asynchronous endpoint "
        "(SageMaker captures real-time requests only); fix: remove data_capture: the requests and the answers are "
        "in S3 already")


def test_async_with_invocation_based_scaling_is_refused():
    assert _refused(scaling=Scaling(min_instances=0, max_instances=4, max_rps_per_instance=20)) == (
        "TritonSageMakerEndpoint UserApp/Photos: 1 problem\n"
        "  - scaling.max_rps_per_instance: got 20; allowed: no invocation or concurrency target on an asynchronous "
        "endpoint: SageMaker publishes neither for it; fix: remove it; asynchronous.backlog_per_instance sets the "
        "queue's target")
    assert _refused(scaling=Scaling(min_instances=1, max_instances=4, load_metric=LoadMetric.CONCURRENCY)) == (
        "TritonSageMakerEndpoint UserApp/Photos: 1 problem\n"
        "  - scaling.load_metric: got concurrency; allowed: invocations (the default) on an asynchronous endpoint, "
        "whose load policy tracks the queue; fix: remove load_metric; asynchronous.backlog_per_instance sets the "
        "queue's target")


def test_concurrency_out_of_range_is_refused_when_built():
    with pytest.raises(PropsError) as caught:
        Asynchronous(max_concurrent_invocations_per_instance=1001)
    assert str(caught.value) == (
        "Asynchronous: 1 problem\n  - max_concurrent_invocations_per_instance: got 1001; allowed: an integer from 1 "
        "to 1000; fix: set it within 1..1000")


def test_a_payload_over_64_mb_before_26_03_is_refused():
    assert _refused(asynchronous=Asynchronous(max_payload_mb=100), triton_version="25.09") == (
        "TritonSageMakerEndpoint UserApp/Photos: 1 problem\n"
        "  - asynchronous.max_payload_mb: got 100; allowed: at most 64 on Triton 25.09 (its SageMaker front end "
        "honours --http-max-input-size from 26.03 on); fix: set triton_version to 26.03 or later, or send payloads "
        "of at most 64 MB")


def test_zero_instances_without_async_is_still_refused():
    assert "scaling.min_instances: got 0; allowed: 1 or more on a real-time variant endpoint" in _refused(
        asynchronous=None)


def test_grant_invoke_async_on_a_real_time_endpoint_says_what_to_use():
    endpoint = _endpoint(user_stack(), asynchronous=None, scaling=None)
    with pytest.raises(PropsError) as caught:
        endpoint.grant_invoke_async(iam.Role(endpoint, "Caller", assumed_by=iam.AccountRootPrincipal()))
    assert str(caught.value) == (
        "TritonSageMakerEndpoint UserApp/Photos: grant_invoke_async: 1 problem\n"
        "  - asynchronous: got nothing (a real-time endpoint); allowed: an asynchronous endpoint; fix: use "
        "grant_invoke for a real-time endpoint, or set asynchronous=Asynchronous(...)")


def test_the_app_takes_the_backlog_target_from_the_recorded_drain_rate(tmp_path):
    # The example sets backlog_per_instance; without it a recorded drain rate decides, and synth says where the
    # number came from.
    raw = yaml.safe_load(EXAMPLE.read_text())
    del raw["endpoints"]["photos"]["asynchronous"]["backlog_per_instance"]
    spec_path = tmp_path / "async.yaml"
    spec_path.write_text(yaml.safe_dump(raw))
    drain = Drain(drain_rps_per_instance=0.5, concurrency=4, requests=100, measured_on="ml.g5.xlarge",
                  command="tritonsm bench drain --endpoint photos --record")
    synth = synth_spec(spec_path, tmp_path, drains={"photos": drain})
    template = synth.template("dev", "photos")
    # 0.5 answers/s x the 900 s SLA x the safety factor 0.5
    template.has_resource_properties("AWS::ApplicationAutoScaling::ScalingPolicy", {
        "TargetTrackingScalingPolicyConfiguration": Match.object_like({"TargetValue": 225})})
    warnings = Annotations.from_stack(synth.stack("dev", "photos")).find_warning(
        "*", Match.string_like_regexp("backlog target 225 requests per instance comes from capacity.json: drain 0.5 "
                                      "requests/s per instance at concurrency 4 measured on ml.g5.xlarge"))
    assert len(warnings) == 1


def test_the_stack_s_example_call_goes_through_s3_without_importing_in_an_output(tmp_path):
    # InvokeEndpoint is refused on an asynchronous endpoint, so the example command puts the request under the input
    # prefix of the bucket the storage stack's output names (looked up when it runs: an output holding an
    # ImportValue is cfn-lint's W6001), then calls invoke-endpoint-async.
    outputs = synth_spec(EXAMPLE, tmp_path).template("dev", "photos").to_json()["Outputs"]
    assert "Fn::ImportValue" not in str(outputs)
    command = outputs["InvokeCommand"]["Value"]
    assert command == (
        "bucket=$(aws cloudformation describe-stacks --region eu-west-1 --stack-name PhotoLabels-dev-Storage --query "
        "\"Stacks[0].Outputs[?OutputKey=='BucketName'].OutputValue\" --output text) && aws s3 cp request.json "
        "s3://$bucket/async/photos/input/request.json && aws sagemaker-runtime invoke-endpoint-async --region "
        "eu-west-1 --endpoint-name PhotoLabels-dev-photos --content-type application/json --input-location "
        "s3://$bucket/async/photos/input/request.json")
