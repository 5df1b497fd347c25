"""The public construct, TritonSageMakerEndpoint, as a user's own CDK app uses it (no spec, no YAML)."""
import pathlib

import aws_cdk as cdk
import pytest
from aws_cdk import aws_cloudwatch as cloudwatch, aws_ec2 as ec2, aws_iam as iam, aws_kms as kms, aws_lambda as lambda_, aws_s3 as s3
from aws_cdk.assertions import Match, Template
from cdk_nag import AwsSolutionsChecks

from synth_helpers import resource_id, statements
from user_app import model_archive, user_stack
from triton_constructs import (Alarms, Deployment, ModelArchive, ModelRepositories, NetworkProps, PropsError,
                               Scaling, Strategy, SynthError, TritonSageMakerEndpoint)

S3_ARCHIVE = "s3://my-models/classifier/classifier-0123456789ab.tar.gz"




def _s3_models(*urls: str) -> ModelRepositories:
    return ModelRepositories.from_archives([ModelArchive.from_s3(u, [u.rsplit("/", 1)[-1].split("-")[0]])
                                            for u in urls or (S3_ARCHIVE,)])


# --- props refuse what the spec refuses, with the spec's words -------------------------------------------

def test_an_out_of_bounds_deployment_is_refused_when_built():
    with pytest.raises(PropsError) as caught:
        TritonSageMakerEndpoint(user_stack(), "Endpoint", models=_s3_models(), instance_type="ml.g5.xlarge",
                                deployment=Deployment(canary_percent=90, wait_s=-3))
    assert str(caught.value) == (
        "Deployment: 2 problems\n"
        "  - canary_percent: got 90; allowed: an integer from 1 to 50; fix: set it within 1..50\n"
        "  - wait_s: got -3; allowed: an integer from 0 to 3600; fix: set it within 0..3600")


def test_an_out_of_bounds_latency_sla_is_refused_when_built():
    with pytest.raises(PropsError) as caught:
        TritonSageMakerEndpoint(user_stack(), "Endpoint", models=_s3_models(), instance_type="ml.g5.xlarge",
                                alarms=Alarms(latency_sla_ms=-5))
    assert str(caught.value) == ("Alarms: 1 problem\n"
                                 "  - latency_sla_ms: got -5; allowed: a number >= 0.001; fix: set it within 0.001..any")


def test_an_out_of_bounds_safety_factor_is_refused_when_built():
    with pytest.raises(PropsError) as caught:
        TritonSageMakerEndpoint(user_stack(), "Endpoint", models=_s3_models(), instance_type="ml.g5.xlarge",
                                scaling=Scaling(safety_factor=40))
    assert str(caught.value) == ("Scaling: 1 problem\n"
                                 "  - safety_factor: got 40; allowed: a number from 0.05 to 1; fix: set it within 0.05..1")


def test_cross_field_scaling_rules_run_on_construction_too():
    with pytest.raises(PropsError) as caught:
        Scaling(min_instances=3, max_instances=2, max_rps_per_instance=10, invocations_target=600)
    # The first cross-field rule that fails; the YAML loader reports it under endpoints.<name>.scaling.
    assert str(caught.value) == ("Scaling: 1 problem\n  - max_instances: got 2; allowed: an integer >= "
                                 "min_instances (3); fix: raise max_instances or lower min_instances")


