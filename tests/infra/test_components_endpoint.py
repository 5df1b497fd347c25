"""The public inference-components construct, TritonComponentsEndpoint, as a user's own CDK app uses it."""
import pathlib

import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Match, Template
from cdk_nag import AwsSolutionsChecks

from user_app import model_archive, user_stack
from triton_constructs import (ComponentSpec, CopyScaling, ManagedInstances, ModelArchive, ModelRepositories,
                               PropsError, Reservation, TritonComponentsEndpoint)

COMPONENT = "AWS::SageMaker::InferenceComponent"


def _models(tmp_path: pathlib.Path) -> ModelRepositories:
    """ResNet-50 alone, and an ensemble archive led by the ensemble with its two steps."""
    return ModelRepositories.from_archives([
        ModelArchive.from_file(model_archive(tmp_path, "resnet50"), ["resnet50"]),
        ModelArchive.from_file(model_archive(tmp_path, "text-classifier", ["text-classifier", "preprocess", "bert"]))])


def test_each_archive_becomes_a_component_with_its_own_copies_and_scaling(tmp_path):
    stack = user_stack()
    endpoint = TritonComponentsEndpoint(
        stack, "Shared", models=_models(tmp_path), instance_type="ml.g5.12xlarge", endpoint_name="shared",
        components={"resnet50": ComponentSpec(reservation=Reservation(memory_mb=4096), copies=2, scaling=CopyScaling(
            min_copies=1, max_copies=4, invocations_per_copy=600))},
        managed_instances=ManagedInstances(1, 2))
    template = Template.from_stack(stack)
    template.resource_count_is(COMPONENT, 2)
    template.has_resource_properties(COMPONENT, {
        "InferenceComponentName": "shared-resnet50", "RuntimeConfig": {"CopyCount": 2},
        "Specification": Match.object_like({"ComputeResourceRequirements": {
            "NumberOfAcceleratorDevicesRequired": 1, "MinMemoryRequiredInMb": 4096}})})
    template.has_resource_properties(COMPONENT, {"InferenceComponentName": "shared-text-classifier",
                                                 "RuntimeConfig": {"CopyCount": 1}})
    # The ensemble's archive serves the ensemble: the container is told which of its three models.
    template.has_resource_properties("AWS::SageMaker::Model", {"PrimaryContainer": Match.object_like({
        "Environment": Match.object_like({"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "text-classifier"})})})
    template.has_resource_properties("AWS::SageMaker::EndpointConfig", {"ProductionVariants": [Match.object_like({
        "InstanceType": "ml.g5.12xlarge", "ManagedInstanceScaling": {
            "Status": "ENABLED", "MinInstanceCount": 1, "MaxInstanceCount": 2}})]})
    template.resource_count_is("AWS::ApplicationAutoScaling::ScalableTarget", 1)
    # Every copy starts after its archive is in the bucket.
    for resource in template.find_resources(COMPONENT).values():
        assert any("Artifacts" in d for d in resource["DependsOn"]), resource["DependsOn"]
    assert endpoint.component_name("text-classifier") == "shared-text-classifier"
    result = AwsSolutionsChecks().validate_scope(stack)
    assert result.success, sorted(v.rule_name for v in result.violations)


def test_grant_invoke_allows_invoking_this_endpoint_only(tmp_path):
    stack = user_stack()
    endpoint = TritonComponentsEndpoint(stack, "Shared", models=_models(tmp_path), instance_type="ml.g5.12xlarge")
    caller = iam.Role(stack, "Caller", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    endpoint.grant_invoke(caller)
    template = Template.from_stack(stack)
    # The ARN written out with the endpoint's own name, not its Ref (no dependency of a caller's stack).
    template.has_resource_properties("AWS::IAM::Policy", {"PolicyDocument": {"Statement": [{
        "Action": "sagemaker:InvokeEndpoint", "Effect": "Allow",
        "Resource": {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"},
                                       f":sagemaker:us-east-1:111122223333:endpoint/{endpoint.endpoint_name.lower()}"]]}}],
        "Version": "2012-10-17"}})


def test_settings_for_a_model_no_archive_leads_are_refused(tmp_path):
    with pytest.raises(PropsError) as caught:
        TritonComponentsEndpoint(user_stack(), "Shared", models=_models(tmp_path), instance_type="ml.g5.12xlarge",
                                 components={"bert": ComponentSpec()}, component_names={"nope": "x"})
    assert str(caught.value) == (
        "TritonComponentsEndpoint UserApp/Shared: 2 problems\n"
        "  - components.bert: got 'bert'; allowed: a model that leads an archive (resnet50, text-classifier); "
        "fix: key each ComponentSpec by the first model of its archive\n"
        "  - component_names.nope: got 'nope'; allowed: a model that leads an archive (resnet50, text-classifier); "
        "fix: key each name by the first model of its archive")


def test_a_reservation_the_instance_type_cannot_hold_is_refused(tmp_path):
    with pytest.raises(PropsError) as caught:
        TritonComponentsEndpoint(user_stack(), "Shared", models=_models(tmp_path), instance_type="ml.g5.xlarge",
                                 endpoint_name="shared",
                                 components={"resnet50": ComponentSpec(reservation=Reservation(gpus=8))})
    assert str(caught.value) == (
        "TritonComponentsEndpoint UserApp/Shared: 1 problem\n"
        "  - components.resnet50.reservation.gpus: got 8; allowed: at most the 1 GPU(s) of one ml.g5.xlarge; "
        "fix: reserve fewer GPUs per copy or choose an instance type with more GPUs")


def test_scale_to_zero_needs_every_component_able_to_reach_zero_copies(tmp_path):
    with pytest.raises(PropsError) as caught:
        TritonComponentsEndpoint(
            user_stack(), "Shared", models=_models(tmp_path), instance_type="ml.g5.12xlarge", endpoint_name="shared",
            managed_instances=ManagedInstances(0, 2),
            components={"resnet50": ComponentSpec(copies=0, scaling=CopyScaling(
                min_copies=0, max_copies=2, invocations_per_copy=100))})
    assert str(caught.value) == (
        "TritonComponentsEndpoint UserApp/Shared: 1 problem\n"
        "  - managed_instances.min_instances: got 0; allowed: 0 only when every component may reach zero copies "
        "(scaling.min_copies: 0); text-classifier keeps 1; fix: set scaling.min_copies: 0 on those components, "
        "or min_instances to 1 or more")
