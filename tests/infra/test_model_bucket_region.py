"""The model bucket must be in the endpoint's region (SageMaker's ContainerDefinition.ModelDataUrl): a bucket of
another region is refused at construct time; where a region is a token, a synth warning says it was not checked."""
import pathlib

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Annotations, Match

from user_app import model_archive
from deployment_spec.parsing.errors import PropsError
from triton_constructs import ModelArchive, ModelRepositories, TritonSageMakerEndpoint

ACCOUNT = "111122223333"
ALLOWED = ("allowed: a bucket in the endpoint's region us-east-1 (SageMaker's ContainerDefinition.ModelDataUrl: the "
           "model artifacts must be in the same region as the model); fix: give a bucket of us-east-1, or leave "
           "bucket out: the endpoint then makes its own")


def _stack(app: cdk.App, id_: str, region: str | None) -> cdk.Stack:
    env = cdk.Environment(account=ACCOUNT, region=region) if region else None
    return cdk.Stack(app, id_, env=env, cross_region_references=region is not None)


def _endpoint(stack: cdk.Stack, tmp_path: pathlib.Path, bucket: s3.IBucket) -> TritonSageMakerEndpoint:
    models = ModelRepositories.from_archives([ModelArchive.from_file(model_archive(tmp_path, "resnet50"))])
    return TritonSageMakerEndpoint(stack, "Endpoint", models=models, instance_type="ml.g5.xlarge", bucket=bucket)


def _warnings(stack: cdk.Stack) -> list[str]:
    return [w.entry.data for w in Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp(
        "bucketRegionUnknown"))]


def test_a_bucket_of_a_stack_in_another_region_is_refused(tmp_path):
    app = cdk.App()
    bucket = s3.Bucket(_stack(app, "Platform", "eu-west-1"), "Models")
    with pytest.raises(PropsError) as caught:
        _endpoint(_stack(app, "Inference", "us-east-1"), tmp_path, bucket)
    assert str(caught.value) == (
        "TritonSageMakerEndpoint Inference/Endpoint: 1 problem\n"
        f"  - bucket: got a bucket in eu-west-1 (stack Platform); {ALLOWED}")


def test_a_bucket_of_a_stack_in_the_same_region_is_fine(tmp_path):
    app = cdk.App()
    bucket = s3.Bucket(_stack(app, "Platform", "us-east-1"), "Models")
    inference = _stack(app, "Inference", "us-east-1")
    endpoint = _endpoint(inference, tmp_path, bucket)
    assert endpoint.bucket is bucket
    assert _warnings(inference) == []


def test_an_imported_bucket_of_another_region_is_refused(tmp_path):
    app = cdk.App()
    inference = _stack(app, "Inference", "us-east-1")
    bucket = s3.Bucket.from_bucket_attributes(inference, "Models", bucket_name="team-models", region="eu-west-1")
    with pytest.raises(PropsError) as caught:
        _endpoint(inference, tmp_path, bucket)
    assert str(caught.value) == (
        "TritonSageMakerEndpoint Inference/Endpoint: 1 problem\n"
        f"  - bucket: got a bucket in eu-west-1 (imported); {ALLOWED}")


def test_an_imported_bucket_without_a_region_is_taken_as_the_stacks(tmp_path):
    # CDK gives it the stack's region, known or not: the spec app imports its storage stack's bucket so.
    app = cdk.App()
    for id_, region in (("Known", "us-east-1"), ("Agnostic", None)):
        stack = _stack(app, id_, region)
        _endpoint(stack, tmp_path, s3.Bucket.from_bucket_name(stack, "Models", "team-models"))
        assert _warnings(stack) == []


def test_env_agnostic_stacks_get_a_warning_not_a_refusal(tmp_path):
    app = cdk.App()
    bucket = s3.Bucket(_stack(app, "Platform", None), "Models")
    inference = _stack(app, "Inference", None)
    _endpoint(inference, tmp_path, bucket)
    assert _warnings(inference) == [
        "the model bucket's region could not be checked against the endpoint's: the endpoint's stack Inference has "
        "no region (env-agnostic) and the bucket (stack Platform) has no region (its stack is env-agnostic). "
        "SageMaker needs the model artifacts in the endpoint's region (ContainerDefinition.ModelDataUrl); give the "
        "stacks an env with a region (and an imported bucket its region=) to have it checked at synth "
        "[ack: tritonsm:bucketRegionUnknown]"]


def test_an_env_agnostic_endpoint_with_a_bucket_of_a_known_region_gets_a_warning(tmp_path):
    app = cdk.App()
    inference = _stack(app, "Inference", None)
    bucket = s3.Bucket.from_bucket_attributes(inference, "Models", bucket_name="team-models", region="eu-west-1")
    _endpoint(inference, tmp_path, bucket)
    assert _warnings(inference) == [
        "the model bucket's region could not be checked against the endpoint's: the endpoint's stack Inference has "
        "no region (env-agnostic). SageMaker needs the model artifacts in the endpoint's region "
        "(ContainerDefinition.ModelDataUrl); give the stacks an env with a region (and an imported bucket its "
        "region=) to have it checked at synth [ack: tritonsm:bucketRegionUnknown]"]


def test_no_bucket_nothing_to_check(tmp_path):
    app = cdk.App()
    inference = _stack(app, "Inference", None)
    models = ModelRepositories.from_archives([ModelArchive.from_file(model_archive(tmp_path, "resnet50"))])
    TritonSageMakerEndpoint(inference, "Endpoint", models=models, instance_type="ml.g5.xlarge")
    assert _warnings(inference) == []