def test_every_sagemaker_rule_is_reported_at_once_with_the_spec_s_words():
    with pytest.raises(PropsError) as caught:
        TritonSageMakerEndpoint(
            user_stack(), "Endpoint", models=_s3_models(), instance_type="ml.g5.xlarge", initial_instances=1,
            scaling=Scaling(min_instances=2, max_instances=3), volume_size_gb=100, startup_timeout_s=30,
            deployment=Deployment(strategy=Strategy.LINEAR, linear_step_percent=10, max_execution_timeout_s=1800))
    # deployment_spec.rules.sagemaker, as the YAML spec reports them under endpoints.<name>.
    assert str(caught.value) == (
        "TritonSageMakerEndpoint UserApp/Endpoint: 4 problems\n"
        "  - startup_timeout_s: got 30; allowed: an integer from 60 to 3600; fix: set it within 60..3600\n"
        "  - volume_size_gb: got 100; allowed: nothing on ml.g5.xlarge: it has local NVMe storage; fix: remove "
        "volume_size_gb\n"
        "  - initial_instances: got 1; allowed: an integer within scaling.min_instances..scaling.max_instances "
        "(2..3); fix: move initial_instances into that range or widen the range\n"
        "  - deployment.max_execution_timeout_s: got 1800; allowed: at least 3750 s: new fleet start "
        "(download_timeout_s 600 + startup_timeout_s 30) + 10 step(s) x wait_s 300 + termination_wait_s 120; fix: "
        "raise it, or leave it out to have it computed")


def test_a_burstable_type_with_scaling_and_a_canary_on_one_instance():
    with pytest.raises(PropsError) as caught:
        TritonSageMakerEndpoint(user_stack(), "Endpoint", models=_s3_models(), instance_type="ml.t2.medium",
                                scaling=Scaling(), deployment=Deployment(strategy=Strategy.CANARY))
    assert str(caught.value) == (
        "TritonSageMakerEndpoint UserApp/Endpoint: 2 problems\n"
        "  - scaling: got auto-scaling on ml.t2.medium; allowed: no auto-scaling on burstable ml.t* types; fix: "
        "remove scaling or use a non-burstable type such as ml.c5.xlarge\n"
        "  - deployment.strategy: got canary; allowed: all_at_once or auto for a variant that can have 1 instance: "
        "a canary or linear step must be at most 50 % of the variant's instances; fix: use strategy all_at_once "
        "(blue/green with the bake time and auto-rollback) or auto, or give the endpoint 2+ instances "
        "(initial_instances, scaling.min_instances)")


def test_multi_model_rules_on_the_archives():
    models = _s3_models("s3://my-models/a/resnet50-0123456789ab.tar.gz", "s3://other/b/bert-0123456789ab.tar.gz")
    with pytest.raises(PropsError) as caught:
        TritonSageMakerEndpoint(user_stack(), "Endpoint", models=models, instance_type="ml.g6.xlarge", multi_model=True)
    assert str(caught.value) == (
        "TritonSageMakerEndpoint UserApp/Endpoint: 2 problems\n"
        "  - instance_type: got 'ml.g6.xlarge'; allowed: a CPU type or a GPU family SageMaker lists for "
        "multi-model endpoints (p2, p3, g4dn, g5); fix: pick an ml.g5 or ml.g4dn size, or make the endpoint single-model\n"
        "  - models: got archives under different S3 prefixes; allowed: one prefix for a multi-model endpoint (its "
        "ModelDataUrl), or local files (copied under one prefix); fix: upload the archives under one prefix, or "
        "give them all as local files")


def test_a_single_model_endpoint_serves_one_archive(tmp_path):
    models = ModelRepositories.from_archives([ModelArchive.from_file(model_archive(tmp_path, "a"), ["a"]),
                                              ModelArchive.from_file(model_archive(tmp_path, "b"), ["b"])])
    with pytest.raises(PropsError) as caught:
        TritonSageMakerEndpoint(user_stack(), "Endpoint", models=models, instance_type="ml.g5.xlarge")
    assert str(caught.value) == (
        "TritonSageMakerEndpoint UserApp/Endpoint: 1 problem\n  - models: got 2 archives; allowed: exactly one on a "
        "single-model endpoint (SageMaker unpacks one ModelDataUrl into /opt/ml/model); fix: pack the models into "
        "one archive, or use a multi-model endpoint")


def test_network_isolation_off_needs_a_reason():
    with pytest.raises(PropsError) as caught:
        NetworkProps(isolation=False)
    assert str(caught.value) == (
        "NetworkProps: 1 problem\n  - isolation: got false; allowed: false only with isolation_opt_out_reason (why "
        "the container needs the network); fix: add isolation_opt_out_reason, e.g. 'model.py reads a feature store "
        "over HTTPS', or remove isolation: false (network isolation is on by default)")


