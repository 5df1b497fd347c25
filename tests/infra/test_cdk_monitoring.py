"""Alarms (units and per-GPU thresholds), the endpoint dashboard, the optional encrypted SNS topic."""

import json

from aws_cdk.assertions import Match

from synth_helpers import resource_id

DIMS = [{"Name": "EndpointName", "Value": "Triton-dev-vision-nlp"}, {"Name": "VariantName", "Value": "AllTraffic"}]


def _alarm(template, metric):
    [alarm] = [a["Properties"] for a in template.find_resources("AWS::CloudWatch::Alarm").values()
               if a["Properties"].get("MetricName") == metric]
    return alarm


def test_latency_alarm_is_in_microseconds(default_synth):
    alarm = _alarm(default_synth.template("dev", "vision-nlp"), "ModelLatency")
    # latency_sla_ms 200 -> 200,000 µs, average over 1-minute periods of this variant.
    assert (alarm["Threshold"], alarm["Statistic"], alarm["Period"], alarm["Namespace"], alarm["Dimensions"]) == (
        200_000, "Average", 60, "AWS/SageMaker", DIMS)
    assert alarm["TreatMissingData"] == "notBreaching"


def test_error_gpu_memory_and_disk_alarms(default_synth, variety_synth):
    template = default_synth.template("dev", "vision-nlp")
    errors = _alarm(template, "Invocation5XXErrors")
    # Any 5XX error in a minute (threshold 1, Sum).
    assert (errors["Threshold"], errors["Statistic"], errors["ComparisonOperator"]) == (
        1, "Sum", "GreaterThanOrEqualToThreshold")
    # GPU memory sums over GPUs: 90 % on 1 GPU -> 90; on ml.g5.12xlarge's 4 GPUs -> 360.
    assert _alarm(template, "GPUMemoryUtilization")["Threshold"] == 90
    assert _alarm(variety_synth.template("dev", "big-gpu"), "GPUMemoryUtilization")["Threshold"] == 360
    assert _alarm(template, "DiskUtilization")["Namespace"] == "/aws/sagemaker/Endpoints"
    # A CPU instance type has no GPU alarm.
    assert "GPUMemoryUtilization" not in json.dumps(variety_synth.template("dev", "cpu").find_resources(
        "AWS::CloudWatch::Alarm"))


def test_multi_model_endpoints_watch_model_loading_and_cache(default_synth):
    template = default_synth.template("dev", "vision-nlp")
    wait = _alarm(template, "ModelLoadingWaitTime")
    hit = _alarm(template, "ModelCacheHit")
    # Loading wait 10 s -> 10,000,000 µs; cache hit ratio below 0.5 alarms.
    assert wait["Threshold"] == 10_000_000
    assert (hit["Threshold"], hit["ComparisonOperator"], hit["Statistic"]) == (0.5, "LessThanThreshold", "Average")
    # A single-model endpoint has neither.
    names = [a["Properties"].get("MetricName", "PromQL") for a in default_synth.template("dev", "classifier")
             .find_resources("AWS::CloudWatch::Alarm").values()]
    assert sorted(names) == ["DiskUtilization", "GPUMemoryUtilization", "Invocation5XXErrors", "ModelLatency", "PromQL"]


def test_tritons_queue_time_alarms_above_its_share_of_the_sla(default_synth):
    # Triton's own metrics (through SageMaker detailed observability): queue ms per request, per model.
    [queue] = [a["Properties"] for a in default_synth.template("dev", "classifier").find_resources(
        "AWS::CloudWatch::Alarm").values() if "EvaluationCriteria" in a["Properties"]]
    criteria = queue["EvaluationCriteria"]["PromQLCriteria"]
    name = "Triton-dev-classifier"

    def rate(metric: str) -> str:
        return f'sum by (model) (rate({{"{metric}", "aws.sagemaker.endpoint.name"="{name}"}}[5m]))'
    # The classifier keeps the default 500 ms SLA: queue above 50 % of it, for 5 minutes.
    assert criteria["Query"] == (f"({rate('nv_inference_queue_duration_us')} / "
                                 f"{rate('nv_inference_request_success')}) / 1000 > 250")
    assert (criteria["PendingPeriod"], queue["EvaluationInterval"]) == (300, 60)


def test_dashboard_per_endpoint(default_synth):
    template = default_synth.template("dev", "vision-nlp")
    body = next(iter(template.find_resources("AWS::CloudWatch::Dashboard").values()))["Properties"]
    assert body["DashboardName"] == "Triton-dev-vision-nlp"
    text = json.dumps(body["DashboardBody"])
    # Latency split, traffic, instance count, GPU, and the MME cache widgets.
    for needle in ("ModelLatency", "OverheadLatency", "Invocations", "InvocationsPerInstance", "GPUUtilization",
                   "LoadedModelCount", "ModelCacheHit", "scaling target"):
        assert needle in text, needle
    single = json.dumps(default_synth.template("dev", "classifier").find_resources("AWS::CloudWatch::Dashboard"))
    assert "LoadedModelCount" not in single


def test_alarm_topic_is_encrypted_ssl_only_and_wired(variety_synth, default_synth):
    template = variety_synth.template("dev", "embeddings")
    key_id = resource_id(template, "AWS::KMS::Key")
    topic_id = resource_id(template, "AWS::SNS::Topic")
    # The topic is encrypted with its own rotating key, which CloudWatch may use.
    template.has_resource_properties("AWS::SNS::Topic", {"KmsMasterKeyId": {"Fn::GetAtt": [key_id, "Arn"]}})
    template.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True, "KeyPolicy": {
        "Statement": Match.array_with([Match.object_like({
            "Principal": {"Service": "cloudwatch.amazonaws.com"}, "Action": ["kms:Decrypt", "kms:GenerateDataKey*"]})])}})
    # SSL-only topic policy.
    template.has_resource_properties("AWS::SNS::TopicPolicy", {"PolicyDocument": {"Statement": Match.array_with([
        Match.object_like({"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}})])}})
    # Every alarm notifies the topic on ALARM and OK.
    for alarm in template.find_resources("AWS::CloudWatch::Alarm").values():
        assert alarm["Properties"]["AlarmActions"] == [{"Ref": topic_id}] == alarm["Properties"]["OKActions"]
    # Without sns_topic, no topic.
    default_synth.template("dev", "vision-nlp").resource_count_is("AWS::SNS::Topic", 0)
