"""Inference components as synthesized from examples/inference-components.yaml: the endpoint, one component per
model with its own model, reservation, scaling, alarms and dashboard; scale to zero in dev; rolling updates
under guardrails; the construct's own refusals."""
import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Match, Template

from deployment_spec.sections.components import CopyScaling, ManagedInstances, RollingUpdate
from synth_helpers import ROOT, resource_id, statements, synth_spec
from triton_constructs import PropsError
from triton_constructs.execution_role import TritonExecutionRole
from triton_constructs.image import TritonImage
from triton_constructs.inference_components import ComponentProps, TritonInferenceComponents

IC = "AWS::SageMaker::InferenceComponent"
MODELS = ("resnet50", "bert", "text-classifier")


@pytest.fixture(scope="module")
def synth(module_tmp):
    return synth_spec(ROOT / "examples" / "inference-components.yaml", module_tmp.mktemp("inference-components"))


def _components(template: Template) -> dict[str, dict]:
    return {r["Properties"]["InferenceComponentName"].rsplit("-gpu-", 1)[1]: r["Properties"]
            for r in template.find_resources(IC).values()}


def test_the_variant_has_no_model_and_managed_instance_scaling(synth):
    template = synth.template("dev", "shared-gpu")
    role = resource_id(template, "AWS::IAM::Role", {"AssumeRolePolicyDocument": Match.object_like({
        "Statement": [Match.object_like({"Principal": {"Service": "sagemaker.amazonaws.com"}})]})})
    # The configuration runs as the endpoint's own role; its only variant names no model, and SageMaker may
    # release every instance of the dev endpoint (min 0) and add one when a copy needs it. Its instances come
    # from the g5 pool, or from the g6 pool when SageMaker finds no g5 capacity (the example's fallback).
    template.has_resource_properties("AWS::SageMaker::EndpointConfig", {
        "ExecutionRoleArn": {"Fn::GetAtt": [role, "Arn"]},
        "ProductionVariants": [{
            "VariantName": "AllTraffic", "InitialInstanceCount": 1,
            "InstancePools": [{"InstanceType": "ml.g5.12xlarge", "Priority": 1},
                              {"InstanceType": "ml.g6.12xlarge", "Priority": 2}],
            "ManagedInstanceScaling": {"Status": "ENABLED", "MinInstanceCount": 0, "MaxInstanceCount": 1},
            "RoutingConfig": {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"},
            "InferenceAmiVersion": Match.any_value()}]})


def test_one_component_per_model_with_its_own_model_and_reservation(synth):
    template = synth.template("staging", "shared-gpu")
    components = _components(template)
    assert sorted(components) == sorted(MODELS)
    endpoint = resource_id(template, "AWS::SageMaker::Endpoint")
    for model, props in components.items():
        model_id = props["Specification"]["ModelName"]["Fn::GetAtt"][0]
        # Each component runs its own SageMaker model on the endpoint (created first), named for callers.
        assert props["EndpointName"] == {"Fn::GetAtt": [endpoint, "EndpointName"]}
        assert props["InferenceComponentName"] == f"Shared-staging-shared-gpu-{model}"
        assert template.to_json()["Resources"][model_id]["Type"] == "AWS::SageMaker::Model"
    # What one copy reserves, and how many copies start.
    assert components["text-classifier"]["Specification"]["ComputeResourceRequirements"] == {
        "NumberOfAcceleratorDevicesRequired": 1, "NumberOfCpuCoresRequired": 8, "MinMemoryRequiredInMb": 16384}
    assert components["resnet50"]["RuntimeConfig"] == {"CopyCount": 1}
    assert components["bert"]["Specification"]["StartupParameters"] == {
        "ContainerStartupHealthCheckTimeoutInSeconds": 600, "ModelDataDownloadTimeoutInSeconds": 600}


def test_the_ensemble_component_names_its_default_model(synth):
    template = synth.template("staging", "shared-gpu")
    envs = {}
    for props in _components(template).values():
        model = template.to_json()["Resources"][props["Specification"]["ModelName"]["Fn::GetAtt"][0]]
        envs[props["InferenceComponentName"]] = model["Properties"]["PrimaryContainer"]["Environment"]
    # The ensemble's archive holds three top-level models: the container serves the ensemble; single-model
    # archives need no name (the container serves the only one).
    assert envs["Shared-staging-shared-gpu-text-classifier"]["SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"] == \
        "text-classifier"
    assert "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME" not in envs["Shared-staging-shared-gpu-resnet50"]


def test_copies_scale_on_the_predefined_per_copy_metrics(synth):
    template = synth.template("prod", "shared-gpu")
    # One scalable target per component, on its copy count, within its bounds.
    template.has_resource_properties("AWS::ApplicationAutoScaling::ScalableTarget", {
        "ResourceId": "inference-component/Shared-prod-shared-gpu-resnet50", "ServiceNamespace": "sagemaker",
        "ScalableDimension": "sagemaker:inference-component:DesiredCopyCount", "MinCapacity": 2, "MaxCapacity": 6})
    metrics = sorted((p["Properties"]["TargetTrackingScalingPolicyConfiguration"]["PredefinedMetricSpecification"][
        "PredefinedMetricType"], p["Properties"]["TargetTrackingScalingPolicyConfiguration"]["TargetValue"])
        for p in template.find_resources("AWS::ApplicationAutoScaling::ScalingPolicy").values())
    assert metrics == [("SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution", 4),
                       ("SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution", 4),
                       ("SageMakerInferenceComponentInvocationsPerCopy", 1200)]
    # No component can reach zero in prod: no wake-up policy or alarm.
    template.resource_properties_count_is("AWS::ApplicationAutoScaling::ScalingPolicy",
                                          {"PolicyType": "StepScaling"}, 0)


def test_scale_to_zero_wakes_up_on_no_capacity_failures(synth):
    template = synth.template("dev", "shared-gpu")
    target = resource_id(template, "AWS::ApplicationAutoScaling::ScalableTarget",
                         {"ResourceId": "inference-component/Shared-dev-shared-gpu-bert"})
    template.has_resource_properties("AWS::ApplicationAutoScaling::ScalableTarget", {
        "ResourceId": "inference-component/Shared-dev-shared-gpu-bert", "MinCapacity": 0, "MaxCapacity": 1})
    # The documented step policy: +1 copy from zero, on the Maximum of the alarm's metric, 60 s cooldown.
    step = resource_id(template, "AWS::ApplicationAutoScaling::ScalingPolicy",
                       {"ScalingTargetId": {"Ref": target}, "PolicyType": "StepScaling"})
    template.has_resource_properties("AWS::ApplicationAutoScaling::ScalingPolicy", {
        "ScalingTargetId": {"Ref": target}, "PolicyType": "StepScaling",
        "StepScalingPolicyConfiguration": {
            "AdjustmentType": "ChangeInCapacity", "MetricAggregationType": "Maximum", "Cooldown": 60,
            "StepAdjustments": [{"MetricIntervalLowerBound": 0, "ScalingAdjustment": 1}]}})
    # Run by an alarm on the component's NoCapacityInvocationFailures: the first refused request wakes it.
    template.has_resource_properties("AWS::CloudWatch::Alarm", {
        "Namespace": "AWS/SageMaker", "MetricName": "NoCapacityInvocationFailures", "Statistic": "Sum",
        "Period": 60, "EvaluationPeriods": 1, "Threshold": 1, "ComparisonOperator": "GreaterThanOrEqualToThreshold",
        "Dimensions": [{"Name": "InferenceComponentName", "Value": "Shared-dev-shared-gpu-bert"}],
        "AlarmActions": [{"Ref": step}]})
    # Every component of dev scales to zero; the scalable target is registered after its component exists.
    template.resource_properties_count_is("AWS::ApplicationAutoScaling::ScalingPolicy",
                                          {"PolicyType": "StepScaling"}, 3)
    component = resource_id(template, IC, {"InferenceComponentName": "Shared-dev-shared-gpu-bert"})
    assert component in template.to_json()["Resources"][target]["DependsOn"]


def test_guardrails_update_components_in_rolling_batches_with_auto_rollback(synth):
    template = synth.template("staging", "shared-gpu")
    props = _components(template)["bert"]
    alarms = [a["AlarmName"]["Ref"] for a in props["DeploymentConfig"]["AutoRollbackConfiguration"]["Alarms"]]
    # Half the copies per batch, 5 minutes of baking each, rolled back on the component's own 5XX and latency alarms.
    assert props["DeploymentConfig"]["RollingUpdatePolicy"] == {
        "MaximumBatchSize": {"Type": "CAPACITY_PERCENT", "Value": 50}, "WaitIntervalInSeconds": 300,
        "MaximumExecutionTimeoutInSeconds": 3000}
    resources = template.to_json()["Resources"]
    assert sorted(resources[a]["Properties"]["MetricName"] for a in alarms) == ["Invocation5XXErrors", "ModelLatency"]
    assert {d["Value"] for a in alarms for d in resources[a]["Properties"]["Dimensions"]} == {
        "Shared-staging-shared-gpu-bert"}
    # The role may read exactly the rollback alarms (two per component).
    role = resource_id(template, "AWS::IAM::Role", {"Description": Match.string_like_regexp("least privilege")})
    (describe,) = [s for s in statements(template, role) if s["Action"] == "cloudwatch:DescribeAlarms"]
    assert len(describe["Resource"]) == 6
    # Without guardrails SageMaker's own update applies.
    assert all("DeploymentConfig" not in p for p in _components(synth.template("dev", "shared-gpu")).values())


def test_alarms_and_a_dashboard_per_component(synth):
    template = synth.template("staging", "shared-gpu")
    # Per component: latency, 5XX and GPU memory of its copies (normalized per reservation); one dashboard each.
    for model in MODELS:
        name = f"Shared-staging-shared-gpu-{model}"
        for metric, namespace in (("ModelLatency", "AWS/SageMaker"), ("Invocation5XXErrors", "AWS/SageMaker"),
                                  ("GPUMemoryUtilizationNormalized", "/aws/sagemaker/InferenceComponents")):
            template.has_resource_properties("AWS::CloudWatch::Alarm", {
                "MetricName": metric, "Namespace": namespace,
                "Dimensions": [{"Name": "InferenceComponentName", "Value": name}]})
        template.has_resource_properties("AWS::CloudWatch::Dashboard", {"DashboardName": name})


def test_logs_of_the_endpoint_and_each_component_only(synth):
    template = synth.template("staging", "shared-gpu")
    groups = sorted(g["Properties"]["LogGroupName"] for g in template.find_resources("AWS::Logs::LogGroup").values()
                    if "LogGroupName" in g["Properties"])
    assert groups == ["/aws/sagemaker/Endpoints/Shared-staging-shared-gpu"] + [
        f"/aws/sagemaker/InferenceComponents/Shared-staging-shared-gpu-{m}" for m in sorted(MODELS)]


def test_outputs_name_every_component(synth):
    outputs = synth.template("prod", "shared-gpu").find_outputs("*")
    assert outputs["InferenceComponents"]["Value"] == " ".join(
        f"Shared-prod-shared-gpu-{m}" for m in MODELS)
    assert "--inference-component-name Shared-prod-shared-gpu-resnet50 " in outputs["InvokeCommand"]["Value"]


def _bare(**overrides):
    stack = cdk.Stack(cdk.App(), "Bare", env=cdk.Environment(region="us-east-1"))
    image = TritonImage(stack, "Image", version="25.09")
    bucket = cdk.aws_s3.Bucket(stack, "Bucket")
    key = cdk.aws_kms.Key(stack, "Key")
    role = TritonExecutionRole(stack, "Role", image=image, bucket=bucket, key=key, model_prefix="models/e/")
    args = dict(image=image, execution_role=role, endpoint_name="e", instance_type="ml.g5.12xlarge",
                components=[_props("a")])
    args.update(overrides)
    return stack, TritonInferenceComponents(stack, "Endpoint", **args)


def _props(model, **overrides):
    args = dict(model=model, name=f"e-{model}", model_data_url=f"s3://b/{model}.tar.gz", archive_models=[model])
    args.update(overrides)
    return ComponentProps(**args)


def test_props_refuse_an_archive_with_several_models_and_no_default():
    with pytest.raises(PropsError) as caught:
        _props("ensemble", archive_models=["ensemble", "pre", "bert"], name="bad_name")
    assert str(caught.value) == (
        "ComponentProps: 2 problems\n"
        "  - name: got the inference component name 'bad_name'; allowed: <project>-<environment>-<endpoint>-<model> "
        "of 1-63 letters, digits or '-'; fix: rename the model or endpoint (no '_') or shorten the project, "
        "environment or endpoint name\n"
        "  - default_model: got nothing; allowed: one of the archive's models (ensemble, pre, bert); fix: name the "
        "model callers reach (an ensemble, not one of its steps)")


def test_the_construct_refuses_what_sagemaker_would_refuse_all_at_once():
    with pytest.raises(PropsError) as caught:
        _bare(components=[_props("a", gpus=5), _props("b", copies=1, scaling=CopyScaling(
            min_copies=1, max_copies=2, invocations_per_copy=10))],
              managed_instances=ManagedInstances(0, 1), rolling_update=RollingUpdate(max_execution_timeout_s=600))
    assert str(caught.value) == (
        "TritonInferenceComponents e: 3 problems\n"
        "  - managed_instances.min_instances: got 0; allowed: 0 only when every component may reach zero copies "
        "(scaling.min_copies: 0); a keeps 1, b keeps 1; fix: set scaling.min_copies: 0 on those components, or "
        "min_instances to 1 or more\n"
        "  - components.a.reservation.gpus: got 5; allowed: at most the 4 GPU(s) of one ml.g5.12xlarge; fix: reserve fewer GPUs "
        "per copy or choose an instance type with more GPUs\n"
        "  - rolling_update.max_execution_timeout_s: got 600; allowed: at least 3000 s: 2 batch(es) of 50 % x (copy "
        "start 1200 s + wait_s 300); fix: raise it, or leave it out to have it computed")


def test_grant_invoke_names_the_endpoint():
    stack, endpoint = _bare()
    user = iam.User(stack, "Caller")
    endpoint.grant_invoke(user)
    template = Template.from_stack(stack)
    # InvokeEndpoint on this endpoint's ARN, written out (no Ref: a caller's stack would depend on this one).
    template.has_resource_properties("AWS::IAM::Policy", {"PolicyDocument": {"Statement": [{
        "Action": "sagemaker:InvokeEndpoint", "Effect": "Allow",
        "Resource": {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":sagemaker:us-east-1:",
                                       {"Ref": "AWS::AccountId"}, ":endpoint/e"]]}}]}})
    assert endpoint.metric_invocations("a").to_metric_config().metric_stat.dimensions[0].value == "e-a"
