"""What CDK users expect of an L3: imports by name, metrics with options, default_child, their own alarm topic,
every real instance type, the same attributes on both public constructs, and 0.1.0's metric calls told their new
form."""
import aws_cdk as cdk
import pytest
from aws_cdk import aws_cloudwatch as cloudwatch, aws_iam as iam, aws_sagemaker as sagemaker, aws_sns as sns
from aws_cdk.assertions import Template

from user_app import model_archive, user_stack
from deployment_spec.facts.instances import InstanceFacts
from triton_constructs import (Alarms, ModelArchive, ModelRepositories, PropsError, TritonComponentsEndpoint,
                               TritonSageMakerEndpoint)


def _models(tmp_path) -> ModelRepositories:
    return ModelRepositories.from_archives([ModelArchive.from_file(model_archive(tmp_path, "resnet50"))])


def test_an_endpoint_deployed_elsewhere_is_imported_by_name_with_grant_and_metrics():
    stack = user_stack()
    imported = TritonSageMakerEndpoint.from_endpoint_name(stack, "Search", "Search-Prod")
    role = iam.Role(stack, "Caller", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    imported.grant_invoke(role)
    latency = imported.metric_model_latency(cloudwatch.MetricOptions(statistic="p99"))
    assert (latency.metric_name, latency.statistic, latency.dimensions) == (
        "ModelLatency", "p99", {"EndpointName": "Search-Prod", "VariantName": "AllTraffic"})
    policy = next(iter(Template.from_stack(stack).find_resources("AWS::IAM::Policy").values()))
    [statement] = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Resource"]["Fn::Join"][1][-1].endswith(":endpoint/search-prod")  # SageMaker ARNs: lower case


def test_an_invalid_name_to_import_is_refused():
    with pytest.raises(PropsError) as caught:
        TritonSageMakerEndpoint.from_endpoint_name(user_stack(), "Search", "search_prod")
    assert str(caught.value).startswith("TritonSageMakerEndpoint.from_endpoint_name Search: 1 problem\n"
                                        "  - endpoint_name: got 'search_prod'")


def test_default_child_is_the_endpoint_on_both_constructs(tmp_path):
    stack = user_stack()
    single = TritonSageMakerEndpoint(stack, "Single", models=_models(tmp_path), instance_type="ml.g5.xlarge")
    shared = TritonComponentsEndpoint(stack, "Shared", models=_models(tmp_path), instance_type="ml.g5.12xlarge")
    assert isinstance(single.node.default_child, sagemaker.CfnEndpoint)
    assert isinstance(shared.node.default_child, sagemaker.CfnEndpoint)
    # The same attributes and metric methods on both.
    for construct in (single, shared):
        assert construct.endpoint_arn and construct.endpoint_name and construct.variant_name == "AllTraffic"
    errors = shared.metric_errors("resnet50", props=cloudwatch.MetricOptions(label="resnet50 5XX"))
    gpu = shared.metric_gpu_utilization("resnet50")
    assert (errors.metric_name, errors.label, gpu.namespace, gpu.metric_name) == (
        "Invocation5XXErrors", "resnet50 5XX", "/aws/sagemaker/InferenceComponents", "GPUUtilizationNormalized")


def test_alarms_notify_the_team_s_own_topic(tmp_path):
    stack = user_stack()
    topic = sns.Topic.from_topic_arn(stack, "OnCall", "arn:aws:sns:us-east-1:111122223333:on-call")
    TritonSageMakerEndpoint(stack, "Single", models=_models(tmp_path), instance_type="ml.g5.xlarge",
                            alarms=Alarms(topic=topic))
    template = Template.from_stack(stack)
    alarms = template.find_resources("AWS::CloudWatch::Alarm").values()
    assert alarms and all(a["Properties"]["AlarmActions"] == ["arn:aws:sns:us-east-1:111122223333:on-call"]
                          for a in alarms)
    assert template.find_resources("AWS::SNS::Topic") == {}


def test_a_topic_and_a_created_topic_are_refused_together():
    stack = user_stack()
    topic = sns.Topic.from_topic_arn(stack, "OnCall", "arn:aws:sns:us-east-1:111122223333:on-call")
    with pytest.raises(PropsError) as caught:
        Alarms(topic=topic, sns_topic=True)
    assert str(caught.value) == (
        "Alarms: 1 problem\n  - topic: got a topic together with sns_topic=True; allowed: one of them; fix: remove "
        "sns_topic=True to notify your topic, or topic= to have one created")


@pytest.mark.parametrize("instance_type", ["ml.c7i.xlarge", "ml.p5e.48xlarge", "ml.g6e.xlarge", "ml.p5.4xlarge"])
def test_real_types_the_old_list_refused_are_served(tmp_path, instance_type):
    TritonSageMakerEndpoint(user_stack(), "Single", models=_models(tmp_path), instance_type=instance_type)


def test_a_size_that_does_not_exist_is_refused_with_the_real_ones(tmp_path):
    with pytest.raises(PropsError) as caught:
        TritonSageMakerEndpoint(user_stack(), "Single", models=_models(tmp_path), instance_type="ml.p5.xlarge")
    assert str(caught.value) == (
        "TritonSageMakerEndpoint UserApp/Single: 1 problem\n  - instance_type: got 'ml.p5.xlarge'; allowed: a SageMaker "
        "real-time instance type (botocore 1.44.5's ProductionVariantInstanceType, 277 types; nearest: ml.p5.4xlarge, "
        "ml.p5.48xlarge, ml.r5.xlarge); fix: use one of them; for a type AWS added after botocore 1.44.5, declare its "
        "facts (instance_facts: gpus, compute_capability, vcpus, memory_gib)")


def test_a_type_newer_than_the_pin_is_served_with_its_declared_facts(tmp_path):
    stack = user_stack()
    facts = InstanceFacts(gpus=1, compute_capability="12.0", vcpus=8, memory_gib=64)
    with pytest.raises(PropsError, match="instance_type: got 'ml.g9.2xlarge'"):
        TritonSageMakerEndpoint(stack, "Refused", models=_models(tmp_path), instance_type="ml.g9.2xlarge")
    TritonSageMakerEndpoint(stack, "Single", models=_models(tmp_path), instance_type="ml.g9.2xlarge",
                            instance_facts=facts)
    TritonComponentsEndpoint(stack, "Shared", models=_models(tmp_path), instance_type="ml.g9.2xlarge",
                             instance_facts=facts)
    [config, *_] = [r for r in Template.from_stack(stack).find_resources("AWS::SageMaker::EndpointConfig").values()]
    assert config["Properties"]["ProductionVariants"][0]["InstanceType"] == "ml.g9.2xlarge"


# 0.1.0's metric_model_latency took the statistic first; a string there reached CDK's Metric.with_ and ended in
# "AttributeError: 'str' object has no attribute 'account'". The old forms now say what to write instead.
@pytest.mark.parametrize("imported", [False, True])
def test_the_statistic_where_0_1_0_took_it_is_refused_with_the_new_form(tmp_path, imported):
    stack = user_stack()
    endpoint = (TritonSageMakerEndpoint.from_endpoint_name(stack, "Search", "search-prod") if imported else
                TritonSageMakerEndpoint(stack, "Single", models=_models(tmp_path), instance_type="ml.g5.xlarge"))
    with pytest.raises(TypeError) as caught:
        endpoint.metric_model_latency("p99")
    assert str(caught.value) == (
        f"{type(endpoint).__name__}.metric_model_latency('p99'): props: got 'p99' (str); allowed: a "
        "cloudwatch.MetricOptions or None; fix: the statistic is no longer positional; pass "
        "props=cloudwatch.MetricOptions(statistic='p99')")


def test_0_1_0_s_metric_keywords_are_refused_with_the_new_form():
    imported = TritonSageMakerEndpoint.from_endpoint_name(user_stack(), "Search", "search-prod")
    with pytest.raises(TypeError) as caught:
        imported.metric("ModelLatency", statistic="p99", period=cdk.Duration.minutes(5))
    assert str(caught.value) == (
        "ImportedTritonEndpoint.metric('ModelLatency', statistic='p99', period=Duration(...)): statistic, period: got "
        "cloudwatch.MetricOptions fields as arguments; allowed: metric_name, props, per_instance; fix: pass "
        "props=cloudwatch.MetricOptions(statistic='p99', period=Duration(...))")


def test_a_string_as_a_component_metric_s_props_is_refused(tmp_path):
    shared = TritonComponentsEndpoint(user_stack(), "Shared", models=_models(tmp_path),
                                      instance_type="ml.g5.12xlarge")
    with pytest.raises(TypeError) as caught:
        shared.metric_model_latency("resnet50", "p99")
    assert str(caught.value) == (
        "TritonComponentsEndpoint.metric_model_latency('resnet50', 'p99'): props: got 'p99' (str); allowed: a "
        "cloudwatch.MetricOptions or None; fix: pass props=cloudwatch.MetricOptions(statistic='p99')")
    with pytest.raises(TypeError, match=r"^TritonComponentsEndpoint.metric_errors\(model='resnet50', knd='4XX'\): "
                                        r"knd: got an unknown argument; allowed: model, kind, props; fix: did you "
                                        r"mean 'kind'\?$"):
        shared.metric_errors(model="resnet50", knd="4XX")
