"""Both public constructs with the network, key, bucket and callers in other stacks of one app: no dependency
cycle, and the library's own cdk-nag acknowledgements hold whatever stack the bucket comes from."""
import json
import pathlib

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam, aws_kms as kms, aws_s3 as s3
from cdk_nag import AwsSolutionsChecks

from user_app import model_archive
from triton_constructs import (ModelArchive, ModelRepositories, Scaling, TritonComponentsEndpoint,
                               TritonSageMakerEndpoint)

ENV = cdk.Environment(account="111122223333", region="us-east-1")


def _app(tmp_path: pathlib.Path, plant_unacknowledged: bool = False) -> cdk.App:
    app = cdk.App(outdir=str(tmp_path / "cdk.out"))
    platform = cdk.Stack(app, "Platform", env=ENV)
    key = kms.Key(platform, "Key", enable_key_rotation=True)
    logs = s3.Bucket(platform, "Logs", enforce_ssl=True, block_public_access=s3.BlockPublicAccess.BLOCK_ALL)
    cdk.Validations.of(logs).acknowledge(cdk.Acknowledgment(id="AwsSolutions-S1", reason="the access-log bucket"))
    bucket = s3.Bucket(platform, "Models", encryption_key=key, enforce_ssl=True, versioned=True,
                       server_access_logs_bucket=logs, block_public_access=s3.BlockPublicAccess.BLOCK_ALL)
    # A role of the platform stack, which the inference stack depends on (bucket, key): a grant by the
    # endpoint's Ref would make the platform depend on the inference stack too.
    operator = iam.Role(platform, "Operator", assumed_by=iam.AccountRootPrincipal())
    inference = cdk.Stack(app, "Inference", env=ENV)
    models = ModelRepositories.from_archives([ModelArchive.from_file(model_archive(tmp_path, "resnet50"))])
    single = TritonSageMakerEndpoint(inference, "Single", models=models, instance_type="ml.g5.xlarge", bucket=bucket,
                                     encryption_key=key, scaling=Scaling(max_instances=2))
    shared = TritonComponentsEndpoint(inference, "Shared", models=models, instance_type="ml.g5.12xlarge",
                                      bucket=bucket, encryption_key=key, storage_name="shared")
    callers = cdk.Stack(app, "Callers", env=ENV)
    caller = iam.Role(callers, "Caller", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    for endpoint in (single, shared):
        endpoint.grant_invoke(caller)
        endpoint.grant_invoke(operator)
    if plant_unacknowledged:
        operator.add_to_policy(iam.PolicyStatement(actions=["s3:GetObject"], resources=[bucket.arn_for_objects("*")]))
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app


def test_stacks_synthesize_without_a_cycle_and_cdk_nag_finds_nothing(tmp_path):
    assembly = _app(tmp_path).synth()
    names = sorted(stack.stack_name for stack in assembly.stacks)
    assert names == ["Callers", "Inference", "Platform"]
    inference = json.dumps(assembly.get_stack_by_name("Inference").template)
    platform = json.dumps(assembly.get_stack_by_name("Platform").template)
    # The bucket comes from the platform stack; the grants in the platform stack name the endpoints' ARNs.
    assert "Fn::ImportValue" in inference and "Fn::ImportValue" not in platform
    assert "sagemaker:InvokeEndpoint" in platform and platform.count(":endpoint/") == 2


def test_the_twin_an_unacknowledged_wildcard_on_the_foreign_bucket_is_reported(tmp_path):
    with pytest.raises(RuntimeError) as caught:
        _app(tmp_path, plant_unacknowledged=True).synth()
    # The planted finding, and only it: the library's own findings on the same bucket stay acknowledged.
    assert str(caught.value).count("ERROR") == 1, str(caught.value)
    assert "Platform/Operator/DefaultPolicy/Resource" in str(caught.value)
    assert "AwsSolutions-IAM5[Resource::<ModelsC55D3500.Arn>/*]" in str(caught.value)
