"""Endpoint configuration and endpoint: storage rules per instance type, AMI, timeouts, capture, guardrails."""
from aws_cdk.assertions import Annotations, Capture, Match

from synth_helpers import resource_id


def _variant(template):
    variants = Capture()
    template.has_resource_properties("AWS::SageMaker::EndpointConfig", {"ProductionVariants": variants})
    [variant] = variants.as_array()
    return variant


def test_variant_serves_this_stacks_model(default_synth):
    template = default_synth.template("prod", "vision-nlp")
    model_id = resource_id(template, "AWS::SageMaker::Model")
    variant = _variant(template)
    # The only variant runs the model of this stack on the spec's type and prod's initial count (override).
    assert variant["ModelName"] == {"Fn::GetAtt": [model_id, "ModelName"]}
    assert (variant["InstanceType"], variant["InitialInstanceCount"], variant["VariantName"]) == (
        "ml.g5.xlarge", 2, "AllTraffic")


def test_nvme_instance_types_get_the_kms_key_but_no_volume_size(default_synth, variety_synth):
    for template, key in ((default_synth.template("prod", "vision-nlp"), "Triton-prod-Storage-KeyArn"),
                          (variety_synth.template("dev", "embeddings"), "Test-dev-Storage-KeyArn")):
        # ml.g5 / ml.g4dn have local NVMe storage: the API accepts KmsKeyId there (AWS Config's
        # SAGEMAKER_ENDPOINT_CONFIGURATION_KMS_KEY_CONFIGURED), VolumeSizeInGB has no volume to size.
        template.has_resource_properties("AWS::SageMaker::EndpointConfig", {"KmsKeyId": {"Fn::ImportValue": key}})
        assert "VolumeSizeInGB" not in _variant(template)
        # What the key does and does not encrypt there is recorded in the template for reviewers.
        config = next(iter(template.find_resources("AWS::SageMaker::EndpointConfig").values()))
        assert "hardware module" in config["Metadata"]["KmsKeyId"]


def test_ebs_only_instance_type_gets_the_kms_key_and_volume_size(variety_synth):
    template = variety_synth.template("dev", "cpu")
    # ml.c5 has no instance storage: its ML volume is encrypted with the model bucket's key.
    template.has_resource_properties("AWS::SageMaker::EndpointConfig", {
        "KmsKeyId": {"Fn::ImportValue": "Test-dev-Storage-KeyArn"}})
    variant = _variant(template)
    assert variant["VolumeSizeInGB"] == 40
    # A CPU instance type gets no GPU inference AMI.
    assert "InferenceAmiVersion" not in variant


def test_inference_ami_meets_the_images_minimum_driver(default_synth):
    # The default spec's Triton image needs driver 580 (CUDA 13): the gpu-4-1 AMI, not the hosts' default 470.
    assert _variant(default_synth.template("dev", "classifier"))["InferenceAmiVersion"] == \
        "al2023-ami-sagemaker-inference-gpu-4-1"


def test_timeouts_from_the_spec(default_synth):
    variant = _variant(default_synth.template("dev", "classifier"))
    assert (variant["ContainerStartupHealthCheckTimeoutInSeconds"],
            variant["ModelDataDownloadTimeoutInSeconds"]) == (600, 600)


def test_data_capture_goes_to_the_model_bucket(variety_synth):
    # Single-model data capture: input only at 25 %, under the endpoint's capture prefix, with the bucket key.
    variety_synth.template("dev", "cpu").has_resource_properties("AWS::SageMaker::EndpointConfig", {
        "DataCaptureConfig": {
            "EnableCapture": True, "InitialSamplingPercentage": 25,
            "CaptureOptions": [{"CaptureMode": "Input"}],
            "DestinationS3Uri": {"Fn::Join": ["", ["s3://", {"Fn::ImportValue": "Test-dev-Storage-BucketName"},
                                                   "/data-capture/cpu/"]]},
            "KmsKeyId": {"Fn::ImportValue": "Test-dev-Storage-KeyArn"},
            "CaptureContentTypeHeader": {"JsonContentTypes": ["application/json"]}}})


