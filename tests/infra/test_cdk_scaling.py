"""Auto-scaling: one scalable target per variant, after the endpoint; invocations, GPU and CPU policies."""
import aws_cdk as cdk
from aws_cdk.assertions import Capture, Match

from deployment_spec.sections.endpoint import DEFAULT_GPU_TARGET, Scaling
from synth_helpers import resource_id
from triton_constructs import ModelArchive, ModelRepositories, TritonSageMakerEndpoint

S3_MODEL = ModelRepositories.from_archives([ModelArchive.from_s3("s3://my-models/m/model-0123456789ab.tar.gz",
                                                                 ["model"])])


def _policy(template, metric):
    found = template.find_resources("AWS::ApplicationAutoScaling::ScalingPolicy")
    [policy] = [p for p in found.values() if metric in str(p["Properties"])]
    return policy


def test_one_target_per_variant_after_the_endpoint(default_synth):
    template = default_synth.template("prod", "vision-nlp")
    template.resource_count_is("AWS::ApplicationAutoScaling::ScalableTarget", 1)
    # Registered for the variant's instance count, with prod's override bounds, once the endpoint exists
    # and the handover after it has run (it depends on the endpoint).
    after_id = resource_id(template, "Custom::TritonScalingHandover", {"Phase": "after"})
    template.has_resource("AWS::ApplicationAutoScaling::ScalableTarget", {
        "Properties": Match.object_like({
            "ServiceNamespace": "sagemaker", "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
            "ResourceId": "endpoint/Triton-prod-vision-nlp/variant/AllTraffic",
            "MinCapacity": 2, "MaxCapacity": 8}),
        "DependsOn": [after_id]})
    # Both policies sit on that one target.
    target_id = resource_id(template, "AWS::ApplicationAutoScaling::ScalableTarget")
    policies = template.find_resources("AWS::ApplicationAutoScaling::ScalingPolicy")
    assert [p["Properties"]["ScalingTargetId"] for p in policies.values()] == [{"Ref": target_id}] * 2


def test_scaling_uses_the_service_linked_role(default_synth):
    template = default_synth.template("dev", "vision-nlp")
    role = Capture()
    template.has_resource_properties("AWS::ApplicationAutoScaling::ScalableTarget", {"RoleARN": role})
    # No extra IAM role: Application Auto Scaling's service-linked role for SageMaker endpoints.
    assert role.as_object()["Fn::Join"][1][-1] == (
        ":role/aws-service-role/sagemaker.application-autoscaling.amazonaws.com/"
        "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint")


def test_invocations_target_is_rps_times_60_times_safety_factor(default_synth):
    # vision-nlp: 40 rps per instance x 60 x 0.5 (default safety factor) = 1200 invocations per minute.
    config = _policy(default_synth.template("dev", "vision-nlp"), "SageMakerVariantInvocationsPerInstance")[
        "Properties"]["TargetTrackingScalingPolicyConfiguration"]
    assert config == {"PredefinedMetricSpecification": {"PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"},
                      "TargetValue": 40 * 60 * 0.5, "ScaleInCooldown": 600, "ScaleOutCooldown": 300}


def test_gpu_utilization_is_the_exact_customized_metric(default_synth):
    config = _policy(default_synth.template("dev", "vision-nlp"), "GPUUtilization")[
        "Properties"]["TargetTrackingScalingPolicyConfiguration"]
    # The per-instance GPU metric of this variant, averaged; ml.g5.xlarge has 1 GPU: target = 70.
    assert config == {
        "CustomizedMetricSpecification": {
            "MetricName": "GPUUtilization", "Namespace": "/aws/sagemaker/Endpoints", "Statistic": "Average",
            "Unit": "Percent", "Dimensions": [{"Name": "EndpointName", "Value": "Triton-dev-vision-nlp"},
                                              {"Name": "VariantName", "Value": "AllTraffic"}]},
        "TargetValue": 70, "ScaleInCooldown": 600, "ScaleOutCooldown": 300}


def test_gpu_target_is_multiplied_by_the_gpu_count(variety_synth):
    config = _policy(variety_synth.template("dev", "big-gpu"), "GPUUtilization")[
        "Properties"]["TargetTrackingScalingPolicyConfiguration"]
    # ml.g5.12xlarge has 4 GPUs and GPUUtilization sums them: 60 % per GPU -> 240; spec cooldowns.
    assert (config["TargetValue"], config["ScaleInCooldown"], config["ScaleOutCooldown"]) == (4 * 60, 900, 120)
    # An explicit invocations target is used as is.
    assert _policy(variety_synth.template("dev", "big-gpu"), "SageMakerVariantInvocationsPerInstance")[
        "Properties"]["TargetTrackingScalingPolicyConfiguration"]["TargetValue"] == 900


def test_default_gpu_target_on_a_multi_gpu_type():
    stack = cdk.Stack(cdk.App(), "Bare", env=cdk.Environment(region="us-east-1"))
    endpoint = TritonSageMakerEndpoint(stack, "Endpoint", models=S3_MODEL, instance_type="ml.g5.12xlarge",
                                       scaling=Scaling(max_instances=3))
    # No spec target: the per-GPU default x 4 GPUs.
    assert endpoint.scaling.gpu_target == DEFAULT_GPU_TARGET * 4


def test_cpu_type_scales_on_cpu_not_gpu(variety_synth):
    template = variety_synth.template("dev", "cpu")
    metrics = [str(p["Properties"]) for p in template.find_resources(
        "AWS::ApplicationAutoScaling::ScalingPolicy").values()]
    # ml.c5.xlarge: no GPU policy; CPUUtilization target 50 % per vCPU x 4 vCPUs; 10 rps x 60 x 0.5.
    assert not any("GPUUtilization" in m for m in metrics)
    assert _policy(template, "CPUUtilization")["Properties"]["TargetTrackingScalingPolicyConfiguration"][
        "TargetValue"] == 200
    assert _policy(template, "SageMakerVariantInvocationsPerInstance")["Properties"][
        "TargetTrackingScalingPolicyConfiguration"]["TargetValue"] == 300