def test_one_subnet_is_refused():
    stack = user_stack()
    subnet = ec2.Subnet.from_subnet_attributes(stack, "Subnet", subnet_id="subnet-1", availability_zone="us-east-1a")
    group = ec2.SecurityGroup.from_security_group_id(stack, "Group", "sg-1")
    with pytest.raises(PropsError) as caught:
        TritonSageMakerEndpoint(stack, "Endpoint", models=_s3_models(), instance_type="ml.g5.xlarge",
                                network=NetworkProps(subnets=ec2.SubnetSelection(subnets=[subnet]),
                                                     security_groups=[group]))
    assert str(caught.value) == (
        "TritonSageMakerEndpoint UserApp/Endpoint: 1 problem\n  - network.subnets: got 1 subnet; allowed: 2 to 16 "
        "subnets in different availability zones; fix: add a subnet in another zone")


def test_archive_mistakes_name_the_file_and_the_fix(tmp_path):
    with pytest.raises(PropsError) as caught:
        ModelArchive.from_file(tmp_path / "model.zip", ["my model"])
    assert str(caught.value) == (
        "ModelArchive: 2 problems\n"
        "  - models[0]: got 'my model'; allowed: 1-63 letters, digits, '-' or '_', starting with a letter or digit; fix: "
        "use the model directory's name\n"
        f"  - path: got '{tmp_path / 'model.zip'}'; allowed: an existing .tar.gz file (a Triton model repository: "
        "one directory per model at its root); fix: pack it with `tar -czf NAME.tar.gz -C REPOSITORY MODEL...`, or "
        "run `tritonsm build`")
    with pytest.raises(PropsError) as caught:
        ModelArchive.from_s3("https://my-models.s3.amazonaws.com/m.tar.gz", ["m"])
    assert str(caught.value) == (
        "ModelArchive: 1 problem\n  - s3_url: got 'https://my-models.s3.amazonaws.com/m.tar.gz'; allowed: "
        "s3://<bucket>/<key>.tar.gz; fix: give the object's URL, e.g. s3://my-models/resnet50/resnet50-v3.tar.gz")


def test_a_model_the_manifest_does_not_hold(default_synth):
    with pytest.raises(SynthError) as caught:
        ModelRepositories.from_manifest(default_synth.manifest_path, ["resnet"])
    assert str(caught.value) == (
        f"ModelRepositories.from_manifest:\n  - {default_synth.manifest_path} serves no archive for 'resnet'; it has "
        "archives for: bert, resnet50, text-classifier; add the model to the spec and run `tritonsm build`, or name "
        "one of those")


# --- what it builds ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def own_bucket(module_tmp):
    """A user's stack with their own bucket and key; an MME from two local archives; guarded; a function to grant."""
    tmp = module_tmp.mktemp("own")
    stack = user_stack()
    key = kms.Key(stack, "TeamKey", enable_key_rotation=True)
    bucket = s3.Bucket(stack, "TeamBucket", encryption_key=key, enforce_ssl=True)
    models = ModelRepositories.from_archives([ModelArchive.from_file(model_archive(tmp, "resnet50"), ["resnet50"]),
                                              ModelArchive.from_file(model_archive(tmp, "bert"), ["bert"])])
    endpoint = TritonSageMakerEndpoint(stack, "Vision", models=models, instance_type="ml.g5.xlarge",
                                       multi_model=True, bucket=bucket, encryption_key=key, initial_instances=2,
                                       scaling=Scaling(min_instances=2, max_instances=4, max_rps_per_instance=20),
                                       deployment=Deployment())
    function = lambda_.Function(stack, "Caller", runtime=lambda_.Runtime.PYTHON_3_12, handler="index.handler",
                                code=lambda_.Code.from_inline("def handler(event, context):\n    return {}\n"))
    endpoint.grant_invoke(function)
    return stack, endpoint, Template.from_stack(stack)