def test_endpoint_keeps_autoscaled_counts_and_has_a_stable_name(default_synth):
    template = default_synth.template("dev", "vision-nlp")
    config_id = resource_id(template, "AWS::SageMaker::EndpointConfig")
    # Config updates keep the instance count the autoscaler chose; the name is <project>-<env>-<endpoint>.
    template.has_resource_properties("AWS::SageMaker::Endpoint", {
        "EndpointConfigName": {"Fn::GetAtt": [config_id, "EndpointConfigName"]},
        "EndpointName": "Triton-dev-vision-nlp", "RetainAllVariantProperties": True})


def test_guarded_deployment_only_where_the_environment_asks(default_synth):
    # dev has no guardrails: SageMaker's default all-at-once update.
    default_synth.template("dev", "vision-nlp").has_resource_properties(
        "AWS::SageMaker::Endpoint", {"DeploymentConfig": Match.absent()})
    # prod runs vision-nlp on 2+ instances: a blue/green canary (10 % of capacity, 5 min bake). staging
    # can be down to 1 instance, where a canary would be 100 % (CanarySize must be <= 50 %): all at once,
    # still baked and rolled back by the alarms. The timeout covers the new fleet's start (download 600 s
    # + health check 600 s) and every wait.
    for environment, routing, timeout in (
            ("prod", {"Type": "CANARY", "WaitIntervalInSeconds": 300,
                      "CanarySize": {"Type": "CAPACITY_PERCENT", "Value": 10}}, 600 + 600 + 2 * 300 + 120),
            ("staging", {"Type": "ALL_AT_ONCE", "WaitIntervalInSeconds": 300}, 600 + 600 + 300 + 120)):
        template = default_synth.template(environment, "vision-nlp")
        errors = resource_id(template, "AWS::CloudWatch::Alarm", {"MetricName": "Invocation5XXErrors"})
        latency = resource_id(template, "AWS::CloudWatch::Alarm", {"MetricName": "ModelLatency"})
        template.has_resource_properties("AWS::SageMaker::Endpoint", {"DeploymentConfig": {
            "BlueGreenUpdatePolicy": {
                "TrafficRoutingConfiguration": routing,
                "TerminationWaitInSeconds": 120, "MaximumExecutionTimeoutInSeconds": timeout},
            "AutoRollbackConfiguration": {"Alarms": [{"AlarmName": {"Ref": errors}},
                                                     {"AlarmName": {"Ref": latency}}]}}})


def test_linear_and_all_at_once_strategies(variety_synth):
    variety_synth.template("china", "big-gpu").has_resource_properties("AWS::SageMaker::Endpoint", {
        "DeploymentConfig": Match.object_like({"BlueGreenUpdatePolicy": Match.object_like({
            "TrafficRoutingConfiguration": {"Type": "LINEAR", "WaitIntervalInSeconds": 120,
                                            "LinearStepSize": {"Type": "CAPACITY_PERCENT", "Value": 50}}})})})
    # auto_rollback false: no alarms named.
    variety_synth.template("china", "cpu").has_resource_properties("AWS::SageMaker::Endpoint", {
        "DeploymentConfig": {"BlueGreenUpdatePolicy": Match.object_like({
            "TrafficRoutingConfiguration": {"Type": "ALL_AT_ONCE", "WaitIntervalInSeconds": 300}})}})


def test_guarded_role_may_read_its_rollback_alarms(default_synth):
    template = default_synth.template("prod", "classifier")
    errors = resource_id(template, "AWS::CloudWatch::Alarm", {"MetricName": "Invocation5XXErrors"})
    latency = resource_id(template, "AWS::CloudWatch::Alarm", {"MetricName": "ModelLatency"})
    template.has_resource_properties("AWS::IAM::Policy", {"PolicyDocument": {"Statement": Match.array_with([
        {"Action": "cloudwatch:DescribeAlarms", "Effect": "Allow",
         "Resource": [{"Fn::GetAtt": [errors, "Arn"]}, {"Fn::GetAtt": [latency, "Arn"]}]}])}})


def test_endpoint_log_group_retention_per_environment(default_synth):
    # Kept on update and delete, but removed when a first create rolls back: the fixed name would make
    # the retry fail with "already exists". A year everywhere: AWS Control Tower's CT.CLOUDWATCH.PR.2 minimum.
    for environment, days, policy, on_replace in (("dev", 365, "Delete", "Delete"),
                                                  ("prod", 365, "RetainExceptOnCreate", "Retain")):
        template = default_synth.template(environment, "classifier")
        template.has_resource("AWS::Logs::LogGroup", {
            "Properties": {"LogGroupName": f"/aws/sagemaker/Endpoints/Triton-{environment}-classifier",
                           "RetentionInDays": days}, "DeletionPolicy": policy, "UpdateReplacePolicy": on_replace})


def test_instance_count_is_retained_only_where_scaling_owns_it(default_synth, variety_synth):
    # Scaled: the running count survives an update; weight and data capture follow the new config.
    default_synth.template("prod", "classifier").has_resource_properties("AWS::SageMaker::Endpoint", {
        "RetainAllVariantProperties": True,
        "ExcludeRetainedVariantProperties": [{"VariantPropertyType": "DesiredWeight"},
                                             {"VariantPropertyType": "DataCaptureConfig"}]})
    # Not scaled: a changed initial_instances must take effect, so nothing is retained.
    unscaled = [name for name, ep in variety_synth.spec.endpoints.items() if ep.scaling is None]
    assert unscaled
    for name in unscaled:
        variety_synth.template("china", name).has_resource_properties("AWS::SageMaker::Endpoint", {
            "RetainAllVariantProperties": False, "ExcludeRetainedVariantProperties": Match.absent()})


def test_scaled_endpoint_says_initial_instances_applies_at_creation(default_synth):
    infos = [m for m in Annotations.from_stack(default_synth.stack("prod", "vision-nlp")).find_info(
        "*", Match.string_like_regexp("auto-scaling owns the instance count"))]
    assert [m.entry.data for m in infos] == [
        "endpoint Triton-prod-vision-nlp: auto-scaling owns the instance count, so an update keeps the running "
        "count; initial_instances (2) applies when the endpoint is created (change the scaling bounds to move a "
        "running endpoint)"]


def test_the_host_ami_says_why_in_the_template(default_synth):
    template = default_synth.template("prod", "classifier")
    template.has_resource("AWS::SageMaker::EndpointConfig", {
        "Properties": Match.object_like({"ProductionVariants": [Match.object_like(
            {"InferenceAmiVersion": "al2023-ami-sagemaker-inference-gpu-4-1"})]}),
        "Metadata": Match.object_like({"InferenceAmiVersion": (
            "sagemaker-tritonserver:25.09 is built on CUDA 13.0.1, which needs NVIDIA driver >= 580; "
            "al2023-ami-sagemaker-inference-gpu-4-1 has driver 580 (the instances' default AMI has 470)")})})


def test_replaced_models_and_configs_are_kept_and_deleted_ones_follow_the_removal_policy(default_synth):
    # CloudFormation deletes a replaced resource in the update's cleanup; a SageMaker auto-rollback may
    # have put the endpoint back on it, so the old Model and EndpointConfig are retained in every environment.
    # A deleted one (its stack deleted, or its logical ID changed: the same cleanup) goes with a `destroy`
    # environment; a `retain` one keeps it unless the operation that created it rolled back (no orphans of a
    # failed create). Both policies are set: cfn-lint W3011 and CDK's synth-time validation ask for both.
    for environment, on_delete in (("dev", "Delete"), ("prod", "RetainExceptOnCreate")):
        template = default_synth.template(environment, "classifier").to_json()
        for kind in ("AWS::SageMaker::Model", "AWS::SageMaker::EndpointConfig"):
            (resource,) = [r for r in template["Resources"].values() if r["Type"] == kind]
            assert (resource["UpdateReplacePolicy"], resource["DeletionPolicy"]) == ("Retain", on_delete), (
                environment, kind)