def test_your_bucket_and_key_hold_the_models(own_bucket):
    stack, endpoint, template = own_bucket
    # No bucket or key of its own: the archives are copied into yours, under models/<endpoint name>/.
    template.resource_count_is("AWS::S3::Bucket", 1)
    template.resource_count_is("AWS::KMS::Key", 1)
    bucket_id = resource_id(template, "AWS::S3::Bucket")
    copies = template.find_resources("Custom::TritonModelArtifact")
    assert sorted(c["Properties"]["DestinationKey"] for c in copies.values()) == sorted(
        f"models/{endpoint.endpoint_name}/{a.object_name}" for a in endpoint.models.archives)
    assert all(c["Properties"]["DestinationBucket"] == {"Ref": bucket_id} for c in copies.values())
    # The multi-model endpoint reads the whole prefix.
    template.has_resource_properties("AWS::SageMaker::Model", {"PrimaryContainer": Match.object_like({
        "Mode": "MultiModel",
        "ModelDataUrl": {"Fn::Join": ["", ["s3://", {"Ref": bucket_id}, f"/models/{endpoint.endpoint_name}/"]]}})})


def test_your_key_lets_cloudwatch_logs_encrypt_this_endpoint_s_log_groups_only(own_bucket):
    stack, endpoint, template = own_bucket
    key = next(iter(template.find_resources("AWS::KMS::Key").values()))
    [logs] = [s for s in key["Properties"]["KeyPolicy"]["Statement"] if "Service" in str(s.get("Principal"))]
    groups = logs["Condition"]["ArnLike"]["kms:EncryptionContext:aws:logs:arn"]
    assert [g["Fn::Join"][1][-1] for g in groups] == [
        ":log-group:UserApp-*", f":log-group:/aws/sagemaker/Endpoints/{endpoint.endpoint_name}"]


def test_grant_invoke_allows_invoking_this_endpoint_only(own_bucket):
    stack, endpoint, template = own_bucket
    role_id = resource_id(template, "AWS::IAM::Role", {"AssumeRolePolicyDocument": Match.object_like({
        "Statement": [Match.object_like({"Principal": {"Service": "lambda.amazonaws.com"}})]}),
        "ManagedPolicyArns": Match.any_value()})
    [grant] = [s for s in statements(template, role_id) if s["Action"] == "sagemaker:InvokeEndpoint"]
    assert grant["Resource"] == {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":sagemaker:us-east-1:111122223333:"
                                                   f"endpoint/{endpoint.endpoint_name.lower()}"]]}


def test_metrics_carry_the_endpoint_and_variant(own_bucket):
    stack, endpoint, _ = own_bucket
    p99 = cloudwatch.MetricOptions(statistic="p99", period=cdk.Duration.minutes(5), label="p99 latency")
    for metric in (endpoint.metric_invocations(), endpoint.metric_model_latency(p99), endpoint.metric_errors(),
                   endpoint.metric_gpu_utilization(), endpoint.metric_gpu_memory_utilization()):
        assert metric.dimensions == {"EndpointName": endpoint.endpoint_name, "VariantName": "AllTraffic"}
    latency = endpoint.metric_model_latency(p99)
    assert (latency.statistic, latency.period.to_minutes(), latency.label, endpoint.metric_gpu_utilization().namespace
            ) == ("p99", 5, "p99 latency", "/aws/sagemaker/Endpoints")


def test_guarded_updates_roll_back_on_the_latency_and_error_alarms(own_bucket):
    _, _, template = own_bucket
    template.has_resource_properties("AWS::SageMaker::Endpoint", {"DeploymentConfig": Match.object_like({
        "AutoRollbackConfiguration": {"Alarms": [Match.any_value(), Match.any_value()]},
        "BlueGreenUpdatePolicy": Match.object_like({"TrafficRoutingConfiguration": Match.object_like({
            "Type": "CANARY"})})})})


def test_cdk_nag_passes_on_the_user_s_stack(own_bucket):
    stack, _, _ = own_bucket
    result = AwsSolutionsChecks().validate_scope(stack)
    # Findings on the user's own resources (their bucket without access logs, their function) are theirs;
    # nothing under the construct.
    assert sorted({v.rule_name for v in result.violations if "/Vision/" in str(v)}) == []


def test_with_nothing_given_it_creates_a_secure_bucket_and_key(tmp_path):
    stack = user_stack()
    models = ModelRepositories.from_archives([ModelArchive.from_file(model_archive(tmp_path), ["resnet50"])])
    endpoint = TritonSageMakerEndpoint(stack, "Endpoint", models=models, instance_type="ml.g5.xlarge")
    template = Template.from_stack(stack)
    # The model bucket (KMS, versioned) and its access-log bucket, one key; the archive copied under its name.
    template.resource_count_is("AWS::S3::Bucket", 2)
    template.resource_count_is("AWS::KMS::Key", 1)
    template.has_resource_properties("AWS::S3::Bucket", {"VersioningConfiguration": {"Status": "Enabled"},
                                                         "BucketEncryption": Match.object_like({
        "ServerSideEncryptionConfiguration": [Match.object_like({"ServerSideEncryptionByDefault": Match.object_like({
            "SSEAlgorithm": "aws:kms"})})]})})
    assert endpoint.bucket is not None and endpoint.key is not None
    result = AwsSolutionsChecks().validate_scope(stack)
    assert result.success, sorted(v.rule_name for v in result.violations)


def test_archives_already_in_s3_are_read_in_place():
    stack = user_stack()
    endpoint = TritonSageMakerEndpoint(stack, "Endpoint", models=_s3_models(), instance_type="ml.g5.xlarge")
    template = Template.from_stack(stack)
    # Nothing copied, no bucket created: the model reads your object, and the role only its prefix.
    template.resource_count_is("Custom::TritonModelArtifact", 0)
    template.resource_count_is("AWS::S3::Bucket", 0)
    template.has_resource_properties("AWS::SageMaker::Model", {"PrimaryContainer": Match.object_like({
        "ModelDataUrl": S3_ARCHIVE, "Mode": "SingleModel"})})
    role_id = resource_id(template, "AWS::IAM::Role", {"AssumeRolePolicyDocument": Match.object_like({
        "Statement": [Match.object_like({"Principal": {"Service": "sagemaker.amazonaws.com"}})]})})
    [read] = [s for s in statements(template, role_id) if s["Action"] == "s3:GetObject"]
    assert read["Resource"]["Fn::Join"][1][-1] == ":s3:::my-models/classifier/*"
    assert endpoint.bucket is None


def test_in_your_vpc_with_a_security_group_of_its_own():
    stack = user_stack()
    vpc = ec2.Vpc(stack, "Vpc", max_azs=2, nat_gateways=0, subnet_configuration=[ec2.SubnetConfiguration(
        name="models", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)])
    TritonSageMakerEndpoint(stack, "Endpoint", models=_s3_models(), instance_type="ml.g5.xlarge",
                            network=NetworkProps(vpc=vpc))
    template = Template.from_stack(stack)
    # The model's group (the library's functions, in the VPC by default, have one of their own).
    [group_id] = [lid for lid, group in template.find_resources("AWS::EC2::SecurityGroup").items()
                  if group["Properties"]["GroupDescription"].startswith("Triton endpoint ")
                  and "Lambda" not in group["Properties"]["GroupDescription"]]
    # The VPC's two isolated subnets and a group that admits nothing; isolation stays on.
    template.has_resource_properties("AWS::SageMaker::Model", {
        "VpcConfig": {"SecurityGroupIds": [{"Fn::GetAtt": [group_id, "GroupId"]}],
                      "Subnets": [Match.any_value(), Match.any_value()]},
        "EnableNetworkIsolation": True})
    template.has_resource_properties("AWS::EC2::SecurityGroup", {"SecurityGroupIngress": Match.absent()})
